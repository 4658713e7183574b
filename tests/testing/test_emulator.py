"""Tests of dsh_replay.testing: the scripted provider on loopback."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from dsh_replay.testing import ProviderEmulator, ScriptedResponse, random_fragments, split_by_sizes
from dsh_replay.testing.emulator import _Handler
from dsh_replay.testing.scripts import METHODS

SSE_BODY = b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: {"n": 3}\n\n'


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _raw_exchange(emu: ProviderEmulator, path: str) -> bytes:
    """Send a bare HTTP/1.1 request and read everything until the server closes."""
    with socket.create_connection(("127.0.0.1", int(emu.base_url.rsplit(":", 1)[1]))) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _chunk_sizes(raw: bytes) -> list[int]:
    """The sizes of the HTTP chunks in a raw chunked response."""
    body = raw.split(b"\r\n\r\n", 1)[1]
    sizes: list[int] = []
    while True:
        line, body = body.split(b"\r\n", 1)
        size = int(line, 16)
        if size == 0:
            return sizes
        sizes.append(size)
        body = body[size + 2 :]


# -- fragments ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_first_fragment_arrives_before_the_server_sends_the_last(
    emu: ProviderEmulator,
) -> None:
    fragments = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]
    emu.add("POST", "/stream", ScriptedResponse(fragments=fragments, delay=0.15))
    received: list[bytes] = []
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", emu.url("/stream")) as response,
    ):
        async for piece in response.aiter_raw():
            if not received:
                exchange = emu.exchanges[0]
                # The proof of streaming: the rest of the body was not even written yet.
                assert not exchange.all_sent.is_set()
                # (<= 1: the server counts a fragment after its send() returns)
                assert exchange.fragments_sent <= 1
            received.append(piece)
    assert received == fragments
    # The client can read the last chunk before the server thread records it sent.
    assert await asyncio.to_thread(emu.exchanges[0].wait_done, 5.0)
    assert emu.exchanges[0].all_sent.is_set()


def test_each_fragment_is_one_http_chunk_on_the_wire(emu: ProviderEmulator) -> None:
    emu.add("GET", "/chunks", ScriptedResponse(fragments=[b"ab", b"", b"cde", b"f"]))
    raw = _raw_exchange(emu, "/chunks")
    assert raw.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nTransfer-Encoding: chunked\r\n" in raw
    # The empty fragment is skipped: an empty chunk would end the body.
    assert _chunk_sizes(raw) == [2, 3, 1]


def test_hostile_fragments_survive_the_wire_exactly(emu: ProviderEmulator) -> None:
    body = 'data: {"t": "héllo wörld ✓"}\r\n\r\n'.encode() * 4
    response = ScriptedResponse.fragmented(body, seed=7, max_size=9)
    emu.add("GET", "/hostile", response)
    raw = _raw_exchange(emu, "/hostile")
    assert _chunk_sizes(raw) == [len(f) for f in response.fragments]


def test_random_fragments_cut_inside_crlf_and_utf8() -> None:
    body = "data: é✓\r\n\r\n".encode() * 3
    pieces = random_fragments(body, seed=3, max_size=8)
    assert b"".join(pieces) == body
    assert pieces == random_fragments(body, seed=3, max_size=8)  # reproducible
    assert pieces != random_fragments(body, seed=4, max_size=8)
    assert all(0 < len(p) <= 8 for p in pieces)
    assert any(p.endswith(b"\r") for p in pieces[:-1]), "no cut between CR and LF"
    assert any(not _decodes(p) for p in pieces), "no cut inside a character"


def _decodes(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_split_by_sizes_cycles_and_rejects_bad_sizes() -> None:
    assert split_by_sizes(b"abcdefgh", [1, 3]) == [b"a", b"bcd", b"e", b"fgh"]
    assert split_by_sizes(b"abcde", 2) == [b"ab", b"cd", b"e"]
    with pytest.raises(ValueError, match="positive"):
        split_by_sizes(b"abc", [0])


def test_streaming_helper_splits_per_event_by_default() -> None:
    response = ScriptedResponse.streaming(SSE_BODY)
    assert response.fragments == (
        b'data: {"n": 1}\n\n',
        b'data: {"n": 2}\n\n',
        b'data: {"n": 3}\n\n',
    )
    assert response.headers == {"content-type": "text/event-stream"}
    ndjson = ScriptedResponse.streaming(b'{"a":1}\n{"a":2}\n', content_type="application/x-ndjson")
    assert ndjson.fragments == (b'{"a":1}\n', b'{"a":2}\n')
    assert ScriptedResponse.streaming(b"abcdef", fragment_sizes=4).fragments == (b"abcd", b"ef")


def test_scripted_response_validates_its_values() -> None:
    with pytest.raises(ValueError, match="end must be"):
        ScriptedResponse(end="explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status"):
        ScriptedResponse(status=42)
    assert ScriptedResponse(delay=0.5).pause_before(0) == 0.0
    assert ScriptedResponse(delay=0.5).pause_before(1) == 0.5
    assert ScriptedResponse(delays=[0.1, 0.2], delay=0.5).pause_before(1) == 0.2


def test_json_response_has_a_content_length(emu: ProviderEmulator) -> None:
    emu.add("GET", "/err", ScriptedResponse.json({"error": "nope"}, status=529))
    with httpx.Client() as client:
        response = client.get(emu.url("/err"))
    assert response.status_code == 529
    assert response.reason_phrase == "Site Overloaded"
    assert response.headers["content-length"] == str(len(b'{"error": "nope"}'))
    assert "transfer-encoding" not in response.headers
    assert response.json() == {"error": "nope"}


# -- scripts and recording ----------------------------------------------------


def test_responses_are_served_in_order_and_the_last_repeats(emu: ProviderEmulator) -> None:
    emu.add("GET", "/r", ScriptedResponse.json("a"), ScriptedResponse.json("b"))
    with httpx.Client() as client:
        answers = [client.get(emu.url("/r")).json() for _ in range(4)]
    assert answers == ["a", "b", "b", "b"]


def test_unscripted_route_gets_a_501_naming_it(emu: ProviderEmulator) -> None:
    emu.add("POST", "/v1/chat", ScriptedResponse.json({}))
    with httpx.Client() as client:
        response = client.get(emu.url("/v1/other?x=1"))
    assert response.status_code == 501
    message = response.json()["error"]["message"]
    assert "GET /v1/other" in message
    assert "POST /v1/chat" in message
    assert emu.exchanges[0].scripted is False


def test_requests_are_recorded(emu: ProviderEmulator) -> None:
    emu.add("POST", "/v1beta/models/m:streamGenerateContent", ScriptedResponse.json({}))
    with httpx.Client() as client:
        client.post(
            emu.url("/v1beta/models/m:streamGenerateContent?alt=sse"),
            headers={"X-Goog-Api-Key": "k-1"},
            json={"contents": []},
        )
        # A streamed request body arrives with chunked transfer encoding.
        client.post(emu.url("/v1beta/models/m:streamGenerateContent"), content=iter([b"ab", b"cd"]))
    first, second = emu.requests
    assert first.method == "POST"
    assert first.path == "/v1beta/models/m:streamGenerateContent"
    assert first.query == {"alt": "sse"}
    assert first.headers["x-goog-api-key"] == "k-1"
    assert first.json() == {"contents": []}
    assert second.body == b"abcd"
    assert second.query == {}


def test_add_rejects_a_query_and_an_empty_script(emu: ProviderEmulator) -> None:
    with pytest.raises(ValueError, match="query"):
        emu.add("GET", "/x?alt=sse", ScriptedResponse())
    with pytest.raises(ValueError, match="at least one"):
        emu.add("GET", "/x")


class PollClock:
    """Stands in for ``time`` in ``dsh_replay.testing``: time moves only when the caller sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def poll_clock(monkeypatch: pytest.MonkeyPatch) -> PollClock:
    fake = PollClock()
    monkeypatch.setattr("dsh_replay.testing.emulator.time", fake)
    return fake


