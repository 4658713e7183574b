"""The streaming HTTP transport shared by every adapter.

An adapter builds a :class:`StreamRequest`, picks a sans-I/O decoder (SSE or
NDJSON) and iterates :func:`stream_events`; it never touches httpx errors,
status codes or retries itself::

    request = StreamRequest(route="anthropic", url=f"{base}/v1/messages",
                            headers={"x-api-key": key}, json=body)
    async with contextlib.aclosing(stream_events(client, request, SSEDecoder())) as events:
        async for event in events:
            ...translate the event into StreamChunks...

Theory of operation
-------------------
1. **Open** (``_open``): send the request with ``stream=True``. A connect error,
   a 429 or a transient 5xx/529 is retried up to ``RetryPolicy.max_retries``
   times, sleeping with exponential backoff and full jitter, or for the
   provider's ``Retry-After`` when it gave one. Anything else non-2xx is read,
   parsed and raised at once as the matching :class:`ProviderError` subclass.
   Retrying stops here: once the body of a 2xx response is being read, nothing
   is ever retried, because events may already have reached the caller and a
   second generation would not be the same one.
2. **Stream** (``_events``): every piece read from the socket is fed to the
   decoder as soon as it arrives and the decoded events are yielded one by
   one. A read timeout becomes :class:`StreamTimeoutError`; a reset, a
   truncated chunked body or any other transport failure becomes
   :class:`StreamInterruptedError` - in both cases after the events already
   yielded. At the end of the body the decoder is flushed.
3. **Close**: the response (and the client, when the transport created it) is
   closed in ``finally`` blocks, so a consumer that stops iterating and closes
   the generator also closes the connection.

Whether the body ended *before* the provider's terminal event is not known
here; the adapter knows its provider's terminal event and raises
:class:`StreamInterruptedError` itself.

What an error status means is decided in ``_provider_errors``, which the
adapters also use for error events inside a 200 stream.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import math
import random
import ssl
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

import httpx

from ..errors import (
    ConfigError,
    MalformedStreamError,
    ProviderError,
    StreamInterruptedError,
    StreamTimeoutError,
)
from ..protocol.fields import is_number, shown
from .credentials import is_credential_parameter
from .provider_errors import (
    error_from_response,
    retry_after_from_headers,
)

__all__ = [
    "DEFAULT_RETRY",
    "RETRY_PAUSES_WAIT",
    "Decoder",
    "RetryPolicy",
    "StreamRequest",
    "check_seconds",
    "stream_events",
]

EventT = TypeVar("EventT")
_EventT_co = TypeVar("_EventT_co", covariant=True)

# Quota exhaustion arrives as a 429 but waiting will not refill it.
_NOT_RETRYABLE_CODES = frozenset({"insufficient_quota"})

# A retry pause rides out a blip or a rate-limit window. A policy that may sleep
# longer than a day inside one call is a hang, not a backoff (and 8e6 typed for
# 8.0 should fail when it is written, not when the first 503 arrives).
_MAX_RETRY_DELAY = 24 * 3600.0

#: Whether a retry pause really waits, in this task and those it starts. A replay
#: that does not pace (a cassette in replay with speed 0) turns it off: the 429 it
#: answers is a recording, and waiting out its Retry-After would only slow the suite.
RETRY_PAUSES_WAIT: contextvars.ContextVar[bool] = contextvars.ContextVar("dsh_replay_retry_pauses_wait", default=True)

# 2.0**1024 overflows a float (OverflowError on retry 1024 of a long policy). Past
# 2**1000 the backoff ceiling is max_delay for any base_delay, so stop growing there.
_MAX_BACKOFF_EXPONENT = 1000

def check_seconds(
    owner: str, name: str, value: object, *, allow_zero: bool, at_most: float = math.inf
) -> None:
    """Raise :class:`ConfigError` unless *value* is a finite number of seconds in range.

    Checked where the value is given: NaN or infinity reach ``min()`` and
    ``sleep()`` unnoticed and hang the first retry or read instead of failing.
    """
    # the range test also refuses NaN, infinities and ints too large for a float
    if not is_number(value, 0, min(at_most, sys.float_info.max)) or (value == 0 and not allow_zero):
        bounds = ">= 0" if allow_zero else "> 0"
        bounds += f" and <= {at_most:g}" if at_most < math.inf else ""
        raise ConfigError(f"{owner}: {name} must be a finite number of seconds {bounds}, got {shown(value)}")


class Decoder(Protocol[_EventT_co]):
    """A sans-I/O body decoder: ``SSEDecoder``, ``NDJSONDecoder`` or any look-alike."""

    def feed(self, data: bytes) -> Iterable[_EventT_co]: ...

    def flush(self) -> Iterable[_EventT_co]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long to wait before re-sending a failed request.

    Only failures before the first body byte are retried: connect errors, 429,
    and 5xx/529 except 501 and 505 (which will not change on a second try).
    Once a byte of the body has arrived, nothing is re-sent: the caller has
    chunks already.

    Example::

        CohereAdapter(key, retry=RetryPolicy(max_retries=0))             # fail at once
        CohereAdapter(key, retry=RetryPolicy(max_retries=5, max_delay=30))
        RetryPolicy().delay(0, retry_after=2.0)   # -> 2.0: the provider's Retry-After wins
    """

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0

    def __post_init__(self) -> None:
        # ``attempt >= nan`` is never true and inf is never reached: both retry forever.
        count = self.max_retries
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError(f"RetryPolicy: max_retries must be an int >= 0, got {shown(count)}")
        for name in ("base_delay", "max_delay"):
            value = getattr(self, name)
            check_seconds("RetryPolicy", name, value, allow_zero=True, at_most=_MAX_RETRY_DELAY)

    def delay(
        self, attempt: int, retry_after: float | None = None, *, jitter: float | None = None
    ) -> float | None:
        """Seconds to sleep before retry number *attempt* (0-based), or ``None`` to give up.

        The provider's ``Retry-After`` wins when given. If it asks for longer
        than ``max_delay`` we give up rather than retry early into another 429:
        the raised :class:`RateLimitError` carries ``retry_after`` for the caller.
        Otherwise "full jitter": a uniform draw in ``[0, min(max_delay,
        base_delay * 2**attempt)]``, which spreads out clients that failed together.
        """
        if attempt >= self.max_retries:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_delay else None
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** min(attempt, _MAX_BACKOFF_EXPONENT))
        return ceiling * (random.random() if jitter is None else jitter)


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamRequest:
    """What to send: the result of an adapter's request mapping (``build_request``).

    Credentials belong in ``headers``; a URL carrying one (``?key=``,
    ``user:pass@``) is refused. ``json`` is sent as the body.

    Example::

        StreamRequest(
            route="cohere",
            url=f"{self.base_url}/v2/chat",
            headers=self.request_headers({"Authorization": f"bearer {self.api_key}"}),
            json={"model": options.model, "messages": [...], "stream": True},
        )
    """

    route: str
    url: str
    headers: Mapping[str, str]
    json: object | None = None
    method: str = "POST"


