"""aiohttp through the cassette: ``ClientSession._request`` is the seam.

Every way of sending (``request``, ``get``, ``post``..., awaited or used with
``async with``) goes through ``ClientSession._request``; while a cassette is
active that method is patched. Per call the request is translated for the
session (method, URL with ``params``, headers merged with the session's,
body of ``data=`` or ``json=``), and the session's answer is turned back into
an aiohttp response:

- **recording** sends the request for real (the original ``_request``, with
  ``raise_for_status`` held back) and replaces the response's ``content`` by
  a reader that pulls every piece from the live one as the caller asks for
  it, noting each (size, arrival time) on the way;
- **replay** builds a real :class:`aiohttp.ClientResponse` whose ``content``
  is a real :class:`aiohttp.StreamReader` fed by the replay plan.

Both readers are :class:`_PieceReader`: a ``StreamReader`` waits in ``_wait``
whenever its buffer is empty, and ours fetches the next piece there, one per
wait. So every read API works as on a socket — ``read()``, ``text()``,
``json()``, ``content.read(n)``, ``readline()`` and ``async for line in
content`` (which end at the end of the body), ``iter_chunked``, ``iter_any``
and ``iter_chunks`` (which see the pieces as they were cut) — and a failure
surfaces as aiohttp's own exception: ``ClientPayloadError`` for a body cut
short, ``SocketTimeoutError`` for a stalled one. After the exchange the
session's ``raise_for_status`` (or the call's) applies, as aiohttp would.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
import zlib
from collections.abc import AsyncIterator, Callable, Mapping
from http import HTTPStatus
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp.helpers import TimerNoop
from aiohttp.payload import BytesPayload
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ..errors import CassetteError
from .clients_base import (
    Handler,
    HeaderItems,
    Live,
    Recorder,
    Route,
    abandoned_error,
    handing_over,
    pacing_for,
    planned_async,
    replay_headers,
    tapped_async,
)
from .pacing import Fault, Fragmentation, Stop
from .store import Interaction

__all__ = ["patch"]


def patch(lib: types.ModuleType, route: Route) -> Callable[[], None]:
    """Route ``lib.ClientSession``'s requests through ``route()``'s handler; returns the undo."""
    session_cls = lib.ClientSession
    original = session_cls._request

    # wraps: inspect.signature follows __wrapped__, and SDKs filter their keyword
    # arguments by _request's parameters (google-genai does)
    @functools.wraps(original)
    async def _request(self: aiohttp.ClientSession, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        handler = route()
        if handler is None:
            return await original(self, method, str_or_url, **kwargs)
        return await _Call(self, original, method, str_or_url, kwargs).answer(handler)

    session_cls._request = _request

    def restore() -> None:
        session_cls._request = original

    return restore


class _Call:
    """One ``_request`` call while a cassette is active: its request as the session sees it, and its response.

    It is the ``inner`` the session sends a request through for real
    (``handle_async_request``) and the ``lib`` that builds responses
    (``record``, ``replay``).
    """

    def __init__(
        self, session: aiohttp.ClientSession, original: Callable[..., Any], method: str, str_or_url: Any,
        kwargs: dict[str, Any],
    ) -> None:
        self.session, self.original, self.str_or_url, self.kwargs = session, original, str_or_url, kwargs
        self.method = method.upper()
        self.url = _url(session, str_or_url, kwargs.get("params"))
        self.headers = session._prepare_headers(kwargs.get("headers"))
        self.body = _body(session, kwargs, self.headers)
        self.replayed = False

    async def answer(self, handler: Handler) -> aiohttp.ClientResponse:
        import httpx

        request = httpx.Request(self.method, str(self.url), headers=list(self.headers.items()), content=self.body)
        with handing_over():
            result = handler.handle(request, self, self, True)
            if inspect.isawaitable(result):
                result = await result
        response: aiohttp.ClientResponse = result.response if isinstance(result, Live) else result
        await self._after(response)
        return response

    async def handle_async_request(self, request: Any) -> Live:
        """Send the call for real; its error status is raised after, as a replayed one's is."""
        response = await self.original(self.session, self.method, self.str_or_url,
                                       **{**self.kwargs, "raise_for_status": False})
        headers = HeaderItems((k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers)
        if self._decompresses() and "content-encoding" in response.headers:
            # aiohttp hands the body over decoded: what is recorded is what the header no longer describes
            headers = HeaderItems((k, v) for k, v in headers if k.lower() not in ("content-encoding", "content-length"))
        return Live(response, response.status, response.reason or "", headers)

    def record(self, live: Live, recorder: Recorder, is_async: bool) -> aiohttp.ClientResponse:
        response: aiohttp.ClientResponse = live.response
        source = response.content
        recorder.ended = source.at_eof
        response.content = _PieceReader(tapped_async(_live_pieces(source), recorder, _describe),
                                        asyncio.get_running_loop())
        return response

    def replay(
        self, request: Any, interaction: Interaction, *, fragmentation: Fragmentation, speed: float,
        fault: Fault | None, path: str, is_async: bool,
    ) -> aiohttp.ClientResponse:
        pacing, failure = pacing_for(interaction, fragmentation, speed, fault, self._read_timeout(),
                                     lambda stop: _stop_error(stop, path))
        self.replayed = True
        return self._response(interaction, planned_async(pacing, failure))

    def _decompresses(self) -> bool:
        auto = self.kwargs.get("auto_decompress")
        return bool(self.session.auto_decompress if auto is None else auto)

    def _read_timeout(self) -> float | None:
        """What ends a stalled read: the call's or the session's ``sock_read``, else its ``total``."""
        timeout = self.kwargs.get("timeout", self.session.timeout)
        if timeout is None or isinstance(timeout, (int, float)):
            return None if timeout is None else float(timeout)
        if not isinstance(timeout, aiohttp.ClientTimeout):  # aiohttp's "not given" sentinel
            timeout = self.session.timeout
        return timeout.sock_read if timeout.sock_read is not None else timeout.total

    def _response(self, interaction: Interaction, pieces: AsyncIterator[bytes]) -> aiohttp.ClientResponse:
        loop = asyncio.get_running_loop()
        info = aiohttp.RequestInfo(self.url, self.method, CIMultiDictProxy(self.headers), self.url)
        response_cls = getattr(self.session, "_response_class", aiohttp.ClientResponse)
        extra: dict[str, Any] = {"stream_writer": _SentRequest()} if "stream_writer" in _RESPONSE_PARAMETERS else {}
        response: aiohttp.ClientResponse = response_cls(
            self.method, self.url, writer=None, continue100=None, timer=TimerNoop(), request_info=info,
            traces=[], loop=loop, session=self.session, **extra,
        )
        headers = replay_headers(interaction)
        response.version = aiohttp.HttpVersion11
        response.status = interaction.status
        response.reason = interaction.reason or _phrase(interaction.status)
        response._headers = CIMultiDictProxy(CIMultiDict(headers))
        response._raw_headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in headers)
        if cookies := tuple(value for name, value in headers if name.lower() == "set-cookie"):
            jar = SimpleCookie()
            for cookie in cookies:
                jar.load(cookie)
            response._raw_cookie_headers, response._cookies = cookies, jar
        encoding = response._headers.get("content-encoding", "").strip().lower()
        if self._decompresses() and encoding in ("gzip", "deflate"):
            pieces = _decompressed(pieces)  # a body recorded by a client that keeps it encoded (httpx)
        reader = _PieceReader(pieces, loop)
        reader.on_eof(response._response_eof)
        response.content = reader
        response._closed = False  # as start() leaves a response with a body still to read
        return response

    async def _after(self, response: aiohttp.ClientResponse) -> None:
        """What ``_request`` does once it has a response: keep its cookies, raise for its status."""
        if self.replayed and "set-cookie" in response._headers:
            self.session.cookie_jar.update_cookies(response.cookies, response.url)
        policy = self.kwargs.get("raise_for_status")
        if policy is None:
            policy = self.session.raise_for_status
        if callable(policy):
            await policy(response)
        elif policy:
            if not self.replayed and not response.ok:
                await response.read()  # the error body is recorded whole, though nobody reads it after this
            response.raise_for_status()


