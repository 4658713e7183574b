"""Cassettes with fields of the wrong shape, and how cassette files are written (modes, directories)."""

from __future__ import annotations

import copy
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, use_cassette
from dsh_replay.cassette.files import atomic_write, unwritable_reason
from dsh_replay.cassette.filters import RecordFilters
from dsh_replay.cassette.store import Cassette, Interaction, RecordedError
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

BODY = "data: hi\n\n"  # 10 bytes: fragments 4 + 6

_DELETE = object()


def _good() -> dict[str, Any]:
    """A valid cassette as YAML data; each test breaks one field of it."""
    return {
        "interactions": [{
            "request": {
                "method": "POST", "uri": "https://api.example.test/v1/stream", "body": '{"q":1}',
                "headers": {"content-type": ["application/json"]},
            },
            "response": {
                "status": {"code": 200, "message": "OK"},
                "headers": {"content-type": ["text/event-stream"]},
                "body": {"string": BODY},
                "dsh_replay": {
                    "fragments": [[0.0, 4], [1.5, 6]], "complete": True,
                    "error": {"kind": "ReadError", "message": "reset", "offset": 10, "at_ms": 2.0},
                },
            },
        }],
        "version": 1,
    }


def _with(field: str, value: object) -> dict[str, Any]:
    """``_good()`` with the dotted ``field`` of interaction 0 set to ``value`` (or deleted)."""
    data = _good()
    *parents, last = field.split(".")
    target = data["interactions"][0]
    for key in parents:
        target = target[key]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return data


def _load(tmp_path: Path, data: object) -> Cassette:
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return Cassette.load(path)


def _refusal(tmp_path: Path, data: object) -> str:
    with pytest.raises(CassetteError) as caught:
        _load(tmp_path, data)
    message = str(caught.value)
    assert caught.value.path == str(tmp_path / "case.yaml")
    assert message.startswith(f"cassette {tmp_path / 'case.yaml'}: interactions[0]")
    assert message.endswith("; fix it or re-record it with --record-mode=rewrite")
    assert "Error" not in message.replace("ReadError", "")  # no Python exception names leak
    return message


# -- wrong types: each message names the field and what it must be ---------------------------