def _retryable(error: ProviderError) -> bool:
    if error.provider_code and error.provider_code.lower() in _NOT_RETRYABLE_CODES:
        return False
    status = error.status
    return status is not None and (status == 429 or (status >= 500 and status not in (501, 505)))


def _refuse_credentials_in_url(request: StreamRequest) -> httpx.URL:
    return _checked_url(request.route, request.url)


# An adapter sends to a handful of URLs, thousands of times in a replayed suite:
# parsing each once is enough (httpx.URL is immutable, so sharing it is safe).
@functools.lru_cache(maxsize=256)
def _checked_url(route: str, address: str) -> httpx.URL:
    url = httpx.URL(address)
    # A credential in the URL is kept by proxies and access logs. Gemini accepts
    # ``?key=`` but takes the header just as well.
    leaked = sorted(name for name in url.params if is_credential_parameter(name))
    if leaked or url.password:
        where = f"query parameter(s) {', '.join(leaked)}" if leaked else "user:password"
        raise ConfigError(
            f"route {route!r}: the request URL carries a credential in its {where}; "
            "send credentials in a header (e.g. Authorization, x-api-key, x-goog-api-key)"
        )
    return url


async def _open(
    client: httpx.AsyncClient,
    request: StreamRequest,
    url: httpx.URL,
    retry: RetryPolicy,
    timeout: httpx.Timeout,
    sleep: Callable[[float], Awaitable[object]],
) -> httpx.Response:
    """Send *request* until a 2xx response arrives (returned unread) or give up."""
    for attempt in itertools.count():
        outcome = await _send_once(client, request, url, timeout)
        if isinstance(outcome, httpx.Response):
            return outcome
        error, retry_after = outcome
        pause = retry.delay(attempt, retry_after)
        if pause is None:
            raise error
        await sleep(pause)
    raise AssertionError("unreachable")  # pragma: no cover - itertools.count() is endless


async def _send_once(
    client: httpx.AsyncClient, request: StreamRequest, url: httpx.URL, timeout: httpx.Timeout
) -> httpx.Response | tuple[ProviderError, float | None]:
    """One attempt: a 2xx response (unread), a retryable error with its Retry-After, or raise."""
    built = client.build_request(
        request.method, url, headers=dict(request.headers), json=request.json, timeout=timeout
    )
    try:
        response = await client.send(built, stream=True)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        # Nothing reached the provider, so sending again is always safe.
        origin = f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
        error = ProviderError(
            f"could not connect to {origin}: {_describe(exc)}; check base_url",
            route=request.route,
        )
        error.__cause__ = exc
        return error, None
    except httpx.TimeoutException as exc:
        raise StreamTimeoutError(
            f"no response within {timeout.read}s", route=request.route
        ) from exc
    except httpx.TransportError as exc:
        raise StreamInterruptedError(
            f"the connection failed before the response: {_describe(exc)}",
            route=request.route,
        ) from exc
    if response.is_success:
        return response
    error = await _read_error(response, request.route)
    if not _retryable(error):
        raise error
    # the header wins; Gemini puts its advice in the body (RetryInfo.retryDelay)
    retry_after = retry_after_from_headers(response.headers)
    return error, retry_after if retry_after is not None else getattr(error, "retry_after", None)


