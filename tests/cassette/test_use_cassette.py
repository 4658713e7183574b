"""``use_cassette`` as a block: one activation at a time, one block per file, arguments checked up front."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsh_replay import CassetteError, GenerateOptions, Message, use_cassette
from dsh_replay.cassette.intercept import NothingRecordedWarning, active_handlers
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

OPTIONS = GenerateOptions(model="m", messages=[Message(role="user", content="hi")])


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        emulator.add("GET", "/ping", ScriptedResponse.json({"ok": True}))
        yield emulator


def test_entering_the_same_object_twice_is_refused_and_leaves_nothing_active(tmp_path: Path) -> None:
    block = use_cassette(tmp_path / "a.yaml", "once")
    with pytest.warns(NothingRecordedWarning), block, pytest.raises(
        CassetteError, match=r"is already active: one use_cassette serves one block at a time"
    ):
        block.__enter__()
    assert active_handlers() == []


def test_the_same_object_can_serve_one_block_after_another(tmp_path: Path, emu: ProviderEmulator) -> None:
    block = use_cassette(tmp_path / "a.yaml", "new_episodes")
    for _ in range(2):
        with block as session, httpx.Client() as client:
            client.get(emu.url("/ping"))
        assert session.played + session.recorded == 1
    assert active_handlers() == []


def test_nesting_a_block_on_the_same_file_is_refused(tmp_path: Path) -> None:
    inner = use_cassette(tmp_path / "sub" / ".." / "a.yaml", "once")
    with pytest.warns(NothingRecordedWarning), use_cassette(tmp_path / "a.yaml", "once"), pytest.raises(
        CassetteError, match=r"a\.yaml is already in use by an enclosing"
    ):
        inner.__enter__()


def test_a_nested_block_on_another_file_serves_the_requests_inside_it(tmp_path: Path, emu: ProviderEmulator) -> None:
    with use_cassette(tmp_path / "outer.yaml", "once") as outer, httpx.Client() as client:
        client.get(emu.url("/ping"))
        with use_cassette(tmp_path / "inner.yaml", "once") as inner:
            client.get(emu.url("/ping"))
    assert (outer.recorded, inner.recorded) == (1, 1)
    assert (tmp_path / "outer.yaml").exists() and (tmp_path / "inner.yaml").exists()


def test_exit_without_enter_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="__exit__ without __enter__"):
        use_cassette(tmp_path / "a.yaml").__exit__(None, None, None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"options": {"model": "m"}}, "options must be GenerateOptions or None, got {'model': 'm'}"),
        ({"scrubber": "x"}, "scrubber must be a Scrubber or None, got 'x'"),
        ({"fault": "reset"}, "fault must be a Fault or None, got 'reset'"),
        ({"route": 5}, "route must be a route name or None, got 5"),
        ({"matchers": "method"}, "matchers must be a list of functions"),
        ({"matchers": ["method"]}, "matchers must be a list of functions"),
    ],
)
def test_arguments_of_the_wrong_kind_are_refused_naming_them(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CassetteError, match="use_cassette: " + message.replace("(", r"\(").replace(")", r"\)")):
        use_cassette(tmp_path / "a.yaml", "once", **kwargs).__enter__()  # type: ignore[arg-type]
    assert active_handlers() == []


@pytest.mark.parametrize("path", [None, 5, ""])
def test_a_path_that_is_no_path_is_refused(path: object) -> None:
    with pytest.raises(CassetteError, match="path must be a file path"):
        use_cassette(path).__enter__()  # type: ignore[arg-type]


def test_a_cassette_that_cannot_be_written_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    with pytest.raises(CassetteError, match=r"cannot be recorded: .*afile is a file, so the folder for x\.yaml cannot be made"):
        use_cassette(tmp_path / "afile" / "x.yaml", "once").__enter__()
    assert active_handlers() == []


def test_a_matcher_that_raises_is_named(tmp_path: Path, emu: ProviderEmulator) -> None:
    path = tmp_path / "a.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        client.get(emu.url("/ping"))

    def broken(wanted: object, recorded: object) -> bool:
        raise ValueError("oops")

    with use_cassette(path, matchers=[broken]), httpx.Client() as client, pytest.raises(CassetteError, match="matcher broken raised ValueError: oops"):
        client.get(emu.url("/ping"))
