"""The cassette server: its core (which interaction answers, how it is played) and the wire (h11 on loopback).

Pacing is asserted through a fake clock (the sleeps the server asked for), never
on wall time; every network wait is bounded by ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import orjson
import pytest
from vcr.request import Request as VcrRequest

from dsh_replay.cassette.store import Cassette, Interaction, RecordedError
from dsh_replay.errors import CassetteError
from dsh_replay.server.http import HttpServer
from dsh_replay.server.replay import CassetteServer, NoMatch, Playback
from tests.clocks import RecordingClock

URL = "https://api.example.test/v1/chat/completions"
PIECES = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n", b"data: [DONE]\n\n"]
BODY = b"".join(PIECES)
TIMES = [0.0, 100.0, 250.0, 300.0]
REQUEST = {"model": "m1", "messages": [{"role": "user", "content": "hi"}], "stream": True}
T = TypeVar("T")
GUARD = 10.0  # seconds: a hang guard, never a timing assertion


def interaction(
    body: bytes = BODY, *, request: dict[str, Any] | None = None, status: int = 200, complete: bool = True,
    error: RecordedError | None = None, method: str = "POST", url: str = URL,
) -> Interaction:
    fragments = None
    if body == BODY:
        fragments = [(ms, len(piece)) for ms, piece in zip(TIMES, PIECES, strict=True)]
    return Interaction(
        request=VcrRequest(method, url, orjson.dumps(request or REQUEST), {"content-type": "application/json"}),
        status=status, reason="OK" if status == 200 else "Too Many Requests",
        headers=[("content-type", "text/event-stream"), ("content-length", str(len(body))),
                 ("transfer-encoding", "chunked"), ("connection", "keep-alive"), ("x-request-id", "req_1")],
        body=body, fragments=fragments, complete=complete, error=error,
    )


def cassette(name: str, *interactions: Interaction) -> Cassette:
    return Cassette(path=Path(f"cassettes/{name}.yaml"), interactions=list(interactions), metadata={"format": 1})


def ask(core: CassetteServer, request: dict[str, Any] | None = None, *, target: str = "/v1/chat/completions",
        method: str = "POST", headers: list[tuple[str, str]] | None = None) -> Playback | NoMatch:
    return core.answer(method, target, headers or [("host", "127.0.0.1:1")], orjson.dumps(request or REQUEST))


def played(answer: Playback | NoMatch) -> Playback:
    assert isinstance(answer, Playback), answer
    return answer


# -- the core ------------------------------------------------------------------------


def test_a_match_plays_the_recorded_head_and_fragments_with_our_own_framing() -> None:
    core = CassetteServer([cassette("p/text", interaction())])
    answer = played(ask(core))
    assert (answer.status, answer.cassette, answer.position, answer.ending) == (200, Path("cassettes/p/text.yaml"), 0,
                                                                             "complete")
    assert answer.headers == [("content-type", "text/event-stream"), ("x-request-id", "req_1")]
    assert [piece for _, piece in answer.steps()] == PIECES


def test_key_order_and_host_do_not_count_but_the_body_does() -> None:
    core = CassetteServer([cassette("p/text", interaction())])
    reordered = {"stream": True, "messages": [{"content": "hi", "role": "user"}], "model": "m1"}
    assert played(ask(core, reordered, headers=[("host", "localhost:9")])).status == 200
    assert isinstance(ask(core, REQUEST | {"model": "m2"}), NoMatch)


def test_a_client_s_real_credentials_match_the_scrubbed_recording() -> None:
    # recorded with ?key=REDACTED and an api_key field scrubbed; the client sends its own key
    recorded = interaction(request=REQUEST | {"api_key": "REDACTED"}, url=URL + "?alt=sse&key=REDACTED")
    core = CassetteServer([cassette("p/keyed", recorded)])
    key = "AIza" + "SyD3f8Kq1Lm2Np3Or4St5Uv6Wx7Yz8Ab9Cd"
    answer = ask(core, REQUEST | {"api_key": key}, target=f"/v1/chat/completions?alt=sse&key={key}")
    assert played(answer).status == 200
    assert isinstance(ask(core, REQUEST | {"api_key": key}, target=f"/v1/chat/completions?alt=json&key={key}"),
                      NoMatch)  # the rest of the query still counts


def test_repeated_requests_play_in_recorded_order_then_the_last_again() -> None:
    first, second = interaction(b"busy", status=429), interaction(b"ok")
    core = CassetteServer([cassette("p/retry", first, second)])
    answers = [played(ask(core)) for _ in range(3)]
    assert [(a.status, a.position, a.repeated) for a in answers] == [(429, 0, False), (200, 1, False), (200, 1, True)]


def test_each_cassette_keeps_its_own_count() -> None:
    other = {"model": "m1", "messages": [{"role": "user", "content": "bye"}]}
    core = CassetteServer([cassette("p/a", interaction(b"a1"), interaction(b"a2")),
                           cassette("p/b", interaction(b"b1", request=other), interaction(b"b2", request=other))])
    bodies = [played(ask(core, r)).pacing.body for r in (REQUEST, other, other, REQUEST)]
    assert bodies == [b"a1", b"b1", b"b2", b"a2"]


def test_the_first_cassette_with_a_match_answers_unless_the_client_picks_one() -> None:
    core = CassetteServer([cassette("p/rate-limited", interaction(b"busy", status=429)),
                           cassette("p/text", interaction(b"ok"))])
    assert played(ask(core)).status == 429
    assert played(ask(core, headers=[("X-Dsh-Replay-Cassette", "p/text")])).pacing.body == b"ok"
    picked = played(ask(core, target="/_dsh/text/-/v1/chat/completions"))
    assert (picked.cassette, picked.pacing.body) == (Path("cassettes/p/text.yaml"), b"ok")


def test_picking_a_cassette_that_is_not_served_names_the_served_ones() -> None:
    core = CassetteServer([cassette("p/text", interaction())])
    answer = ask(core, target="/_dsh/nope/-/v1/chat/completions")
    assert isinstance(answer, NoMatch)
    assert answer.nearest is None and answer.diff == ["cassette"]
    assert "'nope'" in answer.message and "cassettes/p/text" in answer.message


def test_no_match_names_the_nearest_cassette_and_the_fields_that_differ() -> None:
    near = {"model": "m1", "messages": [{"role": "user", "content": "hello"}], "stream": True}
    core = CassetteServer([cassette("p/far", interaction(request={"model": "x", "input": "y"})),
                           cassette("p/near", interaction(request=near))])
    answer = ask(core, REQUEST)
    assert isinstance(answer, NoMatch)
    assert answer.nearest == Path("cassettes/p/near.yaml")
    assert answer.diff == ["body.messages[0].content"]
    error = orjson.loads(answer.body())["error"]
    assert error["type"] == "dsh_replay_no_match" and error["nearest"] == "cassettes/p/near.yaml"
    assert "closest recorded request" in error["message"] and "messages[0].content" in error["message"]


def test_no_match_on_method_path_and_query() -> None:
    core = CassetteServer([cassette("p/text", interaction())])
    answer = ask(core, method="GET", target="/v1/models?limit=2")
    assert isinstance(answer, NoMatch)
    assert answer.diff[:3] == ["method", "path", "query"]


@pytest.mark.parametrize(("recorded", "ending", "sent"), [
    ({"complete": False}, "cut", PIECES),
    ({"error": RecordedError("ReadError", "reset by peer", 22, 120.0)}, "reset", PIECES[:2]),
    ({"error": RecordedError("RemoteProtocolError", "peer closed", 11, 50.0)}, "cut", PIECES[:1]),
    ({"error": RecordedError("ReadTimeout", "timed out", 22, 0.0)}, "stall", PIECES[:2]),
])
def test_a_response_ends_as_its_recording_ended(recorded: dict[str, Any], ending: str, sent: list[bytes]) -> None:
    answer = played(ask(CassetteServer([cassette("p/x", interaction(**recorded))])))
    assert answer.ending == ending
    assert b"".join(piece for _, piece in answer.steps()) == b"".join(sent)


def test_a_bad_speed_or_no_cassette_is_refused() -> None:
    with pytest.raises(CassetteError, match="replay speed must be a number from 0"):
        CassetteServer([cassette("p/x", interaction())], speed=-1)
    with pytest.raises(CassetteError, match="at least one cassette"):
        CassetteServer([])


# -- the wire --------------------------------------------------------------------------


@asynccontextmanager
async def serving(core: CassetteServer, **options: Any) -> AsyncIterator[tuple[int, list[str]]]:
    log: list[str] = []
    server = HttpServer(core, log=log.append, **options)
    port = await server.start("127.0.0.1", 0)
    try:
        yield port, log
    finally:
        await asyncio.wait_for(server.close(), GUARD)


def run(coro: Callable[[], Awaitable[T]]) -> T:
    async def guarded() -> T:
        return await asyncio.wait_for(coro(), GUARD)

    return asyncio.run(guarded())


async def raw_exchange(port: int, request: dict[str, Any] | None = None, target: str = "/v1/chat/completions") -> bytes:
    """The bytes the server sent for one request, to the connection's end (a reset raises)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = orjson.dumps(request or REQUEST)
    writer.write(f"POST {target} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                 f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
    try:
        return await reader.read(-1)
    finally:
        writer.close()


def chunks_of(raw: bytes) -> tuple[bytes, list[bytes], bool]:
    """(head, the chunked body's chunks, whether the final chunk came)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    chunks: list[bytes] = []
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return head, chunks, True
        chunks.append(rest[:size])
        rest = rest[size + 2:]
    return head, chunks, False


def test_the_body_goes_out_one_chunk_per_recorded_fragment_then_the_final_chunk() -> None:
    async def scenario() -> tuple[bytes, list[str]]:
        async with serving(CassetteServer([cassette("p/text", interaction())])) as (port, log):
            return await raw_exchange(port), log

    raw, log = run(scenario)
    head, chunks, ended = chunks_of(raw)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-length" not in head.lower() and b"x-request-id: req_1" in head
    assert chunks == PIECES and ended
    assert log == ["POST /v1/chat/completions -> 200 cassettes/p/text.yaml #0 (complete)"]


def test_an_abandoned_recording_is_cut_without_the_final_chunk() -> None:
    async def scenario() -> bytes:
        async with serving(CassetteServer([cassette("p/cut", interaction(complete=False))])) as (port, _):
            return await raw_exchange(port)

    _, chunks, ended = chunks_of(run(scenario))
    assert chunks == PIECES and not ended


def test_a_recorded_read_error_resets_the_connection_after_its_bytes() -> None:
    error = RecordedError("ReadError", "reset by peer", 22, 120.0)

    async def scenario() -> tuple[list[bytes], BaseException | None]:
        async with serving(CassetteServer([cassette("p/reset", interaction(error=error))])) as (port, _):
            got: list[bytes] = []
            async with httpx.AsyncClient() as client:
                try:
                    async with client.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions",
                                             json=REQUEST) as response:
                        async for piece in response.aiter_raw():
                            got.append(piece)
                except httpx.TransportError as exc:
                    return got, exc
            return got, None

    got, failure = run(scenario)
    assert b"".join(got) == b"".join(PIECES[:2])
    assert isinstance(failure, httpx.ReadError)  # ECONNRESET; a plain close would be a RemoteProtocolError

    async def raw() -> bytes:
        async with serving(CassetteServer([cassette("p/reset", interaction(error=error))])) as (port, _):
            return await raw_exchange(port)

    with pytest.raises(ConnectionResetError):
        run(raw)


def test_a_recorded_timeout_stalls_until_the_client_gives_up() -> None:
    error = RecordedError("ReadTimeout", "timed out", 11, 0.0)

    async def scenario() -> tuple[bytes, type[BaseException]]:
        async with serving(CassetteServer([cassette("p/stall", interaction(error=error))])) as (port, _):
            got = b""
            async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.3)) as client:
                with pytest.raises(httpx.ReadTimeout) as caught:
                    async with client.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions",
                                             json=REQUEST) as response:
                        async for piece in response.aiter_raw():
                            got += piece
            return got, caught.type

    got, kind = run(scenario)
    assert (got, kind) == (PIECES[0], httpx.ReadTimeout)


def test_a_stall_ends_when_the_server_stops_waiting() -> None:
    error = RecordedError("ReadTimeout", "timed out", 11, 0.0)

    async def scenario() -> bytes:
        core = CassetteServer([cassette("p/stall", interaction(error=error))])
        async with serving(core, stall_seconds=0.05) as (port, _):
            return await raw_exchange(port)

    _, chunks, ended = chunks_of(run(scenario))
    assert chunks == PIECES[:1] and not ended


def test_pacing_asks_the_injected_clock_for_the_recorded_gaps_times_speed() -> None:
    clock = RecordingClock()

    async def scenario() -> list[bytes]:
        core = CassetteServer([cassette("p/text", interaction())], speed=2.0, clock=clock)
        async with serving(core) as (port, _):
            return chunks_of(await raw_exchange(port))[1]

    assert run(scenario) == PIECES
    assert clock.waits == pytest.approx([0.2, 0.3, 0.1])


def test_a_no_match_is_a_404_with_json_and_the_connection_stays_usable() -> None:
    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        async with serving(CassetteServer([cassette("p/text", interaction())])) as (port, _), \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            missing = await client.post("/v1/chat/completions", json={"model": "other"})
            found = await client.post("/v1/chat/completions", json=REQUEST)
            return missing, found

    missing, found = run(scenario)
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
    error = missing.json()["error"]
    assert error["nearest"] == "cassettes/p/text.yaml"
    assert error["diff"] == ["body.messages", "body.model", "body.stream"]
    assert found.status_code == 200 and found.content == BODY


def test_a_request_that_is_not_http_gets_a_400_and_a_close() -> None:
    async def scenario() -> bytes:
        async with serving(CassetteServer([cassette("p/text", interaction())])) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"HELLO\r\n\r\n")
            try:
                return await reader.read(-1)
            finally:
                writer.close()

    raw = run(scenario)
    assert raw.startswith(b"HTTP/1.1 400 ") and b"dsh_replay_bad_request" in raw


def test_fifty_concurrent_clients_all_get_the_recorded_bytes() -> None:
    pieces = [[f"data: {n} {i}\n\n".encode() for i in range(20)] for n in range(5)]
    bodies = [b"".join(p) for p in pieces]
    requests = [{"model": "m1", "messages": [{"role": "user", "content": f"case {n}"}]} for n in range(5)]
    core = CassetteServer([cassette(f"p/case{n}", Interaction(
        request=VcrRequest("POST", URL, orjson.dumps(requests[n]), {}), status=200, reason="OK",
        headers=[("content-type", "text/event-stream")], body=body,
        fragments=[(float(i), len(piece)) for i, piece in enumerate(pieces[n])],
    )) for n, body in enumerate(bodies)])

    async def one(port: int, n: int) -> bytes:
        async with httpx.AsyncClient() as client:
            got = b""
            async with client.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions",
                                     json=requests[n % 5]) as response:
                async for piece in response.aiter_raw():
                    got += piece
            return got

    async def scenario() -> list[bytes]:
        async with serving(core) as (port, _):
            return await asyncio.gather(*(one(port, n) for n in range(50)))

    assert run(scenario) == [bodies[n % 5] for n in range(50)]
    assert core.requests == 50 and core.unmatched == 0


def test_close_ends_open_connections_mid_response() -> None:
    class Stuck(RecordingClock):
        async def async_sleep(self, seconds: float) -> None:
            await asyncio.sleep(GUARD * 2)  # would outlast the guard if close() did not cancel it

    async def scenario() -> bytes:
        core = CassetteServer([cassette("p/text", interaction())], speed=1.0, clock=Stuck())
        server = HttpServer(core)
        port = await server.start("127.0.0.1", 0)
        exchange = asyncio.ensure_future(raw_exchange(port))
        await asyncio.sleep(0.1)  # lets the first fragment out; the result does not depend on it
        await asyncio.wait_for(server.close(), GUARD)
        try:
            return await asyncio.wait_for(exchange, GUARD)
        except ConnectionResetError:
            return b"reset"

    raw = run(scenario)
    assert raw == b"reset" or not chunks_of(raw)[2]


def test_expect_100_continue_is_answered_before_the_body() -> None:
    async def scenario() -> bytes:
        async with serving(CassetteServer([cassette("p/text", interaction())])) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            body = orjson.dumps(REQUEST)
            writer.write(f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: {len(body)}\r\n"
                         "expect: 100-continue\r\nconnection: close\r\n\r\n".encode())
            interim = await reader.readuntil(b"\r\n\r\n")
            writer.write(body)
            rest = await reader.read(-1)
            writer.close()
            return interim + rest

    raw = run(scenario)
    assert raw.startswith(b"HTTP/1.1 100 ")
    assert chunks_of(raw.partition(b"\r\n\r\n")[2])[1:] == (PIECES, True)


def test_a_failing_matcher_is_a_500_naming_it_and_the_server_keeps_serving() -> None:
    def broken(r1: Any, r2: Any) -> bool:
        raise KeyError("model")

    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        core = CassetteServer([cassette("p/text", interaction())], matchers=[broken])
        async with serving(core) as (port, _), httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            return (await client.post("/v1/chat/completions", json=REQUEST),
                    await client.post("/v1/chat/completions", json=REQUEST))

    for response in run(scenario):
        assert response.status_code == 500
        assert response.json()["error"]["type"] == "dsh_replay_error"
        assert "matcher broken raised KeyError" in response.json()["error"]["message"]


def test_a_recorded_header_outside_ascii_goes_out_as_latin_1() -> None:
    recorded = interaction()
    recorded.headers.append(("x-city", "Köln"))

    async def scenario() -> httpx.Response:
        async with serving(CassetteServer([cassette("p/text", recorded)])) as (port, _), \
                httpx.AsyncClient() as client:
            return await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=REQUEST)

    response = run(scenario)
    assert (b"x-city", "Köln".encode("latin-1")) in response.headers.raw
    assert response.content == BODY


def test_a_cassette_whose_requests_an_earlier_one_answers_is_reported_as_shadowed() -> None:
    other = {"model": "m1", "messages": [{"role": "user", "content": "bye"}]}
    core = CassetteServer([cassette("p/rate-limited", interaction(b"busy", status=429)),
                           cassette("p/text", interaction(b"ok")),
                           cassette("p/mixed", interaction(b"ok"), interaction(b"bye", request=other))])
    assert core.shadowed() == [(Path("cassettes/p/text.yaml"), Path("cassettes/p/rate-limited.yaml"))]


# -- what the log shows ------------------------------------------------------------------

# test keys shaped like real ones, so the secret scan would catch them (asserted below)
OPENAI_KEY = "sk-test-" + "Vb7Qx2Lm9Rt4Kp8Zs3Wd6Hj1Nc5Gf0Ea"
GOOGLE_KEY = "AIza" + "SyD3f8Kq1Lm2Np3Or4St5Uv6Wx7Yz8Ab9Cd"


@pytest.mark.parametrize("key", [OPENAI_KEY, GOOGLE_KEY])
def test_the_log_shows_a_target_with_its_key_replaced(key: str) -> None:
    from dsh_replay.cassette.secrets import find_secrets

    assert list(find_secrets(key)), "a test key the scan does not take for one proves nothing"
    # the cassette holds the key scrubbed, as recording writes it; the client's real key matches it
    recorded = interaction(url=f"{URL}?key=REDACTED&alt=sse")

    async def scenario() -> tuple[list[int], list[str]]:
        async with serving(CassetteServer([cassette("p/text", recorded)])) as (port, log), \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            found = await client.post(f"/v1/chat/completions?key={key}&alt=sse", json=REQUEST)
            missing = await client.post(f"/v1/other?KEY={key}", json=REQUEST)
            return [found.status_code, missing.status_code], log

    statuses, log = run(scenario)
    assert statuses == [200, 404]
    assert log[0].startswith("POST /v1/chat/completions?key=REDACTED&alt=sse -> 200 cassettes/p/text.yaml")
    assert log[1].startswith("POST /v1/other?KEY=REDACTED -> 404 no match")
    assert not [line for line in log if key in line]


def test_a_refused_request_line_is_logged_without_the_bytes_it_quoted() -> None:
    async def scenario() -> tuple[bytes, list[str]]:
        async with serving(CassetteServer([cassette("p/text", interaction())])) as (port, log):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            # a space in the query makes the request line invalid; h11 quotes the line in its error
            writer.write(f"GET /v1/models?key={OPENAI_KEY} x HTTP/1.1\r\nhost: x\r\n\r\n".encode())
            try:
                return await reader.read(-1), log
            finally:
                writer.close()

    raw, log = run(scenario)
    assert raw.startswith(b"HTTP/1.1 400 ")
    assert log == ["400 refused: not a valid HTTP/1.1 request: illegal request line"]


def test_a_target_that_is_no_uri_gets_a_400() -> None:
    async def scenario() -> tuple[bytes, list[str]]:
        async with serving(CassetteServer([cassette("p/text", interaction())])) as (port, log):
            return await raw_exchange(port, target=f"//[::1/v1?key={OPENAI_KEY}"), log

    raw, log = run(scenario)
    assert raw.startswith(b"HTTP/1.1 400 ") and b"not a URI" in raw
    assert log == ["400 refused: the request target is not a URI: Invalid IPv6 URL"]
