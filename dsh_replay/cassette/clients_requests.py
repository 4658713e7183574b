"""requests through the cassette: ``HTTPAdapter.send`` is the seam.

``requests`` hands every prepared request (method, final URL, headers, body)
to its transport adapter's ``send``; while a cassette is active
``HTTPAdapter.send`` is patched, so every ``requests.get/post``, session and
SDK built on requests is intercepted (redirects, cookies and the rest of
``Session.send`` run as usual around it).

The response is a real ``requests.Response`` (built by the adapter's own
``build_response``) whose ``raw`` is a real ``urllib3.HTTPResponse`` over
:class:`_PieceFile`, a file-like body that serves pieces as ``http.client``
serves chunks:

- **recording** pulls the pieces from the live ``raw`` as the caller reads
  (``read1``: whatever the connection has), noting each; a failure is noted
  at its byte offset and reaches the caller as it would have;
- **replay** serves the replay plan.

urllib3 reads a chunked body piece by piece, so ``iter_content(None)`` sees
the pieces as they were cut, ``iter_content(n)``/``iter_lines()`` see them
re-cut as on a socket, ``raw.read(n)`` reads across them, and ``.content``
joins them; urllib3 decodes ``gzip``/``deflate`` as the headers say. A body
cut short raises urllib3's ``ProtocolError`` (``ChunkedEncodingError`` from
``iter_content``), a stalled one its ``ReadTimeoutError`` (``ConnectionError``).
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import requests
import urllib3
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from .clients_base import (
    Handler,
    HeaderItems,
    Live,
    Recorder,
    Route,
    abandoned_error,
    handing_over,
    pacing_for,
    planned_sync,
    replay_headers,
    tapped_sync,
)
from .pacing import Fault, Fragmentation, Stop
from .store import Interaction

__all__ = ["patch"]

_READ = 65536  # the most one read of a live body asks for; it returns what has arrived


def patch(lib: types.ModuleType, route: Route) -> Callable[[], None]:
    """Route ``lib.adapters.HTTPAdapter``'s requests through ``route()``'s handler; returns the undo."""
    adapter_cls = lib.adapters.HTTPAdapter
    original = adapter_cls.send
    signature = inspect.signature(original)

    @functools.wraps(original)
    def send(self: requests.adapters.HTTPAdapter, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        handler = route()
        if handler is None:
            return original(self, request, *args, **kwargs)
        bound = signature.bind(self, request, *args, **kwargs)
        bound.apply_defaults()
        options = {name: value for name, value in bound.arguments.items() if name not in ("self", "request")}
        return _Call(self, original, request, options).answer(handler)

    adapter_cls.send = send

    def restore() -> None:
        adapter_cls.send = original

    return restore


class _Call:
    """One ``HTTPAdapter.send`` while a cassette is active: the session's ``inner`` and ``lib`` for it."""

    def __init__(
        self, adapter: requests.adapters.HTTPAdapter, original: Callable[..., Any],
        prepared: requests.PreparedRequest, options: dict[str, Any],
    ) -> None:
        self.adapter, self.original, self.prepared, self.options = adapter, original, prepared, options
        self.body = _body(prepared)

    def answer(self, handler: Handler) -> requests.Response:
        import httpx

        prepared = self.prepared
        request = httpx.Request(str(prepared.method), str(prepared.url), headers=list(prepared.headers.items()),
                                content=self.body)
        with handing_over():
            result = handler.handle(request, self, self, False)
        response: requests.Response = result.response if isinstance(result, Live) else result
        return response

    def handle_request(self, request: Any) -> Live:
        """Send the prepared request for real."""
        response: requests.Response = self.original(self.adapter, self.prepared, **self.options)
        return Live(response, response.status_code, response.reason or "", HeaderItems(response.raw.headers.items()))

    def record(self, live: Live, recorder: Recorder, is_async: bool) -> requests.Response:
        response: requests.Response = live.response
        raw = response.raw
        body = _PieceFile(tapped_sync(_live_pieces(raw), recorder, _describe), on_close=raw.close)
        response.raw = self._raw(body, list(raw.headers.items()), raw.status, raw.reason)
        return response

    def replay(
        self, request: Any, interaction: Interaction, *, fragmentation: Fragmentation, speed: float,
        fault: Fault | None, path: str, is_async: bool,
    ) -> requests.Response:
        pacing, failure = pacing_for(interaction, fragmentation, speed, fault, self._read_timeout(),
                                     lambda stop: _stop_error(stop, path))
        raw = self._raw(_PieceFile(planned_sync(pacing, failure)), replay_headers(interaction), interaction.status,
                        interaction.reason)
        response: requests.Response = self.adapter.build_response(self.prepared, raw)
        return response

    def _raw(self, body: _PieceFile, headers: list[tuple[str, str]], status: int, reason: str | None) -> Any:
        fields = urllib3.HTTPHeaderDict()
        for name, value in headers:
            fields.add(name, value)
        raw = urllib3.HTTPResponse(
            body=body,  # type: ignore[arg-type]  # file-like enough: what urllib3 reads of http.client's
            headers=fields, status=status, reason=reason, preload_content=False,
            decode_content=False, request_method=self.prepared.method, request_url=self.prepared.url,
        )
        raw.chunked = True  # read as http.client's chunks: one piece per streamed read
        return raw

    def _read_timeout(self) -> float | None:
        timeout = self.options.get("timeout")
        if isinstance(timeout, tuple):
            timeout = timeout[1] if len(timeout) > 1 else None
        elif isinstance(timeout, urllib3.Timeout):
            timeout = timeout.read_timeout
        return float(timeout) if isinstance(timeout, (int, float)) else None