_RESPONSE_PARAMETERS = frozenset(inspect.signature(aiohttp.ClientResponse.__init__).parameters)


class _SentRequest:
    """The request writer of a replayed response: the request counts as sent, with nothing written."""

    output_size = 0


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _url(session: aiohttp.ClientSession, str_or_url: Any, params: Any) -> URL:
    url: URL = session._build_url(str_or_url)
    return url.extend_query(params) if params else url


def _body(session: aiohttp.ClientSession, kwargs: dict[str, Any], headers: CIMultiDict[str]) -> bytes:
    """The bytes a call's ``json=`` or ``data=`` sends (a file's are read once, and sent as read)."""
    data, value = kwargs.get("data"), kwargs.get("json")
    content_type = None
    if value is not None:
        dumps_bytes = getattr(session, "_json_serialize_bytes", None)
        raw = dumps_bytes(value) if dumps_bytes is not None else session.json_serialize(value)
        body, content_type = (raw if isinstance(raw, bytes) else raw.encode("utf-8")), "application/json"
    elif data is None:
        body = b""
    elif isinstance(data, (bytes, bytearray, memoryview)):
        body = bytes(data)
    elif isinstance(data, str):
        body = data.encode("utf-8")
    elif isinstance(data, Mapping) or (isinstance(data, (list, tuple)) and all(isinstance(i, tuple) for i in data)):
        items = list(data.items()) if isinstance(data, Mapping) else list(data)
        body, content_type = urlencode(items, doseq=True).encode(), "application/x-www-form-urlencoded"
    elif isinstance(data, BytesPayload):
        body = bytes(data._value)
    elif callable(getattr(data, "read", None)) and not inspect.iscoroutinefunction(data.read):
        body = data.read()
        body = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        kwargs["data"] = body  # the file is read now: the real request sends what was read
    else:
        raise CassetteError(
            f"an aiohttp request body of type {type(data).__name__} cannot be matched or recorded by a "
            "cassette; send bytes, str, a form dict or json="
        )
    if content_type is not None and "content-type" not in headers:
        headers["Content-Type"] = content_type
    return body


