"""Recording through ``use_cassette``: streams pass through, fragments are kept.

The emulator is a real server on loopback, so "the caller saw the first piece
before the server sent the last one" is checked against the server's own
per-exchange progress, not against the clock.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from dsh_replay import CassetteError, GenerateOptions, Message, use_cassette
from dsh_replay.cassette.store import Cassette
from dsh_replay.testing import ProviderEmulator, ScriptedResponse


def _event(n: int) -> bytes:
    payload = {"id": "chatcmpl-rec", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": {"content": f"part {n} "}, "finish_reason": None}]}
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


FRAGMENTS = [_event(n) for n in range(4)] + [b"data: [DONE]\n\n"]
BODY = b"".join(FRAGMENTS)


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _response_extra(path: Path, position: int = 0) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    extra: dict[str, Any] = data["interactions"][position]["response"]["dsh_replay"]
    return extra


def _assert_fragments_kept(path: Path) -> None:
    extra = _response_extra(path)
    fragments = extra["fragments"]
    assert [size for _, size in fragments] == [len(f) for f in FRAGMENTS]
    offsets = [ms for ms, _ in fragments]
    assert all(later > earlier for earlier, later in itertools.pairwise(offsets)), offsets
    assert sum(size for _, size in fragments) == len(BODY)
    assert extra["complete"] is True
    assert Cassette.load(path).interactions[0].body == BODY


# -- streaming through -----------------------------------------------------------


@pytest.mark.asyncio
async def test_async_recording_passes_each_fragment_through_as_it_arrives(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse(fragments=FRAGMENTS, delay=0.1))
    path = tmp_path / "stream.yaml"
    received: list[bytes] = []
    async with use_cassette(path, "once") as session, httpx.AsyncClient() as client, client.stream(
        "POST", emu.url("/v1/chat/completions"), json={"stream": True}
    ) as response:
        async for piece in response.aiter_raw():
            if not received:
                exchange = emu.exchanges[0]
                # the server has not even written the rest: recording did not buffer
                assert not exchange.all_sent.is_set()
                assert exchange.fragments_sent <= 1
            received.append(piece)
    assert received == FRAGMENTS
    assert session.recorded == 1 and session.wrote
    _assert_fragments_kept(path)


def test_sync_recording_passes_each_fragment_through_as_it_arrives(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse(fragments=FRAGMENTS, delay=0.1))
    path = tmp_path / "stream.yaml"
    received: list[bytes] = []
    with use_cassette(path, "once"), httpx.Client() as client, client.stream(
        "POST", emu.url("/v1/chat/completions"), json={"stream": True}
    ) as response:
        for piece in response.iter_raw():
            if not received:
                exchange = emu.exchanges[0]
                assert not exchange.all_sent.is_set()
                assert exchange.fragments_sent <= 1
            received.append(piece)
    assert received == FRAGMENTS
    _assert_fragments_kept(path)


def test_recording_keeps_status_headers_and_request(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/messages", ScriptedResponse.json({"error": {"type": "overloaded"}}, status=529))
    path = tmp_path / "error.yaml"
    with use_cassette(path, "once"), httpx.Client() as client:
        live = client.post(emu.url("/v1/messages?beta=true"), json={"model": "m"})
    interaction = Cassette.load(path).interactions[0]
    assert (interaction.status, interaction.reason) == (529, "Site Overloaded")
    assert ("content-type", "application/json") in interaction.headers
    assert interaction.request.method == "POST"
    assert interaction.request.path == "/v1/messages"
    assert interaction.request.query == [("beta", "true")]
    assert json.loads(interaction.request.body) == {"model": "m"}
    assert interaction.body == live.content
    with use_cassette(path), httpx.Client() as client:
        replayed = client.post(emu.url("/v1/messages?beta=true"), json={"model": "m"})
    assert (replayed.status_code, replayed.reason_phrase) == (529, "Site Overloaded")
    assert replayed.json() == {"error": {"type": "overloaded"}}
    assert len(emu.requests) == 1


def test_metadata_names_route_options_and_library(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(BODY))
    options = GenerateOptions(model="gpt-4o-mini", messages=[Message(role="user", content="hi")])
    path = tmp_path / "meta.yaml"
    with use_cassette(path, "once", route="openai", options=options), httpx.Client() as client:
        client.post(emu.url("/v1/chat/completions"), json={})
    metadata = yaml.safe_load(path.read_text())["dsh_replay"]
    assert metadata["format"] == 1
    assert metadata["route"] == "openai"
    assert metadata["options"] == options.to_json()
    assert metadata["library"].startswith("dsh-replay ")


# -- streams that end early --------------------------------------------------------


@pytest.mark.asyncio
async def test_abandoned_stream_is_recorded_as_far_as_it_was_read(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse(fragments=FRAGMENTS, delay=0.05))
    path = tmp_path / "abandoned.yaml"
    read: list[bytes] = []
    async with use_cassette(path, "once"), httpx.AsyncClient() as client, client.stream(
        "POST", emu.url("/v1/chat/completions"), json={}
    ) as response:
        async for piece in response.aiter_raw():
            read.append(piece)
            if len(read) == 2:
                break
    assert read == FRAGMENTS[:2]
    assert emu.exchanges[0].wait_client_closed(2.0)
    extra = _response_extra(path)
    assert extra["complete"] is False
    assert [size for _, size in extra["fragments"]] == [len(f) for f in FRAGMENTS[:2]]
    assert Cassette.load(path).interactions[0].body == b"".join(FRAGMENTS[:2])

    # replayed, it serves what was read; reading on is refused with advice
    again: list[bytes] = []
    async with use_cassette(path), httpx.AsyncClient() as client, client.stream(
        "POST", emu.url("/v1/chat/completions"), json={}
    ) as response:
        with pytest.raises(CassetteError, match=r"abandoned.*rewrite"):
            async for piece in response.aiter_raw():
                again.append(piece)
    assert again == FRAGMENTS[:2]


def test_sync_abandoned_stream_is_recorded_incomplete(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse(fragments=FRAGMENTS, delay=0.05))
    path = tmp_path / "abandoned.yaml"
    with use_cassette(path, "once"), httpx.Client() as client, client.stream(
        "POST", emu.url("/v1/chat/completions"), json={}
    ) as response:
        first = next(response.iter_raw())
    assert first == FRAGMENTS[0]
    extra = _response_extra(path)
    assert extra["complete"] is False
    assert [size for _, size in extra["fragments"]] == [len(FRAGMENTS[0])]


def _read_until_error(client: httpx.Client, url: str) -> tuple[bytes, BaseException]:
    received = b""
    with pytest.raises(httpx.TransportError) as caught, client.stream("GET", url) as response:
        for piece in response.iter_raw():
            received += piece
    return received, caught.value


@pytest.mark.parametrize(
    ("end", "expected"), [("reset", httpx.ReadError), ("truncate", httpx.RemoteProtocolError)]
)
def test_broken_stream_is_recorded_with_its_error_and_replayed_the_same_way(
    emu: ProviderEmulator, tmp_path: Path, end: str, expected: type[BaseException]
) -> None:
    # the trailing empty fragment is a pause: the client reads both pieces
    # before the connection breaks, so the recorded offset is deterministic
    emu.add("GET", "/v1/stream", ScriptedResponse(
        fragments=[FRAGMENTS[0], FRAGMENTS[1], b""], delays=[0.0, 0.02, 0.1], end=end,  # type: ignore[arg-type]
    ))
    path = tmp_path / f"{end}.yaml"
    url = emu.url("/v1/stream")
    with use_cassette(path, "once"), httpx.Client() as client:
        live_bytes, live_error = _read_until_error(client, url)
    assert type(live_error) is expected
    assert live_bytes == FRAGMENTS[0] + FRAGMENTS[1]

    error = _response_extra(path)["error"]
    assert error["kind"] == expected.__name__
    assert error["offset"] == len(live_bytes)
    assert error["at_ms"] >= 100 * 0.8

    with use_cassette(path) as session, httpx.Client() as client:
        replay_bytes, replay_error = _read_until_error(client, url)
    assert session.played == 1
    assert type(replay_error) is expected
    assert replay_bytes == live_bytes
    assert len(emu.requests) == 1


def test_stalled_stream_is_recorded_as_a_read_timeout(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("GET", "/v1/stream", ScriptedResponse(fragments=FRAGMENTS[:1], end="stall"))
    path = tmp_path / "stall.yaml"
    url = emu.url("/v1/stream")
    with use_cassette(path, "once"), httpx.Client(timeout=httpx.Timeout(5.0, read=0.2)) as client:
        live_bytes, live_error = _read_until_error(client, url)
    assert type(live_error) is httpx.ReadTimeout
    assert live_bytes == FRAGMENTS[0]
    error = _response_extra(path)["error"]
    assert (error["kind"], error["offset"]) == ("ReadTimeout", len(FRAGMENTS[0]))
    with use_cassette(path), httpx.Client(timeout=httpx.Timeout(5.0, read=0.2)) as client:
        replay_bytes, replay_error = _read_until_error(client, url)
    assert type(replay_error) is httpx.ReadTimeout
    assert replay_bytes == live_bytes


def test_nothing_is_written_when_nothing_was_recorded(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "unreachable.yaml"
    with pytest.raises(httpx.ConnectError), use_cassette(path, "once") as session:
        httpx.get("http://127.0.0.1:1/v1/models")
    assert not session.wrote
    assert list(tmp_path.iterdir()) == []


@pytest.mark.asyncio
async def test_a_response_the_transport_already_read_is_recorded_whole(tmp_path: Path) -> None:
    # MockTransport (and respx) build responses from bytes: httpx reads them before
    # any stream is iterated, so nothing passes through the recording stream
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"id": "msg_1", "echo": json.loads(request.content)})

    path = tmp_path / "mock.yaml"
    async with use_cassette(path, "once") as session, httpx.AsyncClient(
        transport=httpx.MockTransport(handler)
    ) as client:
        live = await client.post("http://api.example.test/v1/messages", json={"n": 1})
    interaction = Cassette.load(path).interactions[0]
    assert (interaction.body, interaction.complete) == (live.content, True)
    assert interaction.fragment_sizes() == [len(live.content)]
    assert session.recorded == 1
    async with use_cassette(path), httpx.AsyncClient() as client:
        replayed = await client.post("http://api.example.test/v1/messages", json={"n": 1})
    assert replayed.json() == {"id": "msg_1", "echo": {"n": 1}}


@pytest.mark.asyncio
async def test_concurrent_streams_are_recorded_separately(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/a", ScriptedResponse(fragments=[b"a1\n", b"a2\n", b"a3\n"], delay=0.03))
    emu.add("POST", "/b", ScriptedResponse(fragments=[b"b1\n", b"b2\n"], delay=0.045))
    path = tmp_path / "concurrent.yaml"

    async def fetch(client: httpx.AsyncClient, route: str) -> list[bytes]:
        async with client.stream("POST", emu.url(route), json={"route": route}) as response:
            return [piece async for piece in response.aiter_raw()]

    async with use_cassette(path, "once"), httpx.AsyncClient() as client:
        live = await asyncio.gather(fetch(client, "/a"), fetch(client, "/b"))
    assert live == [[b"a1\n", b"a2\n", b"a3\n"], [b"b1\n", b"b2\n"]]
    by_path = {i.request.path: i for i in Cassette.load(path).interactions}
    assert by_path["/a"].body == b"a1\na2\na3\n" and by_path["/a"].fragment_sizes() == [3, 3, 3]
    assert by_path["/b"].body == b"b1\nb2\n" and by_path["/b"].fragment_sizes() == [3, 3]
    async with use_cassette(path), httpx.AsyncClient() as client:
        assert await asyncio.gather(fetch(client, "/b"), fetch(client, "/a")) == live[::-1]


def test_a_block_that_raises_writes_nothing(emu: ProviderEmulator, tmp_path: Path) -> None:
    # a recording the block did not complete would otherwise be replayed by every later run
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(BODY))
    path = tmp_path / "raised.yaml"
    with pytest.raises(AssertionError, match="the test failed"), use_cassette(path, "once") as session:
        httpx.post(emu.url("/v1/chat/completions"), json={})
        raise AssertionError("the test failed after the call")
    assert not path.exists()
    assert (session.recorded, session.discarded, session.wrote) == (1, 1, False)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, AssertionError])
def test_a_rewrite_cut_short_keeps_the_old_cassette(emu: ProviderEmulator, tmp_path: Path, interrupt: type[BaseException]) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(BODY), ScriptedResponse.streaming(b"data: new\n\n"))
    path = tmp_path / "kept.yaml"
    with use_cassette(path, "once"):
        httpx.post(emu.url("/v1/chat/completions"), json={})
    before = path.read_bytes()
    with (
        pytest.raises(interrupt),
        use_cassette(path, "rewrite"),
        httpx.stream("POST", emu.url("/v1/chat/completions"), json={}) as response,
    ):
        next(response.iter_raw())
        raise interrupt()
    assert path.read_bytes() == before
