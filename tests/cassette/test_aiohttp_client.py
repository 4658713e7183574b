"""aiohttp is recorded and replayed with the same fidelity as httpx.

Recordings talk to the loopback emulator; replays run with the emulator
stopped, or still running but never asked again (its request log proves it).
Pacing is checked on a fake clock, never on wall time.
"""

from __future__ import annotations

import asyncio
import gzip
import inspect
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests
import yaml
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, Fault, use_cassette
from dsh_replay.cassette.store import Cassette, Interaction
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from tests.clocks import RecordingClock


def _event(n: int) -> bytes:
    payload = {"id": "chatcmpl-aio", "choices": [{"index": 0, "delta": {"content": f"part {n} "}}]}
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


FRAGMENTS = [_event(n) for n in range(4)] + [b"data: [DONE]\n\n"]
BODY = b"".join(FRAGMENTS)
TIMES = [0.0, 100.0, 250.0, 300.0, 320.0]  # ms since the response started, one per fragment
PATH = "/v1/chat/completions"
OFFLINE = "http://127.0.0.1:9" + PATH  # nothing listens there: a replay must not need it
REQUEST = {"model": "m", "stream": True}
KEY = "sk-proj-" + "Aiohttp0Recorded1Key2Never3On4Disk5"


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> RecordingClock:
    fake = RecordingClock()
    monkeypatch.setattr("dsh_replay.cassette.pacing.CLOCK", fake)
    return fake


def saved(path: Path, *, body: bytes = BODY, sizes: list[int] | None = None, headers: list[tuple[str, str]] | None = None,
          status: int = 200) -> Path:
    """A cassette of one recorded ``POST`` of :data:`REQUEST` to :data:`OFFLINE`."""
    sizes = sizes if sizes is not None else [len(f) for f in FRAGMENTS]
    interaction = Interaction(
        request=VcrRequest("POST", OFFLINE, json.dumps(REQUEST).encode(), {}),
        status=status, reason="OK", headers=headers or [("content-type", "text/event-stream")], body=body,
        fragments=[(TIMES[n % len(TIMES)] + 400.0 * (n // len(TIMES)), size) for n, size in enumerate(sizes)],
    )
    Cassette(path=path, interactions=[interaction]).save()
    return path


def response_extra(path: Path) -> dict[str, Any]:
    extra: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"][0]["response"]["dsh_replay"]
    return extra


async def post(url: str = OFFLINE, read: Callable[[aiohttp.ClientResponse], Awaitable[Any]] | None = None,
               **kwargs: Any) -> Any:
    async with aiohttp.ClientSession() as session, session.post(url, json=REQUEST, **kwargs) as response:
        return await asyncio.wait_for((read or _read_any)(response), timeout=10)  # a hang guard, not a timing


async def _read_any(response: aiohttp.ClientResponse) -> list[bytes]:
    return [piece async for piece in response.content.iter_any()]


async def read_until_error(response: aiohttp.ClientResponse) -> tuple[bytes, BaseException | None]:
    got = b""
    try:
        async for piece in response.content.iter_any():
            got += piece
    except Exception as exc:
        return got, exc
    return got, None


# -- recording ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_recording_passes_each_fragment_through_as_it_arrives(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS, delay=0.1))
    path = tmp_path / "aio.yaml"
    received: list[bytes] = []
    async with use_cassette(path, "once") as session, aiohttp.ClientSession() as client, client.post(
        emu.url(PATH), json=REQUEST
    ) as response:
        async for piece in response.content.iter_any():
            if not received:
                # the server has not even written the rest: recording did not buffer the stream
                assert not emu.exchanges[0].all_sent.is_set()
            received.append(piece)
    assert received == FRAGMENTS
    assert (session.recorded, session.wrote) == (1, True)
    extra = response_extra(path)
    assert [size for _, size in extra["fragments"]] == [len(f) for f in FRAGMENTS]
    assert [ms for ms, _ in extra["fragments"]] == sorted(ms for ms, _ in extra["fragments"])
    assert extra["complete"] is True
    (interaction,) = Cassette.load(path).interactions
    assert interaction.body == BODY
    assert json.loads(interaction.request.body) == REQUEST


@pytest.mark.asyncio
async def test_a_recording_replays_without_the_network(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS, delay=0.01))
    path, url = tmp_path / "aio.yaml", emu.url(PATH)
    async with use_cassette(path, "once"):
        live = await post(url)
    emu.stop()
    async with use_cassette(path) as session:
        replayed = await post(url)
    assert replayed == live == FRAGMENTS
    assert session.played == 1


@pytest.mark.asyncio
async def test_an_existing_cassette_answers_aiohttp_in_mode_none_without_a_request(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS), ScriptedResponse.json({"changed": True}))
    path, url = tmp_path / "httpx.yaml", emu.url(PATH)
    async with use_cassette(path, "once"), httpx.AsyncClient() as client:  # recorded with httpx
        await client.post(url, json=REQUEST)
    async with use_cassette(path, "none") as session:
        replayed = await post(url, read=lambda r: r.read())
    assert replayed == BODY
    assert session.played == 1
    assert len(emu.requests) == 1  # the server, still up, was not asked again


@pytest.mark.asyncio
async def test_an_abandoned_stream_is_recorded_incomplete_and_a_replay_reading_further_fails(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS, delay=0.2))
    path, url = tmp_path / "abandoned.yaml", emu.url(PATH)
    async with use_cassette(path, "once"):
        first = await post(url, read=lambda r: r.content.readany())
    assert first == FRAGMENTS[0]
    assert response_extra(path)["complete"] is False
    assert Cassette.load(path).interactions[0].body == FRAGMENTS[0]
    async with use_cassette(path):
        again = await post(url, read=lambda r: r.content.readany())
    assert again == FRAGMENTS[0]  # reading as far as the recording is fine
    with pytest.raises(CassetteError, match="abandoned by the caller"):
        async with use_cassette(path):
            await post(url, read=lambda r: r.read())