def _describe(exc: BaseException) -> tuple[str, str]:
    """An aiohttp body failure under its portable name (what httpx raises for it), and its message."""
    message = str(exc)
    if isinstance(exc, asyncio.TimeoutError):
        return "ReadTimeout", message
    # aiohttp reports a reset inside a payload error, naming it only in the message
    if isinstance(exc, ConnectionResetError) or "ConnectionResetError" in message:
        return "ReadError", message
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError)):
        return "RemoteProtocolError", message
    return "ReadError", message


def _stop_error(stop: Stop, path: str) -> BaseException:
    if stop.kind == "abandoned":
        return abandoned_error(stop, path)
    if stop.kind == "stall":
        timeout_error: type[aiohttp.ServerTimeoutError] = getattr(aiohttp, "SocketTimeoutError", aiohttp.ServerTimeoutError)
        return timeout_error(stop.message or "Timeout on reading data from socket")
    # a body cut short, by a reset or otherwise, reaches an aiohttp reader as a payload error
    return aiohttp.ClientPayloadError(stop.message or f"Response payload is not completed ({stop.error})")


async def _live_pieces(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The live body piece by piece: each HTTP chunk (or part of one) as it comes off the connection."""
    while True:
        data, end_of_chunk = await content.readchunk()
        if data:
            yield data
        elif not end_of_chunk:
            return


async def _decompressed(pieces: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    decoder = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or a zlib header, whichever it has
    async for piece in pieces:
        if data := decoder.decompress(piece):
            yield data
    if tail := decoder.flush():
        yield tail


class _NoProtocol:
    """What a StreamReader asks of its connection's protocol, for a body that has no connection."""

    connected = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self, *args: object, **kwargs: object) -> None:
        pass


class _PieceReader(aiohttp.StreamReader):
    """A real ``StreamReader`` fed from ``pieces``, one piece each time a read finds the buffer empty."""

    __slots__ = ("_pieces",)

    def __init__(self, pieces: AsyncIterator[bytes], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(_NoProtocol(), 2**16, loop=loop)  # type: ignore[arg-type]
        self._pieces = pieces

    async def _wait(self, func_name: str) -> None:
        try:
            piece = await self._pieces.__anext__()
        except StopAsyncIteration:
            self.feed_eof()
            return
        except Exception as exc:
            self.set_exception(exc)  # later reads raise it again, as aiohttp's reader does
            raise
        self.feed_data(piece)
