"""The cassette file: readable bodies, byte-exact round trips, vcrpy interop, bad files."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
import vcr
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, use_cassette
from dsh_replay.cassette import interaction as reading
from dsh_replay.cassette.store import Cassette, Interaction
from dsh_replay.protocol.fields import FieldError
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

SSE = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_01","content":[]}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"caf\xc3\xa9 \\"q\\""}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _record(emu: ProviderEmulator, path: Path, body: bytes, **script: object) -> bytes:
    emu.add("POST", "/v1/stream", ScriptedResponse.streaming(body, **script))  # type: ignore[arg-type]
    with use_cassette(path, "once"), httpx.Client() as client:
        return client.post(emu.url("/v1/stream"), json={"q": 1}).content


def _replay(path: Path, url: str) -> list[bytes]:
    with use_cassette(path) as session, httpx.Client() as client, client.stream(
        "POST", url, json={"q": 1}
    ) as response:
        pieces = list(response.iter_raw())
    assert session.played == 1
    return pieces


# -- readable bodies ----------------------------------------------------------------


def test_sse_body_is_a_literal_block_one_line_per_line(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "sse.yaml"
    assert _record(emu, path, SSE) == SSE
    text = path.read_text(encoding="utf-8")
    assert "string: |" in text
    lines = text.splitlines()
    for sse_line in SSE.decode().splitlines():
        if sse_line:
            assert any(line.strip() == sse_line for line in lines), sse_line
    assert "café" in text  # unicode stays readable, not \\u-escaped
    assert b"".join(_replay(path, emu.url("/v1/stream"))) == SSE


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'data: {"candidates":[{"text":"a"}]}\r\n\r\ndata: {"x":1}\r\n\r\n', id="crlf-gemini"),
        pytest.param(b"data: ok\n\n\xff\xfe broken \xc3\n\n", id="invalid-utf8"),
        pytest.param(b"data: trailing space \n\ndata: tab\t\n\n", id="trailing-whitespace"),
        pytest.param(b"\n\nleading blank lines\n", id="leading-newlines"),
        pytest.param(b"  indented first line\n  data: x\n\n", id="leading-spaces"),
        pytest.param(b"\tdata: tab-led\n", id="leading-tab"),
        pytest.param(b"data: one newline\n", id="single-final-newline"),
        pytest.param(b"--- \n...\n# not a comment\n\n", id="yaml-markers"),
        pytest.param(b"no final newline\ndata: x", id="no-final-newline"),
        pytest.param(b"nul \x00 and bell \x07\n\n", id="control-chars"),
        pytest.param("line\u2028sep \x85 nel\n\n".encode(), id="unicode-line-breaks"),
    ],
)
def test_awkward_bodies_round_trip_byte_exactly(
    emu: ProviderEmulator, tmp_path: Path, body: bytes
) -> None:
    path = tmp_path / "awkward.yaml"
    assert _record(emu, path, body, fragment_sizes=[5, 3]) == body
    # what plain YAML reads back is the body, as text or as !!binary bytes
    stored = yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"][0]["response"]["body"]["string"]
    assert (stored if isinstance(stored, bytes) else stored.encode("utf-8")) == body
    pieces = _replay(path, emu.url("/v1/stream"))
    assert b"".join(pieces) == body
    assert [len(p) for p in pieces] == [len(p) for p in ScriptedResponse.streaming(body, fragment_sizes=[5, 3]).fragments]


def test_invalid_utf8_is_stored_as_binary_not_as_a_python_repr(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    _record(emu, path, b"a\xffb\r\n")
    text = path.read_text(encoding="utf-8")
    assert "!!binary" in text
    assert "b'" not in text


def test_gzip_encoded_mock_response_round_trips(tmp_path: Path) -> None:
    payload = json.dumps({"error": {"message": "slow down"}}).encode()
    compressed = gzip.compress(payload, mtime=0)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"content-encoding": "gzip"}, content=compressed)

    path = tmp_path / "gzip.yaml"
    with use_cassette(path, "once"), httpx.Client(transport=httpx.MockTransport(handler)) as client:
        assert client.get("http://api.example.test/v1/models").content == payload
    interaction = Cassette.load(path).interactions[0]
    assert interaction.body == compressed  # stored as sent (!!binary), decoded on replay
    assert (interaction.complete, interaction.fragment_sizes()) == (True, [len(compressed)])
    with use_cassette(path), httpx.Client() as client:
        response = client.get("http://api.example.test/v1/models")
    assert response.status_code == 429
    assert response.json() == {"error": {"message": "slow down"}}


def test_a_small_cassette_reads_well(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    _record(emu, path, b"data: hi\n\ndata: [DONE]\n\n")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("dsh_replay:\n  format: 1\n")
    assert "interactions:\n- request:\n    method: POST\n" in text
    assert "fragments: [[" in text  # one line, not a page of nested lists
    assert "version: 1\n" in text
    assert not list(tmp_path.glob(".*.tmp"))


# -- plain vcrpy ----------------------------------------------------------------------


def test_plain_vcrpy_replays_a_dsh_replay_cassette(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "ours.yaml"
    url = emu.url("/v1/stream")
    _record(emu, path, SSE)
    with vcr.VCR().use_cassette(str(path)) as cassette, httpx.Client() as client:
        response = client.post(url, json={"q": 1})
    assert response.content == SSE
    assert cassette.play_count == 1
    assert len(emu.requests) == 1


def test_plain_vcrpy_cassette_is_replayed_as_one_fragment(emu: ProviderEmulator, tmp_path: Path) -> None:
    body = b"data: 1\n\ndata: 2\n\ndata: 3\n\n"
    emu.add("POST", "/v1/stream", ScriptedResponse.streaming(body))
    url = emu.url("/v1/stream")
    path = tmp_path / "theirs.yaml"
    with vcr.VCR(record_mode="once").use_cassette(str(path)), httpx.Client() as client:
        assert client.post(url, json={"q": 1}).content == body
    assert "dsh_replay" not in path.read_text()
    assert _replay(path, url) == [body]
    assert len(emu.requests) == 1


# -- files that cannot be used ---------------------------------------------------------


def test_corrupt_yaml_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.yaml"
    path.write_text("interactions:\n- request:\n    method: GET\n    uri: [unclosed\nversion: 1\n")
    with pytest.raises(CassetteError) as caught:
        use_cassette(path).__enter__()
    message = str(caught.value)
    assert str(path) in message
    assert "line 5" in message
    assert caught.value.path == str(path)


def _interaction(body: bytes, sizes: list[int], request_body: bytes = b"") -> Interaction:
    return Interaction(
        request=VcrRequest("GET", "http://api.example.test/v1/x", request_body, {}),
        status=200, reason="OK", headers=[], body=body, fragments=[(float(i), s) for i, s in enumerate(sizes)],
    )


def test_fragments_that_do_not_add_up_name_the_interaction(tmp_path: Path) -> None:
    path = tmp_path / "sizes.yaml"
    good = _interaction(b"data: ok\n\n", [4, 6])
    bad = _interaction(b"data: ok\n\n", [4, 7])
    path.write_text(Cassette(path=path, interactions=[good, bad]).dumps())
    with pytest.raises(CassetteError) as caught:
        Cassette.load(path)
    message = str(caught.value)
    assert "interactions[1].response.dsh_replay.fragments add up to 11 bytes but the body has 10" in message
    assert str(path) in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2]\n", "expected a mapping with an 'interactions' list"),
        ("interactions: []\nversion: 2\n", "unsupported vcrpy cassette version 2"),
        ("dsh_replay: {format: 99}\ninteractions: []\nversion: 1\n", "format 99 is newer"),
        ("dsh_replay: {format: one}\ninteractions: []\nversion: 1\n", "format"),
        ("interactions:\n- {request: {method: GET}}\nversion: 1\n", r"interactions\[0\]\.request\.uri must be a URL"),
        ("", "expected a mapping"),
    ],
)
def test_unusable_cassettes_are_refused_with_a_reason(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CassetteError, match=expected) as caught:
        Cassette.load(path)
    assert str(path) in str(caught.value)


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "atomic.yaml"
    Cassette(path=path, interactions=[_interaction(b"old\n", [4])]).save()
    before = path.read_bytes()

    def broken_replace(src: str, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", broken_replace)
    with pytest.raises(CassetteError, match="disk full"):
        Cassette(path=path, interactions=[_interaction(b"new\n", [4])]).save()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["atomic.yaml"]


class _PureDumper(yaml.SafeDumper):
    """The dumper dsh-replay falls back to when PyYAML has no libyaml."""


@pytest.mark.parametrize("body", [b"data: a\xc2\x85b\n\n", "x\u2028y\n\n".encode(), SSE])
def test_bodies_round_trip_without_libyaml_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    from dsh_replay.cassette import store as _cassette

    for kind, representer in _cassette._Dumper.yaml_representers.items():
        if kind in (_cassette._Literal, _cassette._Flow):
            _PureDumper.add_representer(kind, representer)
    monkeypatch.setattr(_cassette, "_Dumper", _PureDumper)
    monkeypatch.setattr(_cassette, "_Loader", yaml.SafeLoader)
    path = tmp_path / "pure.yaml"
    Cassette(path=path, interactions=[_interaction(body, [len(body)], request_body=body)]).save()
    loaded = Cassette.load(path).interactions[0]
    assert (loaded.body, loaded.request.body) == (body, body)
    if body == SSE:
        assert "string: |" in path.read_text()


@pytest.mark.parametrize(
    "request_body",
    [b"\xff\x00 binary upload", b'{\n  "pretty": "json"\n}\n', b"a=1&b=caf\xc3\xa9", b"text with NEL \xc2\x85 inside"],
)
def test_request_bodies_round_trip_and_still_match(tmp_path: Path, request_body: bytes) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"ok: " + request.content)

    path = tmp_path / "request.yaml"
    with use_cassette(path, "once"), httpx.Client(transport=httpx.MockTransport(handler)) as client:
        live = client.post("http://api.example.test/v1/upload", content=request_body)
    assert Cassette.load(path).interactions[0].request.body == request_body
    with use_cassette(path) as session, httpx.Client() as client:
        replayed = client.post("http://api.example.test/v1/upload", content=request_body)
    assert session.played == 1
    assert replayed.content == live.content == b"ok: " + request_body


def _cassette(body: bytes, tmp_path: Path) -> Cassette:
    request = VcrRequest("POST", "https://api.example/v1/stream", b'{"q":1}', {})
    interaction = Interaction(
        request=request, status=200, reason="OK", headers=[("content-type", "text/event-stream")],
        body=body, fragments=[(0.0, len(body) // 2), (12.34, len(body) - len(body) // 2)],
    )
    return Cassette(path=tmp_path / "c.yaml", interactions=[interaction])


@pytest.mark.parametrize(
    ("body", "header"),
    [
        (b"data: a\n\ndata: b\n\n", "string: |+"),  # SSE: blank line at the end is kept
        (b"line one\nline two\n", "string: |"),  # exactly one final LF: clip
        (b"line one\nline two", "string: |-"),  # no final LF: strip
        ('data: {"t":"😊 🎉"}\n\n'.encode(), "string: |+"),  # emoji stay readable
    ],
)
def test_bodies_are_spliced_in_as_literal_blocks(tmp_path: Path, body: bytes, header: str) -> None:
    cassette = _cassette(body, tmp_path)
    cassette.save()
    text = cassette.path.read_text(encoding="utf-8")
    assert f"      {header}\n" in text
    assert "\\U0001" not in text  # no escapes
    assert "fragments: [[0.0, " in text and "[12.3, " in text
    back = Cassette.load(cassette.path).interactions[0]
    assert back.body == body
    assert back.fragments == [(0.0, len(body) // 2), (12.3, len(body) - len(body) // 2)]


@pytest.mark.parametrize("body", [b"data: a\r\n\r\n", b" leading space\n", b"\nstarts with a blank line\n", "a\u2028b\n".encode()])
def test_bodies_a_literal_block_cannot_hold_are_written_the_careful_way(tmp_path: Path, body: bytes) -> None:
    cassette = _cassette(body, tmp_path)
    assert cassette._dumps_spliced() is None or Cassette.from_dict(
        yaml.safe_load(cassette._dumps_spliced() or ""), cassette.path
    ).interactions[0].body == body
    cassette.save()
    assert Cassette.load(cassette.path).interactions[0].body == body


def test_the_written_text_is_read_back_by_the_layout_reader_and_a_body_it_reads_wrong_is_written_the_careful_way(
    tmp_path: Path,
) -> None:
    from dsh_replay.cassette import store

    body = b"data: a\n\ndata: b\n\n"
    cassette = _cassette(body, tmp_path)
    real = store.read_layout
    read_back: list[bytes] = []

    def misread(data: bytes) -> Any:
        read_back.append(data)
        document = real(data)
        document["interactions"][0]["response"]["body"]["string"] = "data: a\n"  # as a splice gone wrong would read
        return document

    with mock.patch.object(store, "read_layout", misread):
        assert cassette._dumps_spliced() is None  # not written the quick way: the careful way decides
        text = cassette.dumps()
    assert read_back  # the spliced text was read back, by the layout reader
    assert Cassette.from_dict(yaml.safe_load(text), cassette.path).interactions[0].body == body


def test_a_text_the_layout_reader_declines_is_read_back_by_libyaml(tmp_path: Path) -> None:
    from dsh_replay.cassette import store
    from dsh_replay.cassette.yaml_layout import DECLINED

    body = b"data: a\n\ndata: b\n\n"
    cassette = _cassette(body, tmp_path)
    with mock.patch.object(store, "read_layout", lambda data: DECLINED):
        text = cassette._dumps_spliced()
    assert text is not None and "string: |+" in text  # libyaml read the spliced body back as written
    assert Cassette.from_dict(yaml.safe_load(text), cassette.path).interactions[0].body == body


# -- the quick reading of an interaction and the checked one agree ---------------------------------------

_RAW = [raw for path in sorted(Path(__file__).resolve().parents[2].joinpath("cassettes").rglob("*.yaml"))
        for raw in yaml.load(path.read_bytes(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["interactions"]]
_REPLACEMENTS = [None, "", 0, -1, 99, 200, 600, 1.5, True, False, "x", "POST", "http://h:99999/", "https://h/p",
                 b"bytes", [], {}, [[0.0, 1]], [[0.0, 0]], [["a", 1]], [[1, 2, 3]], {"string": 1}, {"kind": "E"},
                 ["a"], ["a", "b"], [1], "missing"]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at] if at else []
    if isinstance(value, dict):
        found += [path for key, item in value.items() for path in _paths(item, (*at, key))]
    elif isinstance(value, list):
        found += [path for n, item in enumerate(value[:3]) for path in _paths(item, (*at, n))]
    return found


#: the fields the readings check, edited more often than the others (a header's value, a body's text)
_FIELDS = [("request",), ("response",), ("request", "method"), ("request", "uri"), ("request", "body"),
           ("request", "headers"), ("response", "status"), ("response", "status", "code"),
           ("response", "status", "message"), ("response", "headers"), ("response", "body"),
           ("response", "body", "string"), ("response", "dsh_replay"), ("response", "dsh_replay", "fragments"),
           ("response", "dsh_replay", "complete"), ("response", "dsh_replay", "error"),
           ("response", "dsh_replay", "fragments", 0), ("response", "dsh_replay", "fragments", 0, 0),
           ("response", "dsh_replay", "fragments", 0, 1)]


def _edited(raw: Any, path: tuple[Any, ...], replacement: Any) -> Any:
    raw = copy.deepcopy(raw)
    holder = raw
    try:
        for step in path[:-1]:
            holder = holder[step]
        if replacement == "missing" and isinstance(holder, dict):
            holder.pop(path[-1], None)
        else:
            holder[path[-1]] = replacement
    except (LookupError, TypeError):  # the path is not there (any more): nothing edited
        pass
    return raw


def _fields(interaction: Interaction) -> tuple[Any, ...]:
    request = interaction.request
    return (request.method, request.uri, request.body, dict(request.headers), interaction.status, interaction.reason,
            interaction.headers, interaction.body, interaction.fragments, interaction.complete, interaction.error)


@settings(max_examples=400, deadline=None)
@given(raw=st.sampled_from(_RAW), data=st.data())
def test_an_interaction_read_the_quick_way_is_the_one_the_checked_reading_builds(raw: Any, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(0, 2))):
        path = data.draw(st.sampled_from(_FIELDS) | st.sampled_from(_paths(raw) or _FIELDS))
        raw = _edited(raw, path, data.draw(st.sampled_from(_REPLACEMENTS)))
    quick = reading._plain_interaction(copy.deepcopy(raw))
    with mock.patch.object(reading, "_plain_interaction", lambda raw: None):
        try:
            checked = reading.interaction_from_dict(copy.deepcopy(raw), "interactions[0]")
        except FieldError:
            assert quick is None  # what the checked reading refuses, the quick one leaves to it
            return
    assert quick is None or _fields(quick) == _fields(checked)
    assert _fields(reading.interaction_from_dict(raw, "interactions[0]")) == _fields(checked)
