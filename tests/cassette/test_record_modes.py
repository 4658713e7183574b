"""Record modes: which ones reach the server, write the file, or refuse.

The cassette on disk (when it exists) holds ``GET /recorded`` answered with
``old``; the live server answers ``live``. So the body tells replay from
network, the emulator's request log counts network calls, and the file's bytes
tell whether it was written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, RecordMode, use_cassette
from dsh_replay.cassette.intercept import NothingRecordedWarning
from dsh_replay.cassette.store import FORMAT_VERSION, Cassette, Interaction
from dsh_replay.testing import ProviderEmulator, ScriptedResponse


@dataclass(frozen=True)
class Outcome:
    calls_server: bool
    raises: bool
    writes: bool
    interactions_after: int  # in the file afterwards (0: no file)


# (mode, file exists, request recorded) -> outcome
R, N = "recorded", "new"
EXPECTED: dict[tuple[str, bool, str], Outcome] = {
    ("none", True, R): Outcome(calls_server=False, raises=False, writes=False, interactions_after=1),
    ("none", True, N): Outcome(calls_server=False, raises=True, writes=False, interactions_after=1),
    ("none", False, R): Outcome(calls_server=False, raises=True, writes=False, interactions_after=0),
    ("none", False, N): Outcome(calls_server=False, raises=True, writes=False, interactions_after=0),
    ("once", True, R): Outcome(calls_server=False, raises=False, writes=False, interactions_after=1),
    ("once", True, N): Outcome(calls_server=False, raises=True, writes=False, interactions_after=1),
    ("once", False, R): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("once", False, N): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("new_episodes", True, R): Outcome(calls_server=False, raises=False, writes=False, interactions_after=1),
    ("new_episodes", True, N): Outcome(calls_server=True, raises=False, writes=True, interactions_after=2),
    ("new_episodes", False, R): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("new_episodes", False, N): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    # vcrpy semantics: "all" never replays; what it records replaces the matching
    # loaded interactions, and the loaded ones not asked for again are kept
    ("all", True, R): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("all", True, N): Outcome(calls_server=True, raises=False, writes=True, interactions_after=2),
    ("all", False, R): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("all", False, N): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    # pytest-recording semantics: "rewrite" replaces the file with this run's traffic
    ("rewrite", True, R): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("rewrite", True, N): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("rewrite", False, R): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    ("rewrite", False, N): Outcome(calls_server=True, raises=False, writes=True, interactions_after=1),
    # a cassette block replays "verify" as "none": re-recording elsewhere is the plugin's part
    ("verify", True, R): Outcome(calls_server=False, raises=False, writes=False, interactions_after=1),
    ("verify", True, N): Outcome(calls_server=False, raises=True, writes=False, interactions_after=1),
    ("verify", False, R): Outcome(calls_server=False, raises=True, writes=False, interactions_after=0),
    ("verify", False, N): Outcome(calls_server=False, raises=True, writes=False, interactions_after=0),
}


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        emulator.add("GET", "/recorded", ScriptedResponse.streaming(b"live\n", content_type="text/plain"))
        emulator.add("GET", "/new", ScriptedResponse.streaming(b"live\n", content_type="text/plain"))
        yield emulator


def _old_cassette(path: Path, base_url: str) -> None:
    interaction = Interaction(
        request=VcrRequest("GET", f"{base_url}/recorded", b"", {}),
        status=200, reason="OK", headers=[("content-type", "text/plain")],
        body=b"old\n", fragments=[(0.0, 4)],
    )
    # as a recording leaves it: our metadata on top
    Cassette(path=path, interactions=[interaction], metadata={"format": FORMAT_VERSION}).save()
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # any write moves the mtime


def test_the_matrix_is_complete() -> None:
    assert {mode for mode, _, _ in EXPECTED} == {mode.value for mode in RecordMode}
    assert len(EXPECTED) == len(RecordMode) * 2 * 2


@pytest.mark.parametrize(
    ("mode", "exists", "request_kind"),
    list(EXPECTED),
    ids=[f"{m}-{'exists' if e else 'missing'}-{r}" for m, e, r in EXPECTED],
)
def test_record_mode(emu: ProviderEmulator, tmp_path: Path, mode: str, exists: bool, request_kind: str) -> None:
    expected = EXPECTED[(mode, exists, request_kind)]
    path = tmp_path / "modes.yaml"
    if exists:
        _old_cassette(path, emu.base_url)
    before = (path.read_bytes(), path.stat().st_mtime_ns) if exists else None

    body: bytes | None = None
    if expected.raises:
        with pytest.raises(CassetteError) as caught, use_cassette(path, mode), httpx.Client() as client:
            client.get(emu.url(f"/{request_kind}"))
        assert str(path) in str(caught.value)
    else:
        with use_cassette(path, mode) as session, httpx.Client() as client:
            body = client.get(emu.url(f"/{request_kind}")).content
        assert session.wrote is expected.writes
        assert (session.played, session.recorded) == ((0, 1) if expected.calls_server else (1, 0))

    assert len(emu.requests) == (1 if expected.calls_server else 0)
    if body is not None:
        assert body == (b"live\n" if expected.calls_server else b"old\n")

    after = (path.read_bytes(), path.stat().st_mtime_ns) if path.exists() else None
    if expected.writes:
        assert after is not None and after != before
    else:
        assert after == before
    count = len(Cassette.load(path).interactions) if path.exists() else 0
    assert count == expected.interactions_after
    if expected.writes:
        assert Cassette.load(path).interactions[-1].body == b"live\n"


def test_rewrite_without_traffic_removes_the_cassette(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    _old_cassette(path, emu.base_url)
    with pytest.warns(NothingRecordedWarning, match="recorded nothing"), use_cassette(path, "rewrite") as session:
        pass
    assert not session.wrote
    assert not path.exists()


def test_rewrite_without_traffic_leaves_a_file_that_is_not_ours(tmp_path: Path) -> None:
    # a plain vcrpy / pytest-recording cassette at the path: --record-mode=rewrite is meant for it, not for us
    path = tmp_path / "modes.yaml"
    plain = b"interactions: []\nversion: 1\n"
    path.write_bytes(plain)
    with pytest.warns(NothingRecordedWarning, match="recorded nothing"), use_cassette(path, "rewrite") as session:
        pass
    assert not session.wrote
    assert path.read_bytes() == plain


def test_rewrite_that_fails_before_any_response_keeps_the_old_cassette(tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    _old_cassette(path, "http://127.0.0.1:1")
    before = path.read_bytes()
    with pytest.raises(httpx.ConnectError), use_cassette(path, "rewrite"):
        httpx.get("http://127.0.0.1:1/recorded")  # the provider is down: nothing to re-record
    assert path.read_bytes() == before


def test_new_episodes_replays_what_it_has_and_records_the_rest(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "modes.yaml"
    _old_cassette(path, emu.base_url)
    with use_cassette(path, "new_episodes") as session, httpx.Client() as client:
        bodies = [client.get(emu.url(p)).content for p in ("/recorded", "/new", "/recorded")]
    assert bodies == [b"old\n", b"live\n", b"live\n"]  # the recorded one plays once
    assert (session.played, session.recorded) == (1, 2)
    assert [i.request.path for i in Cassette.load(path).interactions] == ["/recorded", "/new", "/recorded"]


def test_unknown_record_mode_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="valid modes: none, once, new_episodes, all, rewrite"):
        use_cassette(tmp_path / "x.yaml", "sometimes").__enter__()


def test_all_replaces_rerecorded_interactions_so_the_next_replay_gets_the_new_ones(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "modes.yaml"
    _old_cassette(path, emu.base_url)
    with use_cassette(path, "once"), httpx.Client() as client:
        assert client.get(emu.url("/recorded")).content == b"old\n"
    with use_cassette(path, "all") as session, httpx.Client() as client:
        bodies = [client.get(emu.url(p)).content for p in ("/recorded", "/recorded", "/new")]
    assert bodies == [b"live\n"] * 3
    assert session.recorded == 3
    assert [(i.request.path, i.body) for i in Cassette.load(path).interactions] == [
        ("/recorded", b"live\n"), ("/recorded", b"live\n"), ("/new", b"live\n")
    ]
    with use_cassette(path) as replay, httpx.Client() as client:
        assert [client.get(emu.url(p)).content for p in ("/recorded", "/recorded", "/new")] == [b"live\n"] * 3
    assert replay.unplayed == []


def test_all_keeps_loaded_interactions_that_were_not_asked_for_again(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "modes.yaml"
    _old_cassette(path, emu.base_url)
    with use_cassette(path, "all"), httpx.Client() as client:
        client.get(emu.url("/new"))
    assert [(i.request.path, i.body) for i in Cassette.load(path).interactions] == [
        ("/recorded", b"old\n"), ("/new", b"live\n")
    ]