def _body(prepared: requests.PreparedRequest) -> bytes:
    """The bytes the request sends; a file or generator body is read now and sent as read."""
    body = prepared.body
    if body is None:
        return b""
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if callable(getattr(body, "read", None)):
        content = body.read()
    else:
        content = b"".join(part.encode("utf-8") if isinstance(part, str) else bytes(part) for part in body)
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    prepared.body = data
    return data


def _live_pieces(raw: Any) -> Iterator[bytes]:
    """The live body as it comes off the connection, still encoded as sent."""
    if not hasattr(raw, "read1"):  # urllib3 1.x
        yield from raw.stream(None if raw.chunked else 1024, decode_content=False)
        return
    while data := raw.read1(_READ, decode_content=False):
        yield data


def _describe(exc: BaseException) -> tuple[str, str]:
    """A urllib3 body failure under its portable name (what httpx raises for it), and its message."""
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    if isinstance(exc, (ReadTimeoutError, TimeoutError)):
        return "ReadTimeout", message
    if isinstance(exc, ProtocolError) and not any(isinstance(arg, ConnectionResetError) for arg in exc.args):
        return "RemoteProtocolError", message
    return "ReadError", message


def _stop_error(stop: Stop, path: str) -> BaseException:
    if stop.kind == "abandoned":
        return abandoned_error(stop, path)
    if stop.kind == "stall":
        # a socket timeout, which urllib3 turns into its ReadTimeoutError as on a real connection
        return TimeoutError(stop.message or "The read operation timed out")
    message = stop.message or "Response ended prematurely"
    return ProtocolError(message if message.startswith("Connection broken") else f"Connection broken: {message}")


class _PieceFile:
    """A response body urllib3 reads as it reads ``http.client``'s, served from ``pieces``.

    A chunked body is read by chunk-size lines (``fp.readline``) and chunk data
    (``_safe_read``): here every piece is one chunk. ``read``/``read1`` serve
    the plain reads (``raw.read(n)``).
    """

    def __init__(self, pieces: Iterable[bytes], on_close: Callable[[], object] = lambda: None) -> None:
        self._pieces = iter(pieces)
        self._piece = b""  # what is left of the current piece
        self._trailer = False  # the last chunk was announced: its trailer line comes next
        self._on_close = on_close
        self.fp: _PieceFile | None = self
        self.closed = False

    def _next(self) -> bytes | None:
        for piece in self._pieces:
            if piece:
                return piece
        return None

    def readline(self, limit: int = -1) -> bytes:
        if self._trailer:
            self.close()
            return b"\r\n"
        if self.fp is None:
            return b""
        piece = self._next()
        if piece is None:
            self._trailer = True
            return b"0\r\n"
        self._piece = piece
        return b"%x\r\n" % len(piece)

    def _safe_read(self, amt: int) -> bytes:
        if not self._piece:
            return b"\r\n"[:amt]  # the line break that ends a chunk
        data, self._piece = self._piece[:amt], self._piece[amt:]
        return data

    def read(self, amt: int | None = None) -> bytes:
        out = bytearray()
        while amt is None or len(out) < amt:
            chunk = self.read1(-1 if amt is None else amt - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def read1(self, amt: int | None = -1) -> bytes:
        if not self._piece:
            piece = self._next()
            if piece is None:
                self.close()
                return b""
            self._piece = piece
        take = len(self._piece) if amt is None or amt < 0 else amt
        data, self._piece = self._piece[:take], self._piece[take:]
        return data

    def isclosed(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed, self.fp = True, None
            self._on_close()

    def flush(self) -> None:
        pass