R, S, X = "interactions[0].request", "interactions[0].response", "interactions[0].response.dsh_replay"


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("response.status", "200", f"{S}.status must be a mapping with 'code' and 'message', got '200'"),
        ("response.status.code", "abc", f"{S}.status.code must be an integer HTTP status, got 'abc'"),
        ("response.status.code", None, f"{S}.status.code must be an integer HTTP status, got None"),
        ("response.status.code", "200", f"{S}.status.code must be an integer HTTP status, got '200'"),
        ("response.status.code", True, f"{S}.status.code must be an integer HTTP status, got True"),
        ("response.status.code", 42, f"{S}.status.code must be an integer HTTP status, got 42"),
        ("response.status.code", _DELETE, f"{S}.status.code must be an integer HTTP status, got nothing"),
        ("response.status.message", 5, f"{S}.status.message must be a string or null, got 5"),
        ("response.headers", ["a"], f"{S}.headers must be a mapping of header names to lists of strings, got ['a']"),
        ("response.headers", {"x-n": [1]}, f"{S}.headers.x-n must be a list of strings, got [1]"),
        ("response.body", 5, f"{S}.body must be a mapping with 'string', or a string, !!binary bytes or null, got 5"),
        ("response.body.string", [1], f"{S}.body.string must be a string, !!binary bytes or null, got [1]"),
        ("response.dsh_replay", [1], f"{S}.dsh_replay must be a mapping or null, got [1]"),
        ("response.dsh_replay.fragments", "abc", f"{X}.fragments must be a list of [ms, bytes] pairs, or null, got 'abc'"),
        ("response.dsh_replay.fragments", [[1]], f"{X}.fragments[0] must be an [ms since headers, bytes] pair"),
        ("response.dsh_replay.fragments", [["a", "b"]], f"{X}.fragments[0] must be an [ms since headers, bytes] pair"),
        ("response.dsh_replay.complete", "yes", f"{X}.complete must be true or false, got 'yes'"),
        ("response.dsh_replay.complete", None, f"{X}.complete must be true or false, got None"),
        ("response.dsh_replay.complete", 1, f"{X}.complete must be true or false, got 1"),
        ("response.dsh_replay.error", "boom", f"{X}.error must be a mapping with kind, message, offset and at_ms, or null, got 'boom'"),
        ("response.dsh_replay.error", {"kind": "x", "at": -1}, f"{X}.error.offset must be a byte offset (an integer >= 0), got nothing"),
        ("response.dsh_replay.error.kind", _DELETE, f"{X}.error.kind must be an exception name such as ReadError, got nothing"),
        ("response.dsh_replay.error.kind", 7, f"{X}.error.kind must be an exception name such as ReadError, got 7"),
        ("response.dsh_replay.error.message", ["m"], f"{X}.error.message must be a string or null, got ['m']"),
        ("response.dsh_replay.error.offset", -1, f"{X}.error.offset must be a byte offset (an integer >= 0), got -1"),
        ("response.dsh_replay.error.offset", "10", f"{X}.error.offset must be a byte offset (an integer >= 0), got '10'"),
        ("response.dsh_replay.error.offset", 2.5, f"{X}.error.offset must be a byte offset (an integer >= 0), got 2.5"),
        ("response.dsh_replay.error.offset", False, f"{X}.error.offset must be a byte offset (an integer >= 0), got False"),
        ("response.dsh_replay.error.at_ms", -1.0, f"{X}.error.at_ms must be a time in ms from 0 to 86400000, got -1.0"),
        ("response.dsh_replay.error.at_ms", math.inf, f"{X}.error.at_ms must be a time in ms from 0 to 86400000, got inf"),
        ("response.dsh_replay.error.at_ms", "2", f"{X}.error.at_ms must be a time in ms from 0 to 86400000, got '2'"),
        ("request", _DELETE, "interactions[0].request must be a mapping, got nothing"),
        ("response", "ok", "interactions[0].response must be a mapping, got 'ok'"),
        ("request.method", _DELETE, f"{R}.method must be an HTTP method such as POST, got nothing"),
        ("request.method", 1, f"{R}.method must be an HTTP method such as POST, got 1"),
        ("request.uri", 5, f"{R}.uri must be a URL, got 5"),
        ("request.uri", "http://[::1/v1", f"{R}.uri must be a URL, got 'http://[::1/v1'"),
        ("request.uri", "http://host:port/v1", f"{R}.uri must be a URL, got 'http://host:port/v1'"),
        ("request.body", {"a": 1}, f"{R}.body must be a string, !!binary bytes or null, got {{'a': 1}}"),
        ("request.headers", ["a"], f"{R}.headers must be a mapping of header names to lists of strings, got ['a']"),
        ("request.headers", {"accept": {"a": 1}}, f"{R}.headers.accept must be a list of strings, got {{'a': 1}}"),
    ],
)
def test_a_field_of_the_wrong_type_is_named_by_its_path(tmp_path: Path, field: str, value: object, expected: str) -> None:
    assert expected in _refusal(tmp_path, _with(field, value))


def test_an_interaction_that_is_not_a_mapping_is_named(tmp_path: Path) -> None:
    message = _refusal(tmp_path, {"interactions": ["oops"], "version": 1})
    assert "interactions[0] must be a mapping with 'request' and 'response', got 'oops'" in message


def test_the_message_quotes_a_long_value_shortened(tmp_path: Path) -> None:
    message = _refusal(tmp_path, _with("request.body", {"k": "v" * 500}))
    assert f"{R}.body must be" in message
    assert "..." in message
    assert len(message) < 400


def test_a_mapping_request_body_is_refused_when_the_cassette_is_opened(tmp_path: Path) -> None:
    # it used to load, then fail inside request matching as "unplayed interactions"
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(_with("request.body", {"a": 1})))
    with pytest.raises(CassetteError, match=r"interactions\[0\]\.request\.body must be a string") as caught:
        use_cassette(path).__enter__()
    assert caught.value.path == str(path)


def test_the_first_bad_interaction_is_the_one_named(tmp_path: Path) -> None:
    data = _good()
    data["interactions"].append(copy.deepcopy(data["interactions"][0]))
    data["interactions"][1]["response"]["status"]["code"] = "abc"
    with pytest.raises(CassetteError, match=r"interactions\[1\]\.response\.status\.code must be"):
        _load(tmp_path, data)