# -- every way to read a body -------------------------------------------------------------------


async def _read(response: aiohttp.ClientResponse) -> bytes:
    return await response.read()


async def _text(response: aiohttp.ClientResponse) -> bytes:
    return (await response.text()).encode()


async def _iter_chunked(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([piece async for piece in response.content.iter_chunked(7)])


async def _iter_any(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([piece async for piece in response.content.iter_any()])


async def _iter_chunks(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([piece async for piece, _ in response.content.iter_chunks()])


async def _readline_loop(response: aiohttp.ClientResponse) -> bytes:
    # google-genai's loop; vcrpy's aiohttp stub never ends it (kevin1024/vcrpy#927)
    lines = []
    while True:
        line = await response.content.readline()
        if not line:
            break
        lines.append(line)
    return b"".join(lines)


async def _async_for_lines(response: aiohttp.ClientResponse) -> bytes:
    return b"".join([line async for line in response.content])


async def _read_n(response: aiohttp.ClientResponse) -> bytes:
    out = b""
    while piece := await response.content.read(5):
        out += piece
    return out


async def _readexactly(response: aiohttp.ClientResponse) -> bytes:
    whole = await response.content.readexactly(len(BODY))
    assert await response.content.read() == b""
    return whole


READERS = {f.__name__.lstrip("_"): f for f in (
    _read, _text, _iter_chunked, _iter_any, _iter_chunks, _readline_loop, _async_for_lines, _read_n, _readexactly,
)}


@pytest.mark.asyncio
@pytest.mark.parametrize("fragmentation", ["recorded", "single", "bytes", "random:5"])
@pytest.mark.parametrize("reader", sorted(READERS))
async def test_every_read_api_replays_the_whole_body(tmp_path: Path, reader: str, fragmentation: str) -> None:
    path = saved(tmp_path / "body.yaml")
    async with use_cassette(path, fragmentation=fragmentation) as session:
        assert await post(read=READERS[reader]) == BODY
    assert session.played == 1


@pytest.mark.asyncio
async def test_json_and_text_of_a_replayed_json_body(tmp_path: Path) -> None:
    payload = {"error": {"message": "caf\u00e9 closed", "type": "overloaded"}}
    body = json.dumps(payload).encode()
    path = saved(tmp_path / "json.yaml", body=body, sizes=[9, len(body) - 9],
                 headers=[("content-type", "application/json; charset=utf-8")])
    async with use_cassette(path):
        assert await post(read=lambda r: r.json()) == payload
    async with use_cassette(path):
        assert await post(read=lambda r: r.text()) == body.decode()


@pytest.mark.asyncio
@pytest.mark.parametrize(("fragmentation", "sizes"), [
    ("recorded", [len(f) for f in FRAGMENTS]),
    ("single", [len(BODY)]),
    ("bytes", [1] * len(BODY)),
])
async def test_iter_any_and_iter_chunks_see_the_pieces_as_cut(tmp_path: Path, fragmentation: str, sizes: list[int]) -> None:
    path = saved(tmp_path / "cut.yaml")
    async with use_cassette(path, fragmentation=fragmentation):
        assert [len(p) for p in await post()] == sizes
    async with use_cassette(path, fragmentation=fragmentation):
        chunks = await post(read=lambda r: _collect(r.content.iter_chunks()))
    assert [len(piece) for piece, _ in chunks] == sizes


async def _collect(pieces: AsyncIterator[Any]) -> list[Any]:
    return [piece async for piece in pieces]


@pytest.mark.asyncio
async def test_a_readline_loop_ends_on_a_body_without_a_final_line_break(tmp_path: Path) -> None:
    body = BODY + b"data: tail without a newline"
    path = saved(tmp_path / "tail.yaml", body=body, sizes=[len(BODY), len(body) - len(BODY)])
    async with use_cassette(path):
        assert await post(read=_readline_loop) == body


@pytest.mark.asyncio
async def test_a_replayed_response_is_a_real_aiohttp_response(tmp_path: Path) -> None:
    path = saved(tmp_path / "real.yaml", headers=[("content-type", "text/event-stream"), ("x-request-id", "req_1")])
    async with use_cassette(path), aiohttp.ClientSession() as client:
        response = await client.post(OFFLINE, json=REQUEST)  # awaited, no `async with`
        assert isinstance(response, aiohttp.ClientResponse)
        assert isinstance(response.content, aiohttp.StreamReader)
        assert (response.status, response.reason, response.ok) == (200, "OK", True)
        assert response.headers["X-Request-Id"] == "req_1"
        assert str(response.url) == OFFLINE and response.method == "POST"
        assert not response.closed
        assert await response.read() == BODY
        assert response.closed  # at the end of its body, as a live one
        response.release()


# -- failures --------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("end", "kind"), [("truncate", "RemoteProtocolError"), ("reset", "ReadError")])
async def test_a_broken_stream_is_recorded_at_its_offset_and_replayed_as_aiohttps_error(
    emu: ProviderEmulator, tmp_path: Path, end: str, kind: str
) -> None:
    # the trailing empty fragment is a pause: both pieces are read before the connection breaks
    emu.add("POST", PATH, ScriptedResponse(fragments=[FRAGMENTS[0], FRAGMENTS[1], b""], delays=[0.0, 0.02, 0.1],
                                           end=end))  # type: ignore[arg-type]
    path, url = tmp_path / f"{end}.yaml", emu.url(PATH)
    async with use_cassette(path, "once"):
        live_bytes, live_error = await post(url, read=read_until_error)
    assert type(live_error) is aiohttp.ClientPayloadError
    assert live_bytes == FRAGMENTS[0] + FRAGMENTS[1]
    error = response_extra(path)["error"]
    assert (error["kind"], error["offset"]) == (kind, len(live_bytes))  # in the format's own (httpx) words
    emu.stop()
    async with use_cassette(path):
        replay_bytes, replay_error = await post(url, read=read_until_error)
    assert type(replay_error) is aiohttp.ClientPayloadError
    assert str(replay_error) == str(live_error)
    assert replay_bytes == live_bytes
    async with use_cassette(path), httpx.AsyncClient() as client, client.stream("POST", url, json=REQUEST) as response:
        with pytest.raises(getattr(httpx, kind)):  # the same cassette, replayed with httpx
            await response.aread()


@pytest.mark.asyncio
async def test_a_stalled_stream_is_recorded_as_a_read_timeout_and_replayed_as_one(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS[:1], end="stall"))
    path, url = tmp_path / "stall.yaml", emu.url(PATH)
    timeout = aiohttp.ClientTimeout(sock_read=0.2)
    async with use_cassette(path, "once"):
        live_bytes, live_error = await post(url, read=read_until_error, timeout=timeout)
    assert type(live_error) is aiohttp.SocketTimeoutError
    error = response_extra(path)["error"]
    assert (error["kind"], error["offset"]) == ("ReadTimeout", len(FRAGMENTS[0]))
    async with use_cassette(path):
        replay_bytes, replay_error = await post(url, read=read_until_error, timeout=timeout)
    assert type(replay_error) is aiohttp.SocketTimeoutError
    assert replay_bytes == live_bytes == FRAGMENTS[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["reset", "truncate"])
async def test_an_injected_fault_strikes_at_its_offset(tmp_path: Path, kind: str) -> None:
    path = saved(tmp_path / "fault.yaml")
    async with use_cassette(path, fault=Fault(kind, at=20)):  # type: ignore[arg-type]
        got, error = await post(read=read_until_error)
    assert got == BODY[:20]
    assert (type(error) if error else None) is (aiohttp.ClientPayloadError if kind == "reset" else None)


@pytest.mark.asyncio
async def test_an_injected_stall_waits_out_the_sessions_read_timeout(tmp_path: Path, clock: RecordingClock) -> None:
    path = saved(tmp_path / "stall.yaml")
    async with use_cassette(path, fault=Fault("stall", at=20)):
        got, error = await post(read=read_until_error, timeout=aiohttp.ClientTimeout(total=30, sock_read=3))
    assert (got, type(error)) == (BODY[:20], aiohttp.SocketTimeoutError)
    assert clock.waits == [3.0]


@pytest.mark.asyncio
async def test_a_paced_replay_sleeps_the_recorded_gaps_times_the_speed(tmp_path: Path, clock: RecordingClock) -> None:
    path = saved(tmp_path / "paced.yaml")
    async with use_cassette(path, speed=0.5):
        assert await post() == FRAGMENTS
    gaps = [(later - earlier) / 1000 * 0.5 for earlier, later in itertools.pairwise(TIMES)]
    assert clock.waits == pytest.approx(gaps)
    assert clock.libraries == {"asyncio"}


# -- requests, scrubbing, record modes --------------------------------------------------------


@pytest.mark.asyncio
async def test_credentials_in_headers_query_and_body_never_reach_the_cassette(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS))
    path, url = tmp_path / "secret.yaml", emu.url(PATH)
    async with use_cassette(path, "once") as session, aiohttp.ClientSession(
        headers={"x-api-key": KEY}
    ) as client, client.post(url, params={"key": KEY, "alt": "sse"}, json={**REQUEST, "api_key": KEY},
                             headers={"Authorization": f"Bearer {KEY}"}) as response:
        assert await response.read() == BODY
    assert emu.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the real request had it
    text = path.read_text(encoding="utf-8")
    assert KEY not in text
    assert session.scrubbed >= 4
    request = Cassette.load(path).interactions[0].request
    assert dict(request.query)["alt"] == "sse"
    emu.stop()
    async with use_cassette(path), aiohttp.ClientSession(headers={"x-api-key": KEY}) as client, client.post(
        url, params={"key": KEY, "alt": "sse"}, json={**REQUEST, "api_key": KEY}
    ) as response:
        assert await response.read() == BODY


@pytest.mark.asyncio
async def test_a_request_with_no_recorded_match_is_refused_with_a_diff(tmp_path: Path) -> None:
    path = saved(tmp_path / "one.yaml")
    with pytest.raises(CassetteError, match=r"(?s)one\.yaml.*model.*--record-mode=rewrite"):
        async with use_cassette(path), aiohttp.ClientSession() as client:
            await client.post(OFFLINE, json={**REQUEST, "model": "other"})


@pytest.mark.asyncio
async def test_new_episodes_replays_what_matches_and_records_the_rest(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse.json({"fresh": True}))
    path = saved(tmp_path / "grow.yaml")
    url = emu.url(PATH)
    async with use_cassette(path, "new_episodes") as session, aiohttp.ClientSession() as client:
        async with client.post(url, json=REQUEST) as old:
            assert await old.read() == BODY  # the recorded POST matches on path, query and body
        async with client.post(url, json={"model": "new"}) as new:
            assert await new.json() == {"fresh": True}
    assert (session.played, session.recorded) == (1, 1)
    assert len(Cassette.load(path).interactions) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("where", ["session", "call"])
async def test_raise_for_status_applies_to_recorded_and_replayed_responses(
    emu: ProviderEmulator, tmp_path: Path, where: str
) -> None:
    emu.add("POST", PATH, ScriptedResponse.json({"error": {"message": "slow down"}}, status=429))
    path, url = tmp_path / "429.yaml", emu.url(PATH)
    session_kwargs = {"raise_for_status": True} if where == "session" else {}
    call_kwargs = {"raise_for_status": True} if where == "call" else {}
    for mode in ("once", "none"):
        async with use_cassette(path, mode), aiohttp.ClientSession(**session_kwargs) as client:
            with pytest.raises(aiohttp.ClientResponseError) as raised:
                await client.post(url, json=REQUEST, **call_kwargs)
        assert raised.value.status == 429
    (interaction,) = Cassette.load(path).interactions
    # recorded whole although the caller raised before reading it
    assert (interaction.status, interaction.complete) == (429, True)
    assert json.loads(interaction.body) == {"error": {"message": "slow down"}}
    assert len(emu.requests) == 1


# -- across clients ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_cassette_recorded_with_aiohttp_replays_with_httpx_and_requests(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS))
    path, url = tmp_path / "aio.yaml", emu.url(PATH)
    async with use_cassette(path, "once"):
        await post(url)
    emu.stop()
    async with use_cassette(path), httpx.AsyncClient() as client, client.stream("POST", url, json=REQUEST) as response:
        assert [piece async for piece in response.aiter_raw()] == FRAGMENTS
    with use_cassette(path), requests.post(url, json=REQUEST, stream=True) as response:
        assert list(response.iter_content(chunk_size=None)) == FRAGMENTS


@pytest.mark.asyncio
async def test_a_compressed_body_is_decoded_whoever_recorded_it(emu: ProviderEmulator, tmp_path: Path) -> None:
    packed = gzip.compress(BODY)
    emu.add("POST", PATH, ScriptedResponse(fragments=[packed[:30], packed[30:]],
                                           headers={"content-type": "text/event-stream", "content-encoding": "gzip"}))
    url = emu.url(PATH)
    by_httpx, by_aiohttp = tmp_path / "httpx.yaml", tmp_path / "aiohttp.yaml"
    async with use_cassette(by_httpx, "once"), httpx.AsyncClient() as client:
        assert (await client.post(url, json=REQUEST)).content == BODY  # kept compressed, as sent
    async with use_cassette(by_aiohttp, "once"):
        assert await post(url, read=_read) == BODY  # aiohttp hands it over decoded: recorded decoded
    emu.stop()
    for path in (by_httpx, by_aiohttp):
        async with use_cassette(path):
            assert await post(url, read=_read) == BODY
        async with use_cassette(path), httpx.AsyncClient() as client:
            assert (await client.post(url, json=REQUEST)).content == BODY


class _AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends with aiohttp, as litellm's async client does."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        async with aiohttp.ClientSession() as session, session.request(
            request.method, str(request.url), data=await request.aread(), headers=dict(request.headers)
        ) as response:
            return httpx.Response(response.status, headers=list(response.headers.items()), content=await response.read())