def test_wait_for_requests_times_out(emu: ProviderEmulator, poll_clock: PollClock) -> None:
    with pytest.raises(TimeoutError, match="expected 1 request"):
        emu.wait_for_requests(1, timeout=0.1)
    # it polled until the timeout was over, and not much longer (one poll interval)
    assert 0.1 <= sum(poll_clock.sleeps) <= 0.1 + 2 * max(poll_clock.sleeps)
    assert max(poll_clock.sleeps) <= 0.05


def _raised_at_once(call: Callable[[], object]) -> BaseException | None:
    """What *call* raised, run in a thread so that a hang fails the test instead of stalling it."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10.0)  # hang guard only
    assert not thread.is_alive(), "the call hangs instead of refusing its arguments"
    return raised[0] if raised else None


@pytest.mark.parametrize(
    ("count", "timeout", "error", "message"),
    [
        (100, math.nan, ValueError, r"timeout must be a finite number of seconds >= 0, got nan"),
        (100, math.inf, ValueError, r"timeout must be a finite number of seconds >= 0, got inf"),
        (1, -1, ValueError, r"timeout must be a finite number of seconds >= 0, got -1"),
        (1, "1", TypeError, r"timeout must be a number of seconds, got '1' \(str\)"),
        ("1", 0.1, TypeError, r"count must be an int >= 0, got '1' \(str\)"),
        (1.5, 0.1, TypeError, r"count must be an int >= 0, got 1.5 \(float\)"),
        (-1, 0.1, ValueError, r"count must be an int >= 0, got -1"),
    ],
)
def test_wait_for_requests_refuses_bad_arguments_at_once(
    emu: ProviderEmulator, poll_clock: PollClock, count: Any, timeout: Any, error: type[Exception], message: str
) -> None:
    raised = _raised_at_once(lambda: emu.wait_for_requests(count, timeout=timeout))
    assert poll_clock.sleeps == []  # refused before waiting at all
    assert type(raised) is error
    with pytest.raises(error, match=message):
        raise raised


BAD_ROUTES = [
    (("GET", "/y", "hello"), TypeError, r"responses\[0\] must be a ScriptedResponse, got 'hello' \(str\)"),
    (("GET", "/y", {"status": 200}), TypeError, r"responses\[0\] must be a ScriptedResponse, got \{"),
    (("GET", "/y", ScriptedResponse(), None), TypeError, r"responses\[1\] must be a ScriptedResponse"),
    (("GET", "/y", [ScriptedResponse()]), TypeError, r"unpack a list: add\(method, path, \*responses\)"),
    ((None, "/y", ScriptedResponse()), TypeError, r"method must be one of DELETE, GET, PATCH, POST, PUT, got None"),
    (("", "/y", ScriptedResponse()), ValueError, r"method must be one of DELETE, GET, PATCH, POST, PUT, got ''"),
    (("HEAD", "/y", ScriptedResponse()), ValueError, r"method must be one of .*, got 'HEAD'"),
    (("GET", "noslash", ScriptedResponse()), ValueError, r"path must start with '/', got 'noslash'"),
    (("GET", "", ScriptedResponse()), ValueError, r"path must start with '/', got ''"),
    (("GET", b"/y", ScriptedResponse()), TypeError, r"path must be a str such as '/v1/chat/completions', got b'/y'"),
]


def _route_id(args: tuple[Any, ...]) -> str:
    return " ".join("<response>" if isinstance(a, ScriptedResponse) else repr(a) for a in args)


@pytest.mark.parametrize(
    ("args", "error", "message"), BAD_ROUTES, ids=[_route_id(row[0]) for row in BAD_ROUTES]
)
def test_add_refuses_what_could_never_be_served(
    emu: ProviderEmulator, args: tuple[Any, ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        emu.add(*args)
    assert type(raised.value) is error
    with httpx.Client() as client:
        assert client.get(emu.url("/y")).status_code == 501  # nothing was queued


def test_add_takes_any_case_of_the_served_methods(emu: ProviderEmulator) -> None:
    served = {name.removeprefix("do_") for name in dir(_Handler) if name.startswith("do_")}
    assert served == set(METHODS)
    emu.add("patch", "/p", ScriptedResponse.json("ok"))
    with httpx.Client() as client:
        assert client.patch(emu.url("/p")).json() == "ok"


def test_url_refuses_a_path_that_is_not_a_str(emu: ProviderEmulator) -> None:
    with pytest.raises(TypeError, match=r"path must be a str such as '/v1/chat/completions', got 5 \(int\)"):
        emu.url(5)  # type: ignore[arg-type]


def test_base_url_needs_a_running_emulator() -> None:
    emulator = ProviderEmulator()
    with pytest.raises(RuntimeError, match="not running"):
        _ = emulator.base_url
    with emulator:
        assert emulator.base_url.startswith("http://127.0.0.1:")
        assert emulator.url("v1/x") == emulator.base_url + "/v1/x"


def test_a_subprocess_can_use_the_emulator(emu: ProviderEmulator) -> None:
    emu.add("GET", "/ping", ScriptedResponse.json({"pong": True}))
    code = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())"
    result = subprocess.run(
        [sys.executable, "-c", code, emu.url("/ping")],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(result.stdout) == {"pong": True}
    assert emu.requests[0].path == "/ping"


# -- endings and early close -------------------------------------------------


def test_reset_aborts_the_connection_after_the_fragments(emu: ProviderEmulator) -> None:
    emu.add("GET", "/reset", ScriptedResponse(fragments=[b"data: a\n\n"], end="reset"))
    received = b""
    with (
        httpx.Client() as client,
        pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)),
        client.stream("GET", emu.url("/reset")) as response,
    ):
        for piece in response.iter_raw():
            received += piece
    assert b"data: a\n\n".startswith(received)
    assert emu.exchanges[0].wait_done(2.0)


def test_reset_sends_rst_not_fin(emu: ProviderEmulator) -> None:
    emu.add("GET", "/reset", ScriptedResponse(fragments=[b"x"], delay=0.0, end="reset"))
    with pytest.raises(ConnectionResetError):
        _raw_exchange(emu, "/reset")


def test_truncate_ends_the_body_without_its_last_chunk(emu: ProviderEmulator) -> None:
    emu.add("GET", "/cut", ScriptedResponse(fragments=[b"data: a\n\n"], end="truncate"))
    raw = _raw_exchange(emu, "/cut")  # a clean close: no ConnectionResetError
    assert raw.endswith(b"9\r\ndata: a\n\n\r\n")
    assert not raw.endswith(b"0\r\n\r\n")
    with httpx.Client() as client, pytest.raises(httpx.RemoteProtocolError):
        client.get(emu.url("/cut"))


def test_stall_holds_the_connection_until_the_client_leaves(emu: ProviderEmulator) -> None:
    emu.add("GET", "/stall", ScriptedResponse(fragments=[b"data: a\n\n"], end="stall"))
    timeout = httpx.Timeout(5.0, read=0.2)
    started = time.monotonic()
    with httpx.Client(timeout=timeout) as client, pytest.raises(httpx.ReadTimeout):
        client.get(emu.url("/stall"))
    # held until the client's read timeout; the upper bound is a hang guard only
    assert 0.2 <= time.monotonic() - started < 10.0
    exchange = emu.exchanges[0]
    assert exchange.wait_client_closed(2.0)
    assert exchange.wait_done(2.0)
    assert exchange.fragments_sent == 1


def test_stop_is_prompt_with_stalled_and_silent_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    # A handler that stop() fails to wake is waited for this long: a stop that is
    # not prompt takes 60 s per connection, far beyond the hang guard below.
    monkeypatch.setattr("dsh_replay.testing.emulator._JOIN_TIMEOUT", 60.0)
    emulator = ProviderEmulator().start()
    emulator.add("GET", "/stall", ScriptedResponse(fragments=[b"x"], end="stall"))
    address = ("127.0.0.1", int(emulator.base_url.rsplit(":", 1)[1]))
    with (
        httpx.Client() as client,
        client.stream("GET", emulator.url("/stall")) as response,
        socket.create_connection(address),  # connected, never sends a request
    ):
        pieces = response.iter_raw()  # kept referenced: a collected iterator closes the stream
        assert next(pieces) == b"x"
        started = time.monotonic()
        emulator.stop()
        elapsed = time.monotonic() - started
        exchange = emulator.exchanges[0]
    assert elapsed < 10.0
    assert exchange.done.is_set()
    # The emulator stopping is not the client closing.
    assert not exchange.client_closed.is_set()


@pytest.mark.asyncio
async def test_server_sees_a_client_that_stops_reading(emu: ProviderEmulator) -> None:
    fragments = [b"data: %d\n\n" % i for i in range(20)]
    emu.add("POST", "/stream", ScriptedResponse(fragments=fragments, delay=0.05))
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", emu.url("/stream")) as response:
            async for _ in response.aiter_raw():
                break
        exchange = emu.exchanges[0]
        assert await asyncio.to_thread(exchange.wait_client_closed, 2.0)
    assert exchange.fragments_sent < len(fragments)
    assert not exchange.all_sent.is_set()


def test_a_complete_read_is_not_an_early_close(emu: ProviderEmulator) -> None:
    emu.add("GET", "/s", ScriptedResponse.streaming(SSE_BODY, delay=0.02))
    with httpx.Client() as client:
        assert client.get(emu.url("/s")).content == SSE_BODY
    exchange = emu.exchanges[0]
    assert exchange.wait_done(2.0)
    assert exchange.all_sent.is_set()
    assert exchange.fragments_sent == 3
    assert not exchange.client_closed.is_set()