# -- fragment times and sizes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param([math.inf, 6], id="inf"),
        pytest.param([1e308, 6], id="1e308"),
        pytest.param([86_400_000.1, 6], id="over-a-day"),
        pytest.param([math.nan, 6], id="nan"),
        pytest.param([-0.5, 6], id="negative-time"),
        pytest.param([True, 6], id="bool-time"),
        pytest.param(["1.5", 6], id="string-time"),
        pytest.param([1.5, 6.5], id="float-size"),
        pytest.param([1.5, 6.0], id="whole-float-size"),
        pytest.param([1.5, True], id="bool-size"),
        pytest.param([1.5, 0], id="zero-size"),
        pytest.param([1.5, -6], id="negative-size"),
        pytest.param([1.5, 6, 7], id="three-items"),
        pytest.param({"ms": 1.5, "bytes": 6}, id="mapping"),
    ],
)
def test_a_bad_fragment_is_named_by_its_position(tmp_path: Path, bad: object) -> None:
    message = _refusal(tmp_path, _with("response.dsh_replay.fragments", [[0.0, 4], bad]))
    assert f"{X}.fragments[1] must be an [ms since headers, bytes] pair: a time in ms from 0 to 86400000 " \
        "and a positive integer byte count, got " in message


def test_fragment_times_as_written_in_yaml_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "case.yaml"
    text = yaml.safe_dump(_good(), sort_keys=False)
    path.write_text(text.replace("- 1.5\n", "- .inf\n", 1))
    with pytest.raises(CassetteError, match=r"dsh_replay\.fragments\[1\] must be .*, got \[inf, 6\]"):
        Cassette.load(path)


def test_fragments_that_do_not_add_up_are_named(tmp_path: Path) -> None:
    message = _refusal(tmp_path, _with("response.dsh_replay.fragments", [[0.0, 4], [1.5, 7]]))
    assert f"{X}.fragments add up to 11 bytes but the body has 10" in message


# -- what stays accepted -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "attribute", "expected"),
    [
        ("response.dsh_replay", _DELETE, "fragments", None),
        ("response.dsh_replay", None, "error", None),
        ("response.dsh_replay.fragments", None, "fragments", None),
        ("response.dsh_replay.fragments", [[0, 10]], "fragments", [(0.0, 10)]),
        ("response.dsh_replay.fragments", [[86_400_000, 10]], "fragments", [(86_400_000.0, 10)]),
        ("response.dsh_replay.complete", False, "complete", False),
        ("response.dsh_replay.complete", _DELETE, "complete", True),
        ("response.dsh_replay.error", None, "error", None),
        ("response.dsh_replay.error.at_ms", _DELETE, "error", RecordedError("ReadError", "reset", 10, 0.0)),
        ("response.dsh_replay.error.message", None, "error", RecordedError("ReadError", "", 10, 2.0)),
        # a body filter may shorten the body after the error was noted
        ("response.dsh_replay.error.offset", 99, "error", RecordedError("ReadError", "reset", 99, 2.0)),
        ("response.status.message", None, "reason", ""),
        ("response.headers", None, "headers", []),
        ("response.headers", {"x-a": "1", "x-b": ["2", "3"]}, "headers", [("x-a", "1"), ("x-b", "2"), ("x-b", "3")]),
        ("response.body", BODY, "body", BODY.encode()),
        ("response.body", {"string": BODY.encode()}, "body", BODY.encode()),
    ],
)
def test_valid_variants_still_load(tmp_path: Path, field: str, value: object, attribute: str, expected: object) -> None:
    assert getattr(_load(tmp_path, _with(field, value)).interactions[0], attribute) == expected


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("request.body", None, None),
        ("request.body", _DELETE, None),
        ("request.body", b"\xff\x00", b"\xff\x00"),
        ("request.body", "caf\u00e9", "caf\u00e9".encode()),
    ],
)
def test_request_bodies_of_every_written_kind_load(tmp_path: Path, field: str, value: object, expected: bytes | None) -> None:
    request = _load(tmp_path, _with(field, value)).interactions[0].request
    assert request.body == expected
    assert (request.method, request.uri, request.headers["Content-Type"]) == (
        "POST", "https://api.example.test/v1/stream", "application/json",
    )


