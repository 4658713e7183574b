"""A big response body is read from the file into bytes once, and reads back exactly as YAML would."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError
from dsh_replay.cassette import yaml_file as reading
from dsh_replay.cassette.store import Cassette, Interaction

URL = "http://127.0.0.1:9/v1/chat/completions"


def _body(size: int, line: bytes = 'data: {"choices":[{"delta":{"content":"Grüße 🙂 #: |"}}]}\n\n'.encode()) -> bytes:
    return line * (size // len(line) + 1)


def _save(path: Path, *bodies: bytes) -> None:
    interactions = []
    for body in bodies:
        request = VcrRequest("POST", URL, json.dumps({"model": "m"}).encode(), {"content-type": "application/json"})
        interactions.append(Interaction(request=request, status=200, reason="OK",
                                        headers=[("content-type", "text/event-stream")], body=body,
                                        fragments=[(0.0, len(body))] if body else None))
    Cassette(path=path, interactions=interactions).save()


def _stock(path: Path) -> object:
    return yaml.load(path.read_bytes(), Loader=reading._Loader)


def _as_bytes(data: object) -> object:
    """The stock loader's data with response bodies as bytes, as the cassette reader hands them over."""
    assert isinstance(data, dict)
    for raw in data["interactions"]:
        body = raw["response"]["body"]
        if isinstance(body["string"], str):
            body["string"] = body["string"].encode()
    return data


@pytest.mark.parametrize("tail", [b"", b"no final newline", b"\n\n\n", b"\n  indented after blank\n"])
def test_big_bodies_read_back_as_the_yaml_parser_reads_them(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "big.yaml"
    small = b"data: small\n\n"
    _save(path, _body(reading.BIG_BODY) + tail, small, _body(reading.BIG_BODY + 7) + b"x")
    assert _as_bytes(reading.read_yaml_file(path)) == _as_bytes(_stock(path))
    loaded = Cassette.load(path)
    assert [len(i.body) for i in loaded.interactions] == [
        len(_body(reading.BIG_BODY) + tail), len(small), len(_body(reading.BIG_BODY + 7)) + 1,
    ]


@pytest.mark.parametrize("odd", [
    b"data: a\r\n",          # a CR: a line break to YAML
    "data: \u2028\n".encode(),  # LS: a line break to YAML 1.1
    b"data: \xff\xfe\n",      # not UTF-8: a YAML error
])
def test_what_a_literal_block_does_not_hold_verbatim_goes_through_the_parser(tmp_path: Path, odd: bytes) -> None:
    path = tmp_path / "big.yaml"
    _save(path, _body(reading.BIG_BODY))
    text = path.read_bytes()
    at = text.index(b"data: ", text.index(b"string: |")) + 2000
    at = text.index(b"\n", at) + 1
    indent = text[at:].index(b"data")
    path.write_bytes(text[:at] + b" " * indent + odd + text[at:])
    try:
        expected: object = _stock(path)
    except yaml.YAMLError:
        with pytest.raises(CassetteError, match="is not valid YAML"):
            reading.read_yaml_file(path)
        with pytest.raises(CassetteError, match="is not valid YAML"):
            Cassette.load(path)
        return
    assert reading.read_yaml_file(path) == expected


def test_a_look_alike_inside_a_request_body_is_not_taken_for_a_response_body(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    request_text = "prompt\nstring: |\n" + "x\n" * (reading.BIG_BODY // 2 + 10)
    request = VcrRequest("POST", URL, request_text.encode(), {})
    body = _body(reading.BIG_BODY)
    Cassette(path=path, interactions=[Interaction(request=request, status=200, reason="OK", headers=[],
                                                  body=body)]).save()
    assert _as_bytes(reading.read_yaml_file(path)) == _as_bytes(_stock(path))


def test_loading_a_big_body_keeps_about_one_copy(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    body = _body(8 * reading.BIG_BODY)
    _save(path, body)
    tracemalloc.start()
    try:
        loaded = Cassette.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert loaded.interactions[0].body == body
    # the YAML way holds the file, libyaml's buffer, a str and the bytes at once: over 4x
    assert peak < 2 * len(body), peak / len(body)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    small=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass"))),
    big_line=st.sampled_from([b"data: x\n\n", "é\u2028 \t|:#\n".encode(), b"\r\n", b"  lead\n", b"tail"]),
)
def test_any_body_reads_back_as_the_yaml_parser_reads_it(tmp_path: Path, small: bytes, big_line: bytes) -> None:
    # a small body goes through the direct loader, a big one through the line reader: both must agree with PyYAML
    path = tmp_path / "any.yaml"
    big = big_line * (reading.BIG_BODY // len(big_line) + 1) + small
    _save(path, small, big)
    assert _as_bytes(reading.read_yaml_file(path)) == _as_bytes(_stock(path))
    assert [i.body for i in Cassette.load(path).interactions] == [small, big]