async def _read_error(response: httpx.Response, route: str) -> ProviderError:
    try:
        body = await response.aread()
    except httpx.HTTPError:
        body = b""  # the status alone still says what happened
    finally:
        await response.aclose()
    return error_from_response(
        response.status_code, response.headers, body, route=route, reason=response.reason_phrase
    )


async def _events(
    response: httpx.Response, decoder: Decoder[EventT], route: str, read_timeout: float
) -> AsyncGenerator[EventT, None]:
    """Decode the body piece by piece; map transport failures to stream errors."""
    pieces = response.aiter_bytes()
    try:
        while True:
            # Only the read is guarded: an exception the consumer throws in at
            # ``yield`` must pass through untouched.
            try:
                data = await anext(pieces)
            except StopAsyncIteration:
                break
            except httpx.TimeoutException as exc:
                raise StreamTimeoutError(
                    f"the stream sent nothing for {read_timeout}s", route=route
                ) from exc
            except httpx.TransportError as exc:
                raise StreamInterruptedError(
                    f"the connection dropped mid-stream: {_describe(exc)}", route=route
                ) from exc
            except httpx.DecodingError as exc:  # a corrupt gzip/deflate body
                raise MalformedStreamError(
                    f"the body could not be decompressed: {_describe(exc)}", route=route
                ) from exc
            for event in _decode(decoder, data, route):
                yield event
    finally:
        # httpx hands out an async generator; close it now rather than at GC time.
        aclose = getattr(pieces, "aclose", None)
        if aclose is not None:
            await aclose()
    for event in _decode(decoder, None, route):
        yield event


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _decode(decoder: Decoder[EventT], data: bytes | None, route: str) -> list[EventT]:
    """Feed *data* to the decoder (``None``: flush it), naming the route in its errors."""
    try:
        return list(decoder.flush() if data is None else decoder.feed(data))
    except ProviderError as exc:  # MalformedStreamError from a decoder: say which route
        if exc.route is None:
            exc.route = route
        raise


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default verifying TLS context, built once.

    Building it loads the CA bundle (~50 ms); an adapter without its own client
    creates one client per stream, and a replay suite runs thousands of streams.
    """
    return httpx.create_ssl_context()


async def _sleep(seconds: float) -> None:
    """Sleep in whichever async library runs the adapter: anyio asks sniffio which.

    ``asyncio.sleep`` would fail under trio ("no running event loop"). A pause
    of zero (a ``Retry-After: 0``, a replay that does not wait) needs neither.
    """
    if seconds <= 0 or not RETRY_PAUSES_WAIT.get():
        return
    import anyio  # imported on the first retry only (~20 ms at start-up)

    await anyio.sleep(seconds)


async def stream_events(
    client: httpx.AsyncClient | None,
    request: StreamRequest,
    decoder: Decoder[EventT],
    *,
    retry: RetryPolicy = DEFAULT_RETRY,
    read_timeout: float = 60.0,
    connect_timeout: float = 10.0,
    sleep: Callable[[float], Awaitable[object]] = _sleep,
) -> AsyncGenerator[EventT, None]:
    """Send *request* and yield the decoded events of its streamed body as they arrive.

    *client* is used as is (its own timeouts are overridden by *read_timeout*
    and *connect_timeout* for this request); with ``None`` a client is created
    for the call and closed at the end. *sleep* is awaited between retries;
    tests pass a fake to avoid waiting.

    Raises the :class:`ProviderError` subclass for an error status (after the
    allowed retries), :class:`StreamTimeoutError` when no byte arrives for
    *read_timeout* seconds, :class:`StreamInterruptedError` when the connection
    drops mid-stream, and whatever the decoder raises (route filled in).
    :class:`ConfigError` if the URL carries a credential.
    """
    url = _refuse_credentials_in_url(request)
    timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
    owned = client is None
    active = httpx.AsyncClient(verify=_tls_context()) if client is None else client
    try:
        response = await _open(active, request, url, retry, timeout, sleep)
        try:
            # aclosing: when the consumer stops early, the inner generator is closed
            # now, not whenever the garbage collector gets to it.
            async with contextlib.aclosing(
                _events(response, decoder, request.route, read_timeout)
            ) as events:
                async for event in events:
                    yield event
        finally:
            await response.aclose()
    finally:
        if owned:
            await active.aclose()
