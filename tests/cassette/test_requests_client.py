"""requests is recorded and replayed with the same fidelity as httpx.

Recordings talk to the loopback emulator; replays run with the emulator
stopped, or still running but never asked again. Pacing is checked on a fake
clock, never on wall time.
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import urllib3
import yaml
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, Fault, use_cassette
from dsh_replay.cassette.store import Cassette, Interaction
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from tests.clocks import RecordingClock

FRAGMENTS = [b'data: {"n": %d, "text": "part %d"}\n\n' % (n, n) for n in range(4)] + [b"data: [DONE]\n\n"]
BODY = b"".join(FRAGMENTS)
TIMES = [0.0, 100.0, 250.0, 300.0, 320.0]
PATH = "/v1/chat/completions"
OFFLINE = "http://127.0.0.1:9" + PATH  # nothing listens there: a replay must not need it
REQUEST = {"model": "m", "stream": True}
KEY = "sk-proj-" + "Requests0Recorded1Key2Never3On4Disk"


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> RecordingClock:
    fake = RecordingClock()
    monkeypatch.setattr("dsh_replay.cassette.pacing.CLOCK", fake)
    return fake


def saved(path: Path, *, body: bytes = BODY, sizes: list[int] | None = None,
          headers: list[tuple[str, str]] | None = None) -> Path:
    sizes = sizes if sizes is not None else [len(f) for f in FRAGMENTS]
    interaction = Interaction(
        request=VcrRequest("POST", OFFLINE, json.dumps(REQUEST).encode(), {}),
        status=200, reason="OK", headers=headers or [("content-type", "text/event-stream")], body=body,
        fragments=[(TIMES[n % len(TIMES)] + 400.0 * (n // len(TIMES)), size) for n, size in enumerate(sizes)],
    )
    Cassette(path=path, interactions=[interaction]).save()
    return path


def response_extra(path: Path) -> dict[str, Any]:
    extra: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"][0]["response"]["dsh_replay"]
    return extra


def post(read: Callable[[requests.Response], Any], url: str = OFFLINE, **kwargs: Any) -> Any:
    with requests.post(url, json=REQUEST, stream=True, **kwargs) as response:
        return read(response)


def pieces(response: requests.Response) -> list[bytes]:
    return list(response.iter_content(chunk_size=None))


def read_until_error(response: requests.Response) -> tuple[bytes, BaseException | None]:
    got = b""
    try:
        for piece in response.iter_content(chunk_size=None):
            got += piece
    except Exception as exc:
        return got, exc
    return got, None


# -- recording -------------------------------------------------------------------------------


def test_recording_passes_each_fragment_through_as_it_arrives(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS, delay=0.1))
    path = tmp_path / "requests.yaml"
    received: list[bytes] = []
    with use_cassette(path, "once") as session, requests.post(emu.url(PATH), json=REQUEST, stream=True) as response:
        for piece in response.iter_content(chunk_size=None):
            if not received:
                assert not emu.exchanges[0].all_sent.is_set()  # recording did not buffer the stream
            received.append(piece)
    assert received == FRAGMENTS
    assert (session.recorded, session.wrote) == (1, True)
    extra = response_extra(path)
    assert [size for _, size in extra["fragments"]] == [len(f) for f in FRAGMENTS]
    assert extra["complete"] is True
    (interaction,) = Cassette.load(path).interactions
    assert interaction.body == BODY
    assert json.loads(interaction.request.body) == REQUEST


def test_a_recording_replays_without_the_network(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS, delay=0.01))
    path, url = tmp_path / "requests.yaml", emu.url(PATH)
    with use_cassette(path, "once"):
        live = post(pieces, url)
    emu.stop()
    with use_cassette(path) as session:
        replayed = post(pieces, url)
    assert replayed == live == FRAGMENTS
    assert session.played == 1


def test_an_existing_cassette_answers_requests_in_mode_none_without_a_request(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS), ScriptedResponse.json({"changed": True}))
    path, url = tmp_path / "httpx.yaml", emu.url(PATH)
    with use_cassette(path, "once"), httpx.Client() as client:  # recorded with httpx
        client.post(url, json=REQUEST)
    with use_cassette(path, "none") as session:
        replayed = requests.post(url, json=REQUEST)  # not streamed: .content is read inside requests
    assert replayed.content == BODY
    assert session.played == 1
    assert len(emu.requests) == 1


def test_an_abandoned_stream_is_recorded_incomplete(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS, delay=0.2))
    path, url = tmp_path / "abandoned.yaml", emu.url(PATH)
    with use_cassette(path, "once"):
        first = post(lambda r: next(r.iter_content(chunk_size=None)), url)
    assert first == FRAGMENTS[0]
    assert response_extra(path)["complete"] is False
    with pytest.raises(CassetteError, match="abandoned by the caller"), use_cassette(path):
        post(lambda r: r.content, url)


# -- every way to read a body ------------------------------------------------------------------


def _raw_read_n(response: requests.Response) -> bytes:
    out = b""
    while piece := response.raw.read(5):
        out += piece
    return out


READERS: dict[str, Callable[[requests.Response], bytes]] = {
    "content": lambda r: r.content,
    "text": lambda r: r.text.encode(),
    "iter_content(None)": lambda r: b"".join(r.iter_content(chunk_size=None)),
    "iter_content(1)": lambda r: b"".join(r.iter_content(chunk_size=1)),
    "iter_content(7)": lambda r: b"".join(r.iter_content(chunk_size=7)),
    "iter_lines": lambda r: b"".join(line + b"\n" for line in r.iter_lines()),
    "raw.read(n)": _raw_read_n,
    "raw.read()": lambda r: r.raw.read(),
    "raw.stream(3)": lambda r: b"".join(r.raw.stream(3)),
}


@pytest.mark.parametrize("fragmentation", ["recorded", "single", "bytes", "random:5"])
@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_read_api_replays_the_whole_body(tmp_path: Path, reader: str, fragmentation: str) -> None:
    path = saved(tmp_path / "body.yaml")
    with use_cassette(path, fragmentation=fragmentation) as session:
        assert post(READERS[reader]) == BODY
    assert session.played == 1


def test_json_of_a_replayed_body_that_is_not_streamed(tmp_path: Path) -> None:
    payload = {"error": {"message": "caf\u00e9 closed"}}
    body = json.dumps(payload).encode()
    path = saved(tmp_path / "json.yaml", body=body, sizes=[9, len(body) - 9], headers=[("content-type", "application/json")])
    with use_cassette(path):
        response = requests.post(OFFLINE, json=REQUEST)
    assert response.json() == payload
    assert (response.status_code, response.reason, response.ok) == (200, "OK", True)
    assert response.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(("fragmentation", "sizes"), [
    ("recorded", [len(f) for f in FRAGMENTS]),
    ("single", [len(BODY)]),
    ("bytes", [1] * len(BODY)),
])
def test_iter_content_sees_the_pieces_as_cut(tmp_path: Path, fragmentation: str, sizes: list[int]) -> None:
    path = saved(tmp_path / "cut.yaml")
    with use_cassette(path, fragmentation=fragmentation):
        assert [len(piece) for piece in post(pieces)] == sizes


# -- failures --------------------------------------------------------------------------------


@pytest.mark.parametrize(("end", "kind"), [("truncate", "RemoteProtocolError"), ("reset", "ReadError")])
def test_a_broken_stream_is_recorded_at_its_offset_and_replayed_as_requests_error(
    emu: ProviderEmulator, tmp_path: Path, end: str, kind: str
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=[FRAGMENTS[0], FRAGMENTS[1], b""], delays=[0.0, 0.02, 0.1],
                                           end=end))  # type: ignore[arg-type]
    path, url = tmp_path / f"{end}.yaml", emu.url(PATH)
    with use_cassette(path, "once"):
        live_bytes, live_error = post(read_until_error, url)
    assert type(live_error) is requests.exceptions.ChunkedEncodingError
    assert live_bytes == FRAGMENTS[0] + FRAGMENTS[1]
    error = response_extra(path)["error"]
    assert (error["kind"], error["offset"]) == (kind, len(live_bytes))
    emu.stop()
    with use_cassette(path):
        replay_bytes, replay_error = post(read_until_error, url)
    assert type(replay_error) is requests.exceptions.ChunkedEncodingError
    assert replay_bytes == live_bytes
    with use_cassette(path), httpx.Client() as client, client.stream("POST", url, json=REQUEST) as response, \
            pytest.raises(getattr(httpx, kind)):
        response.read()  # the same cassette, replayed with httpx


def test_a_stalled_stream_is_recorded_as_a_read_timeout_and_replayed_as_one(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS[:1], end="stall"))
    path, url = tmp_path / "stall.yaml", emu.url(PATH)
    with use_cassette(path, "once"):
        live_bytes, live_error = post(read_until_error, url, timeout=(5, 0.2))
    assert type(live_error) is requests.exceptions.ConnectionError
    assert isinstance(live_error.args[0], urllib3.exceptions.ReadTimeoutError)
    error = response_extra(path)["error"]
    assert (error["kind"], error["offset"]) == ("ReadTimeout", len(FRAGMENTS[0]))
    with use_cassette(path):
        replay_bytes, replay_error = post(read_until_error, url, timeout=(5, 0.2))
    assert type(replay_error) is requests.exceptions.ConnectionError
    assert isinstance(replay_error.args[0], urllib3.exceptions.ReadTimeoutError)
    assert replay_bytes == live_bytes == FRAGMENTS[0]


@pytest.mark.parametrize("kind", ["reset", "truncate"])
def test_an_injected_fault_strikes_at_its_offset(tmp_path: Path, kind: str) -> None:
    path = saved(tmp_path / "fault.yaml")
    with use_cassette(path, fault=Fault(kind, at=20)):  # type: ignore[arg-type]
        got, error = post(read_until_error)
    assert got == BODY[:20]
    assert (type(error) if error else None) is (requests.exceptions.ChunkedEncodingError if kind == "reset" else None)


def test_an_injected_stall_waits_out_the_read_timeout(tmp_path: Path, clock: RecordingClock) -> None:
    path = saved(tmp_path / "stall.yaml")
    with use_cassette(path, fault=Fault("stall", at=20)):
        got, error = post(read_until_error, timeout=(5, 3))
    assert (got, type(error)) == (BODY[:20], requests.exceptions.ConnectionError)
    assert clock.waits == [3.0]


def test_a_paced_replay_sleeps_the_recorded_gaps_in_the_callers_thread(tmp_path: Path, clock: RecordingClock) -> None:
    path = saved(tmp_path / "paced.yaml")
    with use_cassette(path, speed=2.0):
        assert post(pieces) == FRAGMENTS
    gaps = [(later - earlier) / 1000 * 2.0 for earlier, later in itertools.pairwise(TIMES)]
    assert clock.waits == pytest.approx(gaps)
    assert clock.libraries == {"sync"}


# -- requests, scrubbing, across clients --------------------------------------------------------


def test_credentials_in_headers_query_and_body_never_reach_the_cassette(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS))
    path, url = tmp_path / "secret.yaml", emu.url(PATH)
    with use_cassette(path, "once") as session, requests.Session() as client:
        client.headers["x-goog-api-key"] = KEY
        response = client.post(url, params={"key": KEY, "alt": "sse"}, json={**REQUEST, "api_key": KEY},
                               headers={"Authorization": f"Bearer {KEY}"})
        assert response.content == BODY
    assert emu.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in path.read_text(encoding="utf-8")
    assert session.scrubbed >= 4
    emu.stop()
    with use_cassette(path), requests.Session() as client:
        again = client.post(url, params={"key": KEY, "alt": "sse"}, json={**REQUEST, "api_key": KEY})
    assert again.content == BODY


def test_a_request_with_no_recorded_match_is_refused_with_a_diff(tmp_path: Path) -> None:
    path = saved(tmp_path / "one.yaml")
    with pytest.raises(CassetteError, match=r"(?s)one\.yaml.*model.*--record-mode=rewrite"), use_cassette(path):
        requests.post(OFFLINE, json={**REQUEST, "model": "other"})


def test_a_cassette_recorded_with_requests_replays_with_httpx(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS))
    path, url = tmp_path / "requests.yaml", emu.url(PATH)
    with use_cassette(path, "once"):
        post(pieces, url)
    emu.stop()
    with use_cassette(path), httpx.Client() as client, client.stream("POST", url, json=REQUEST) as response:
        assert list(response.iter_raw()) == FRAGMENTS


def test_a_compressed_body_is_decoded_whoever_recorded_it(emu: ProviderEmulator, tmp_path: Path) -> None:
    packed = gzip.compress(BODY)
    emu.add("POST", PATH, ScriptedResponse(fragments=[packed[:30], packed[30:]],
                                           headers={"content-type": "text/event-stream", "content-encoding": "gzip"}))
    url = emu.url(PATH)
    by_httpx, by_requests = tmp_path / "httpx.yaml", tmp_path / "requests.yaml"
    with use_cassette(by_httpx, "once"), httpx.Client() as client:
        assert client.post(url, json=REQUEST).content == BODY
    with use_cassette(by_requests, "once"):
        assert requests.post(url, json=REQUEST).content == BODY
    assert Cassette.load(by_requests).interactions[0].body == packed  # kept as sent, as httpx keeps it
    emu.stop()
    for path in (by_httpx, by_requests):
        with use_cassette(path):
            assert requests.post(url, json=REQUEST).content == BODY
        with use_cassette(path), httpx.Client() as client:
            assert client.post(url, json=REQUEST).content == BODY