@pytest.mark.asyncio
async def test_a_client_that_sends_through_another_is_recorded_once(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=FRAGMENTS))
    path, url = tmp_path / "nested.yaml", emu.url(PATH)

    async def both() -> list[bytes]:
        async with httpx.AsyncClient(transport=_AiohttpTransport()) as client:  # aiohttp under httpx
            through = (await client.post(url, json=REQUEST)).content
        return [through, await post(url, read=_read)]  # and aiohttp on its own

    async with use_cassette(path, "once") as session:
        assert await both() == [BODY, BODY]
    assert session.recorded == 2  # one per request, not one per client it passed
    assert len(Cassette.load(path).interactions) == 2
    emu.stop()
    async with use_cassette(path) as replay:
        assert await both() == [BODY, BODY]
    assert replay.unplayed == []


# -- what aiohttp users and SDKs rely on -------------------------------------------------------


@pytest.mark.asyncio
async def test_request_keeps_its_signature_for_sdks_that_read_it(tmp_path: Path) -> None:
    before = inspect.signature(aiohttp.ClientSession._request)
    async with use_cassette(saved(tmp_path / "sig.yaml")):
        assert hasattr(aiohttp.ClientSession._request, "__wrapped__")  # patched, yet it reads as before
        assert inspect.signature(aiohttp.ClientSession._request) == before  # google-genai filters by it
        assert "raise_for_status" in inspect.signature(aiohttp.ClientSession._request).parameters
        await post()


@pytest.mark.asyncio
async def test_a_body_that_cannot_be_matched_is_refused_by_name(tmp_path: Path) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"{}"

    with pytest.raises(CassetteError, match="body of type async_generator cannot be matched or recorded"):
        async with use_cassette(saved(tmp_path / "gen.yaml")), aiohttp.ClientSession() as client:
            await client.post(OFFLINE, data=body())