# -- atomic_write: permissions and directories -------------------------------------------------

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@posix_only
@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664), (0o027, 0o640)])
def test_a_new_file_gets_the_mode_open_would_give(tmp_path: Path, mask: int, expected: int) -> None:
    os.umask(mask)
    path = tmp_path / "new" / "file.yaml"
    atomic_write(path, b"data\n")
    assert (path.read_bytes(), _mode(path)) == (b"data\n", expected)


@posix_only
@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize("mode", [0o644, 0o604, 0o600, 0o664])
def test_a_rewrite_keeps_the_mode_of_the_file(tmp_path: Path, mode: int) -> None:
    os.umask(0o077)
    path = tmp_path / "kept.yaml"
    path.write_bytes(b"old\n")
    path.chmod(mode)
    atomic_write(path, b"new\n")
    assert (path.read_bytes(), _mode(path)) == (b"new\n", mode)


@posix_only
@pytest.mark.usefixtures("umask")
def test_a_saved_cassette_is_readable_like_any_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    request = VcrRequest("GET", "http://api.example.test/v1/x", b"", {})
    Cassette(path=path, interactions=[Interaction(request=request, status=200, reason="OK", headers=[], body=b"")]).save()
    assert _mode(path) == 0o644


def test_a_directory_in_the_way_is_named_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "taken.yaml"
    path.mkdir()
    with pytest.raises(CassetteError) as caught:
        atomic_write(path, b"data\n")
    assert str(caught.value).startswith(f"cannot write {path}: it is a directory")
    assert ".tmp" not in str(caught.value)
    assert caught.value.path == str(path)
    assert [p.name for p in tmp_path.iterdir()] == ["taken.yaml"]
    assert path.is_dir() and not list(path.iterdir())


def test_a_symlinked_file_is_updated_through_the_link(tmp_path: Path) -> None:
    target = tmp_path / "shared" / "hello.chunks.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"old\n")
    link = tmp_path / "cases" / "hello.chunks.jsonl"
    link.parent.mkdir()
    link.symlink_to(target)
    atomic_write(link, b"new\n")
    assert link.is_symlink() and target.read_bytes() == b"new\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["hello.chunks.jsonl"]


def test_a_name_just_under_the_limit_can_be_written(tmp_path: Path) -> None:
    # the temporary file's name must not be longer than the final one's
    path = tmp_path / ("x" * 240 + ".chunks.jsonl")
    atomic_write(path, b"data\n")
    assert path.read_bytes() == b"data\n"


def test_a_name_over_the_limit_is_explained_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / ("x" * 300 + ".yaml")
    reason = unwritable_reason(path)
    assert reason == f"{path} cannot be written: File name too long"


def test_a_loop_of_links_on_the_way_is_not_taken_for_a_folder(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert unwritable_reason(tmp_path / "loop" / "x.yaml") is None  # the write itself says what is wrong
    (tmp_path / "afile").write_text("")
    assert unwritable_reason(tmp_path / "afile" / "deeper" / "x.yaml") == (
        f"{tmp_path / 'afile'} is a file, so the folder for x.yaml cannot be made"
    )
    assert unwritable_reason(tmp_path) == f"{tmp_path} is a folder"


@pytest.mark.parametrize("returned", [{"uri": "https://api.test/v1"}, "POST /v1", 42])
def test_a_before_record_request_hook_that_returns_no_request_is_named(tmp_path: Path, returned: object) -> None:
    path = tmp_path / "hooked.yaml"
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat", ScriptedResponse.streaming(b"data: [DONE]\n\n"))
        hook = RecordFilters(before_record_request=lambda request: returned)
        with pytest.raises(CassetteError) as raised, use_cassette(path, "once", filters=hook), httpx.Client() as client:
            client.post(emu.url("/v1/chat"), json={})
    assert str(raised.value) == (
        f"cassette {path}: before_record_request must return the request it was given (changed or not) or None "
        f"to leave it out; got {type(returned).__name__}")
    assert not path.exists()
