"""Tests of dsh_replay.wire.transport against a real loopback server (and respx where enough)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import datetime, timezone
from email.utils import formatdate
from typing import Any

import httpx
import pytest
import respx
import trio

from dsh_replay.errors import (
    AuthenticationError,
    ConfigError,
    InvalidRequestError,
    MalformedStreamError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
    StreamTimeoutError,
)
from dsh_replay.testing import End, ProviderEmulator, ScriptedResponse
from dsh_replay.wire.provider_errors import (
    error_from_payload,
    error_from_response,
    parse_retry_after,
)
from dsh_replay.wire.transport import RetryPolicy, StreamRequest, stream_events

PATH = "/v1/chat/completions"
NO_RETRY = RetryPolicy(max_retries=0)


class LineDecoder:
    """A minimal decoder: one event per line; ``bad`` lines are malformed."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[str]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [self._event(line) for line in lines if line]

    def flush(self) -> list[str]:
        rest, self._buffer = self._buffer, b""
        return [self._event(rest)] if rest else []

    @staticmethod
    def _event(line: bytes) -> str:
        if line == b"bad":
            raise MalformedStreamError("not an event", raw=line)
        return line.decode()


class Sleeps:
    """An injectable sleep that records how long the transport wanted to wait."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _request(
    emu: ProviderEmulator, path: str = PATH, headers: Mapping[str, str] | None = None
) -> StreamRequest:
    return StreamRequest(
        route="openai",
        url=emu.url(path),
        headers=headers or {"authorization": "Bearer sk-test"},
        json={"model": "m", "stream": True},
    )


async def _drain(events: AsyncIterator[str]) -> tuple[list[str], BaseException | None]:
    """Collect events until the stream ends or raises; return both."""
    seen: list[str] = []
    try:
        async for event in events:
            seen.append(event)
    except Exception as exc:
        return seen, exc
    return seen, None


def _lines(*events: str) -> ScriptedResponse:
    body = "".join(f"{event}\n" for event in events).encode()
    return ScriptedResponse.streaming(body, content_type="text/plain")


# -- the happy path ------------------------------------------------------------


@pytest.mark.asyncio
async def test_events_are_yielded_as_fragments_arrive(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=[b"a\n", b"b\n", b"c\n"], delay=0.15))
    seen: list[str] = []
    async for event in stream_events(None, _request(emu), LineDecoder()):
        if not seen:
            assert not emu.exchanges[0].all_sent.is_set(), "the body was buffered"
        seen.append(event)
    assert seen == ["a", "b", "c"]
    request = emu.requests[0]
    assert request.method == "POST"
    assert request.json() == {"model": "m", "stream": True}


@pytest.mark.asyncio
async def test_decoder_is_flushed_at_the_end_of_the_body(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=[b"a\nb"]))
    events, error = await _drain(stream_events(None, _request(emu), LineDecoder()))
    assert (events, error) == (["a", "b"], None)


@pytest.mark.asyncio
async def test_hostile_fragmentation_gives_the_same_sse_events(emu: ProviderEmulator) -> None:
    from dsh_replay.wire.sse import SSEDecoder

    body = "".join(f'event: delta\r\ndata: {{"text": "ü✓ {i}"}}\r\n\r\n' for i in range(6)).encode()
    emu.add("POST", "/whole", ScriptedResponse(fragments=[body]))
    emu.add("POST", "/cut", ScriptedResponse.fragmented(body, seed=11, max_size=5))
    whole = [e async for e in stream_events(None, _request(emu, "/whole"), SSEDecoder())]
    cut = [e async for e in stream_events(None, _request(emu, "/cut"), SSEDecoder())]
    assert len(whole) == 6
    assert whole[5].event == "delta"
    assert whole[5].data == '{"text": "ü✓ 5"}'
    assert cut == whole


@pytest.mark.asyncio
async def test_credentials_travel_in_headers_only(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, _lines("ok"))
    request = _request(emu, headers={"x-api-key": "sk-ant-secret"})
    assert [e async for e in stream_events(None, request, LineDecoder())] == ["ok"]
    recorded = emu.requests[0]
    assert recorded.headers["x-api-key"] == "sk-ant-secret"
    assert recorded.query == {}
    assert "secret" not in recorded.path


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "url",
    [
        "{base}/v1beta/models/m:streamGenerateContent?alt=sse&key=AIza123",
        "http://user:AIza123@127.0.0.1:9/v1",
    ],
)
async def test_a_credential_in_the_url_is_refused(emu: ProviderEmulator, url: str) -> None:
    full = url.format(base=emu.base_url)
    request = StreamRequest(route="gemini", url=full, headers={})
    with pytest.raises(ConfigError, match="header") as caught:
        await anext(stream_events(None, request, LineDecoder()))
    assert "gemini" in str(caught.value)
    assert "AIza123" not in str(caught.value)
    assert emu.requests == []


@pytest.mark.asyncio
async def test_malformed_event_names_the_route(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, _lines("a", "bad", "c"))
    events, error = await _drain(stream_events(None, _request(emu), LineDecoder()))
    assert events == ["a"]
    assert isinstance(error, MalformedStreamError)
    assert error.route == "openai"
    assert error.raw == b"bad"


# -- HTTP errors before the stream ----------------------------------------------

STATUS_CASES = [
    pytest.param(
        400,
        {"x-request-id": "req_400"},
        {
            "error": {
                "message": "Invalid value for 'temperature'",
                "type": "invalid_request_error",
                "param": "temperature",
                "code": None,
            }
        },
        InvalidRequestError,
        "Invalid value for 'temperature'",
        "invalid_request_error",
        "req_400",
        id="400-openai",
    ),
    pytest.param(
        404,
        {},
        {"error": 'model "llama9" not found, try pulling it first'},
        InvalidRequestError,
        'model "llama9" not found',
        None,
        None,
        id="404-ollama",
    ),
    pytest.param(
        422,
        {"x-request-id": "req_422"},
        b"Unprocessable Entity: messages[0].role",
        InvalidRequestError,
        "messages[0].role",
        None,
        "req_422",
        id="422-text",
    ),
    pytest.param(
        401,
        {"x-request-id": "req_401"},
        {
            "error": {
                "message": "Incorrect API key provided: sk-xx***",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
        AuthenticationError,
        "Incorrect API key provided",
        "invalid_api_key",
        "req_401",
        id="401-openai",
    ),
    pytest.param(
        403,
        {"request-id": "req_011CT"},
        {
            "type": "error",
            "error": {"type": "permission_error", "message": "Your key may not use this model"},
        },
        AuthenticationError,
        "Your key may not use this model",
        "permission_error",
        "req_011CT",
        id="403-anthropic",
    ),
    pytest.param(
        429,
        {"x-goog-request-id": "goog-429"},
        [
            {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "status": "RESOURCE_EXHAUSTED",
                }
            }
        ],
        RateLimitError,
        "Resource has been exhausted",
        "RESOURCE_EXHAUSTED",
        "goog-429",
        id="429-gemini-list",
    ),
    pytest.param(
        500,
        {"request-id": "req_500"},
        {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
        ServerError,
        "Internal server error",
        "api_error",
        "req_500",
        id="500-anthropic",
    ),
    pytest.param(
        502,
        {},
        b"<html><body><h1>502 Bad Gateway</h1></body></html>",
        ServerError,
        "502 Bad Gateway",
        None,
        None,
        id="502-html",
    ),
    pytest.param(
        503,
        {"x-request-id": "req_503"},
        {"error": {"code": 503, "message": "The service is unavailable.", "status": "UNAVAILABLE"}},
        ServerError,
        "The service is unavailable.",
        "UNAVAILABLE",
        "req_503",
        id="503-gemini",
    ),
    pytest.param(
        503,
        {},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        OverloadedError,
        "Overloaded",
        "overloaded_error",
        None,
        id="503-overloaded-code",
    ),
    pytest.param(
        529,
        {"request-id": "req_529"},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        OverloadedError,
        "Overloaded",
        "overloaded_error",
        "req_529",
        id="529-anthropic",
    ),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "headers", "body", "expected", "message", "code", "request_id"), STATUS_CASES
)
async def test_error_status_raises_its_type(
    emu: ProviderEmulator,
    status: int,
    headers: dict[str, str],
    body: object,
    expected: type[ProviderError],
    message: str,
    code: str | None,
    request_id: str | None,
) -> None:
    if isinstance(body, bytes):
        response = ScriptedResponse(
            status=status,
            headers={"content-type": "text/html", **headers},
            fragments=[body],
            chunked=False,
        )
    else:
        response = ScriptedResponse.json(body, status=status, headers=headers)
    emu.add("POST", PATH, response)
    events, error = await _drain(stream_events(None, _request(emu), LineDecoder(), retry=NO_RETRY))
    assert events == []
    assert type(error) is expected
    assert isinstance(error, ProviderError)
    assert message in error.message
    assert message in str(error)
    assert (error.route, error.status) == ("openai", status)
    assert error.provider_code == code
    assert error.request_id == request_id
    assert len(emu.requests) == 1


# -- retries ---------------------------------------------------------------------

BUSY = ScriptedResponse.json({"error": {"message": "busy", "type": "server_error"}}, status=503)


@pytest.mark.asyncio
async def test_two_503_then_200_succeeds_after_two_backoffs(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, BUSY, BUSY, _lines("a", "b"))
    sleeps = Sleeps()
    retry = RetryPolicy(max_retries=2, base_delay=0.5, max_delay=8.0)
    events = [
        e
        async for e in stream_events(None, _request(emu), LineDecoder(), retry=retry, sleep=sleeps)
    ]
    assert events == ["a", "b"]
    assert len(emu.requests) == 3
    assert len(sleeps.calls) == 2
    # Full jitter: somewhere in [0, base * 2**attempt].
    assert 0 <= sleeps.calls[0] <= 0.5
    assert 0 <= sleeps.calls[1] <= 1.0


@pytest.mark.parametrize("library", ["asyncio", "trio"])
def test_the_default_retry_sleep_runs_in_the_callers_async_library(emu: ProviderEmulator, library: str) -> None:
    emu.add("POST", PATH, BUSY, _lines("a", "b"))
    retry = RetryPolicy(max_retries=1, base_delay=0.01, max_delay=0.01)

    async def main() -> list[str]:
        return [e async for e in stream_events(None, _request(emu), LineDecoder(), retry=retry)]

    events = trio.run(main) if library == "trio" else asyncio.run(main())
    assert events == ["a", "b"]
    assert len(emu.requests) == 2  # it slept once (asyncio.sleep fails under trio) and retried


@pytest.mark.asyncio
async def test_retries_are_bounded(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, BUSY)  # repeats for every request
    sleeps = Sleeps()
    events, error = await _drain(stream_events(None, _request(emu), LineDecoder(), sleep=sleeps))
    assert events == []
    assert type(error) is ServerError
    assert error.message == "busy"
    assert len(emu.requests) == 3  # 1 + max_retries=2
    assert len(sleeps.calls) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("headers", "low", "high"),
    [
        ({"retry-after": "3"}, 3.0, 3.0),
        ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5, 1.5),
        ({"retry-after": "HTTP-DATE in 4s"}, 2.5, 4.0),  # whole seconds: 3 < wait <= 4
    ],
    ids=["seconds", "milliseconds", "http-date"],
)
async def test_429_sleeps_for_retry_after(
    emu: ProviderEmulator, headers: dict[str, str], low: float, high: float
) -> None:
    if headers["retry-after"].startswith("HTTP-DATE"):
        headers = {"retry-after": formatdate(time.time() + 4, usegmt=True)}
    limited = ScriptedResponse.json(
        {"error": {"message": "slow down", "type": "rate_limit_error"}}, status=429, headers=headers
    )
    emu.add("POST", PATH, limited, _lines("ok"))
    sleeps = Sleeps()
    events = [e async for e in stream_events(None, _request(emu), LineDecoder(), sleep=sleeps)]
    assert events == ["ok"]
    assert len(sleeps.calls) == 1
    assert low <= sleeps.calls[0] <= high
    assert len(emu.requests) == 2


@pytest.mark.asyncio
async def test_retry_after_is_honoured_on_503_too(emu: ProviderEmulator) -> None:
    busy = ScriptedResponse.json({"error": "busy"}, status=503, headers={"retry-after": "2"})
    emu.add("POST", PATH, busy, _lines("ok"))
    sleeps = Sleeps()
    assert [e async for e in stream_events(None, _request(emu), LineDecoder(), sleep=sleeps)] == [
        "ok"
    ]
    assert sleeps.calls == [2.0]


@pytest.mark.asyncio
async def test_gemini_retry_delay_in_the_body_is_slept(emu: ProviderEmulator) -> None:
    # no Retry-After header: Google says how long to wait in RetryInfo.retryDelay
    limited = ScriptedResponse.json(
        {
            "error": {
                "code": 429,
                "message": "Resource has been exhausted",
                "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}],
            }
        },
        status=429,
    )
    emu.add("POST", PATH, limited, _lines("ok"))
    sleeps = Sleeps()
    assert [e async for e in stream_events(None, _request(emu), LineDecoder(), sleep=sleeps)] == ["ok"]
    assert sleeps.calls == [3.0]


@pytest.mark.asyncio
async def test_retry_after_beyond_max_delay_gives_up_at_once(emu: ProviderEmulator) -> None:
    limited = ScriptedResponse.json(
        {"error": {"message": "come back later"}}, status=429, headers={"retry-after": "30"}
    )
    emu.add("POST", PATH, limited, _lines("never"))
    sleeps = Sleeps()
    _, error = await _drain(stream_events(None, _request(emu), LineDecoder(), sleep=sleeps))
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 30.0
    assert sleeps.calls == []
    assert len(emu.requests) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "response",
    [
        ScriptedResponse.json(
            {"error": {"message": "bad key", "code": "invalid_api_key"}}, status=401
        ),
        ScriptedResponse.json(
            {
                "error": {
                    "message": "no credit",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            },
            status=429,
        ),
        ScriptedResponse.json({"error": "nope"}, status=501),
    ],
    ids=["401", "429-insufficient-quota", "501"],
)
async def test_hopeless_errors_are_never_retried(
    emu: ProviderEmulator, response: ScriptedResponse
) -> None:
    emu.add("POST", PATH, response, _lines("never"))
    sleeps = Sleeps()
    retry = RetryPolicy(max_retries=5)
    events, error = await _drain(
        stream_events(None, _request(emu), LineDecoder(), retry=retry, sleep=sleeps)
    )
    assert events == []
    assert isinstance(error, ProviderError)
    assert error.status == response.status
    assert sleeps.calls == []
    assert len(emu.requests) == 1


@pytest.mark.asyncio
async def test_unscripted_route_error_is_readable(emu: ProviderEmulator) -> None:
    _, error = await _drain(stream_events(None, _request(emu), LineDecoder()))
    assert type(error) is ServerError
    assert f"no scripted response for POST {PATH}" in str(error)
    assert len(emu.requests) == 1  # 501 is not retried


@pytest.mark.asyncio
async def test_connect_errors_are_retried() -> None:
    url = "https://api.example.test/v1/chat/completions"
    request = StreamRequest(route="openai", url=url, headers={"authorization": "Bearer k"})
    sleeps = Sleeps()
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(
            side_effect=[
                httpx.ConnectError("refused"),
                httpx.ConnectTimeout("slow"),
                httpx.Response(200, content=b"a\nb\n"),
            ]
        )
        async with httpx.AsyncClient() as client:
            events = [e async for e in stream_events(client, request, LineDecoder(), sleep=sleeps)]
    assert events == ["a", "b"]
    assert route.call_count == 3
    assert len(sleeps.calls) == 2


@pytest.mark.asyncio
async def test_connect_failure_after_retries_names_the_host() -> None:
    with socket.socket() as sock:  # a port that was just free: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    request = StreamRequest(route="ollama", url=f"http://127.0.0.1:{port}/api/chat", headers={})
    sleeps = Sleeps()
    _, error = await _drain(stream_events(None, request, LineDecoder(), sleep=sleeps))
    assert type(error) is ProviderError
    assert f"could not connect to http://127.0.0.1:{port}" in str(error)
    assert isinstance(error.__cause__, httpx.ConnectError)
    assert len(sleeps.calls) == 2


# -- failures while streaming -----------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("end", ["reset", "truncate"])
async def test_drop_mid_stream_interrupts_after_the_events(emu: ProviderEmulator, end: End) -> None:
    fragments = [b"a\n", b"b\n", b"partial-ev"]
    emu.add("POST", PATH, ScriptedResponse(fragments=fragments, delay=0.05, end=end))
    sleeps = Sleeps()
    events, error = await _drain(stream_events(None, _request(emu), LineDecoder(), sleep=sleeps))
    assert events == ["a", "b"]
    assert isinstance(error, StreamInterruptedError)
    assert error.route == "openai"
    assert "dropped mid-stream" in str(error)
    assert len(emu.requests) == 1
    assert sleeps.calls == []


@pytest.mark.asyncio
async def test_stalled_stream_times_out(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, ScriptedResponse(fragments=[b"a\n"], end="stall"))
    started = time.monotonic()
    # The client's own generous timeout is overridden by read_timeout.
    async with httpx.AsyncClient(timeout=30.0) as client:
        events, error = await _drain(
            stream_events(client, _request(emu), LineDecoder(), read_timeout=0.3)
        )
    elapsed = time.monotonic() - started
    assert events == ["a"]
    assert isinstance(error, StreamTimeoutError)
    assert "0.3s" in str(error)
    # read_timeout won over the client's 30 s; the upper bound is a hang guard below those 30 s
    assert 0.3 <= elapsed < 10.0
    assert len(emu.requests) == 1
    assert await asyncio.to_thread(emu.exchanges[0].wait_client_closed, 2.0)


@pytest.mark.asyncio
async def test_corrupt_compressed_body_is_malformed(emu: ProviderEmulator) -> None:
    emu.add(
        "POST", PATH, ScriptedResponse(headers={"content-encoding": "gzip"}, fragments=[b"nope"])
    )
    events, error = await _drain(stream_events(None, _request(emu), LineDecoder()))
    assert events == []
    assert isinstance(error, MalformedStreamError)
    assert error.route == "openai"
    assert "decompressed" in str(error)


# -- early exit ------------------------------------------------------------------


def _slow_stream() -> ScriptedResponse:
    return ScriptedResponse(fragments=[b"%d\n" % i for i in range(40)], delay=0.05)


@pytest.mark.asyncio
async def test_closing_the_stream_early_closes_the_connection(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, _slow_stream())
    async with contextlib.aclosing(stream_events(None, _request(emu), LineDecoder())) as events:
        async for event in events:
            assert event == "0"
            break
    exchange = emu.exchanges[0]
    # Waiting without yielding to the event loop on purpose: the socket must be
    # closed by aclose() itself, not later by a finalizer task on the loop.
    assert exchange.wait_client_closed(1.0)
    assert exchange.fragments_sent < 40


@pytest.mark.asyncio
async def test_breaking_a_plain_loop_closes_the_connection(emu: ProviderEmulator) -> None:
    emu.add("POST", PATH, _slow_stream())
    async for event in stream_events(None, _request(emu), LineDecoder()):
        assert event == "0"
        break
    # The abandoned generator is closed by the event loop's finalizer hook.
    assert await asyncio.to_thread(emu.exchanges[0].wait_client_closed, 2.0)


@pytest.mark.asyncio
async def test_client_ownership(emu: ProviderEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    emu.add("POST", PATH, _slow_stream())
    created: list[httpx.AsyncClient] = []

    class RecordingClient(httpx.AsyncClient):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            created.append(self)

    monkeypatch.setattr(httpx, "AsyncClient", RecordingClient)
    async with contextlib.aclosing(stream_events(None, _request(emu), LineDecoder())) as events:
        await anext(events)
    assert len(created) == 1
    assert created[0].is_closed  # the transport's own client is closed with the stream

    monkeypatch.undo()
    async with httpx.AsyncClient() as mine:
        async with contextlib.aclosing(stream_events(mine, _request(emu), LineDecoder())) as events:
            await anext(events)
        assert emu.exchanges[1].wait_client_closed(1.0)  # blocking on purpose, as above
        assert not mine.is_closed  # the caller's client is left alone


# -- error payloads inside a 200 stream -----------------------------------------

PAYLOAD_CASES = [
    pytest.param(
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
            "request_id": "req_011",
        },
        OverloadedError,
        "Overloaded",
        "overloaded_error",
        "req_011",
        id="anthropic-overloaded",
    ),
    pytest.param(
        {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
        ServerError,
        "Internal server error",
        "api_error",
        None,
        id="anthropic-api-error",
    ),
    pytest.param(
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        },
        AuthenticationError,
        "invalid x-api-key",
        "authentication_error",
        None,
        id="anthropic-auth",
    ),
    pytest.param(
        {
            "error": {
                "message": "Rate limit reached for gpt-4o",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        RateLimitError,
        "Rate limit reached",
        "rate_limit_exceeded",
        None,
        id="openai-rate-limit",
    ),
    pytest.param(
        {"error": {"message": "The server had an error", "type": "server_error", "code": None}},
        ServerError,
        "The server had an error",
        "server_error",
        None,
        id="openai-server-error",
    ),
    pytest.param(
        {
            "type": "error",
            "code": "rate_limit_exceeded",
            "message": "Too fast",
            "sequence_number": 4,
        },
        RateLimitError,
        "Too fast",
        "rate_limit_exceeded",
        None,
        id="openai-responses-flat",
    ),
    pytest.param(
        {
            "error": {
                "message": "Tool call validation failed",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "status_code": 400,
            }
        },
        InvalidRequestError,
        "Tool call validation failed",
        "tool_use_failed",
        None,
        id="groq-tool-use-failed",
    ),
    pytest.param(
        {"error": {"code": 400, "message": "Provider returned error"}},
        InvalidRequestError,
        "Provider returned error",
        None,
        None,
        id="openrouter-numeric-code",
    ),
    pytest.param(
        {"error": {"code": 400, "message": "Invalid JSON payload", "status": "INVALID_ARGUMENT"}},
        InvalidRequestError,
        "Invalid JSON payload",
        "INVALID_ARGUMENT",
        None,
        id="gemini-invalid-argument",
    ),
    pytest.param(
        {"error": {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}},
        AuthenticationError,
        "API key not valid",
        "UNAUTHENTICATED",
        None,
        id="gemini-unauthenticated",
    ),
    pytest.param(
        {"error": {"code": 403, "message": "Permission denied", "status": "PERMISSION_DENIED"}},
        AuthenticationError,
        "Permission denied",
        "PERMISSION_DENIED",
        None,
        id="gemini-permission-denied",
    ),
    pytest.param(
        {"error": {"code": 500, "message": "An internal error", "status": "INTERNAL"}},
        ServerError,
        "An internal error",
        "INTERNAL",
        None,
        id="gemini-internal",
    ),
    pytest.param(
        {"error": "an error was encountered while running the model"},
        ProviderError,
        "an error was encountered while running the model",
        None,
        None,
        id="ollama",
    ),
    pytest.param(
        {"error": {"type": "strange_error", "message": "hm"}},
        ProviderError,
        "hm",
        "strange_error",
        None,
        id="unknown-code",
    ),
    pytest.param("boom", ProviderError, "boom", None, None, id="plain-string"),
]


@pytest.mark.parametrize(("payload", "expected", "message", "code", "request_id"), PAYLOAD_CASES)
def test_error_from_payload_maps_each_provider_shape(
    payload: object,
    expected: type[ProviderError],
    message: str,
    code: str | None,
    request_id: str | None,
) -> None:
    error = error_from_payload(payload, route="r")
    assert type(error) is expected
    assert message in error.message
    assert error.provider_code == code
    assert error.request_id == request_id
    assert (error.route, error.status) == ("r", None)


def test_gemini_retry_delay_becomes_retry_after() -> None:
    payload = [
        {
            "error": {
                "code": 429,
                "message": "Quota exceeded",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}
                ],
            }
        }
    ]
    error = error_from_payload(payload, route="gemini")
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 3.0
    given = error_from_payload(payload, route="gemini", retry_after=7.0)
    assert isinstance(given, RateLimitError)
    assert given.retry_after == 7.0


def test_status_decides_and_code_refines() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert type(error_from_payload(overloaded, route="r", status=503)) is OverloadedError
    assert type(error_from_payload(overloaded, route="r", status=500)) is OverloadedError
    limited = {"error": {"message": "m", "code": "rate_limit_exceeded"}}
    assert type(error_from_payload(limited, route="r", status=400)) is InvalidRequestError
    error = error_from_payload(limited, route="r", status=418, request_id="id-1")
    assert type(error) is RateLimitError  # an unknown status: the code decides
    assert (error.status, error.request_id) == (418, "id-1")


def test_gemini_invalid_key_is_an_authentication_error() -> None:
    payload = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
            ],
        }
    }
    error = error_from_payload(payload, route="gemini", status=400)
    assert type(error) is AuthenticationError
    assert error.provider_code == "API_KEY_INVALID"
    assert "API key not valid" in str(error)


def test_empty_error_body_falls_back_to_the_status_line() -> None:
    error = error_from_response(
        503, httpx.Headers({"x-request-id": "r1"}), b"", route="r", reason="Service Unavailable"
    )
    assert type(error) is ServerError
    assert error.message == "HTTP 503 Service Unavailable"
    assert error.request_id == "r1"


def test_authentication_message_says_what_to_do() -> None:
    error = error_from_payload({"error": "bad key"}, route="r", status=401)
    assert str(error) == "bad key; check the API key given to the adapter (route=r, status=401)"


# -- small helpers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-4", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    now = datetime(2015, 10, 21, 7, 27, 50, tzinfo=timezone.utc)
    assert parse_retry_after(value, now) == expected


def test_retry_policy_backoff() -> None:
    policy = RetryPolicy(max_retries=3, base_delay=0.5, max_delay=1.5)
    assert policy.delay(0, jitter=1.0) == 0.5
    assert policy.delay(1, jitter=1.0) == 1.0
    assert policy.delay(2, jitter=1.0) == 1.5  # capped
    assert policy.delay(2, jitter=0.5) == 0.75
    assert policy.delay(3, jitter=1.0) is None  # out of retries
    assert policy.delay(0, retry_after=1.0) == 1.0
    assert policy.delay(0, retry_after=2.0) is None  # longer than max_delay: give up
    draws = {policy.delay(1) for _ in range(20)}
    assert all(d is not None and 0 <= d <= 1.0 for d in draws)
    assert len(draws) > 1  # jittered
    with pytest.raises(ConfigError):
        RetryPolicy(max_retries=-1)


# -- RetryPolicy arguments: refused when built, so nothing can hang later ------------------


@pytest.mark.parametrize("max_retries", [float("nan"), float("inf"), 1.5, 2.0, "2", None, True, -1])
def test_retry_policy_max_retries_must_be_an_int_of_at_least_zero(max_retries: object) -> None:
    with pytest.raises(ConfigError) as caught:
        RetryPolicy(max_retries=max_retries)  # type: ignore[arg-type]
    assert str(caught.value) == f"RetryPolicy: max_retries must be an int >= 0, got {max_retries!r}"


@pytest.mark.parametrize("name", ["base_delay", "max_delay"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -0.5, "1", None, True, 86400.5, 10**400])
def test_retry_policy_delays_must_be_finite_seconds_up_to_a_day(name: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        RetryPolicy(**{name: value})  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(f"RetryPolicy: {name} must be a finite number of seconds >= 0 and <= 86400")
    assert len(message) < 200  # a 400-digit int is shortened, not printed whole


def test_retry_policy_infinite_delays_are_refused_together() -> None:
    with pytest.raises(ConfigError, match="base_delay"):
        RetryPolicy(base_delay=float("inf"), max_delay=float("inf"))


@pytest.mark.parametrize(
    ("max_retries", "base_delay", "max_delay"), [(0, 0, 0), (10, 3, 86400), (1, 0.25, 8.0)]
)
def test_retry_policy_valid_values_are_kept(max_retries: int, base_delay: float, max_delay: float) -> None:
    policy = RetryPolicy(max_retries=max_retries, base_delay=base_delay, max_delay=max_delay)
    assert (policy.max_retries, policy.base_delay, policy.max_delay) == (max_retries, base_delay, max_delay)
    assert policy.delay(max_retries) is None


def test_retry_policy_replace_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="max_delay"):
        dataclasses.replace(RetryPolicy(), max_delay=float("nan"))


def test_retry_policy_backoff_does_not_overflow_after_many_retries() -> None:
    # 2.0**1024 raised OverflowError on retry 1024 of a long policy
    policy = RetryPolicy(max_retries=5000, base_delay=0.5, max_delay=8.0)
    assert policy.delay(1024, jitter=1.0) == 8.0
    assert policy.delay(4999, jitter=1.0) == 8.0
    assert RetryPolicy(max_retries=5000, base_delay=0, max_delay=0).delay(3000, jitter=1.0) == 0.0
