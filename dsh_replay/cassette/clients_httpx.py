"""httpx (and httpx2) through the cassette: the transport seam and the streams.

httpx asks ``Client._transport_for_url(url)`` for the transport of each
request; while a cassette is active that method is patched to wrap whatever
transport the client would have used (its pool, a MockTransport, an SDK's
custom transport) in one of ours. So clients created anywhere — in adapters,
inside the ``openai``/``anthropic`` SDKs (which use httpx2), before or inside
the ``with`` block — are intercepted.

- ``recording`` streams pass each fragment to the caller the moment the real
  transport yields it; an early close marks the interaction incomplete —
  unless the body ends right there, before any more content (:mod:`.drain`).
- ``replay`` streams serve the planned pieces; a recorded failure (or an
  injected fault) is raised again at the same byte offset as the same
  exception type of the client's library.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .clients_base import (
    Handler,
    Recorder,
    Route,
    abandoned_error,
    handing_over,
    pacing_for,
    planned_async,
    planned_sync,
    replay_headers,
    tapped_async,
    tapped_sync,
)
from .drain import ended_async, ended_sync
from .pacing import Fault, Fragmentation, Stop
from .store import Interaction

__all__ = ["answer_async", "patch", "recording_response", "replay_response"]


def patch(lib: types.ModuleType, route: Route) -> Callable[[], None]:
    """Route ``lib``'s clients through ``route()``'s handler; returns the undo."""
    undo: list[tuple[type, Callable[..., Any]]] = []
    for client_cls, is_async in ((lib.Client, False), (lib.AsyncClient, True)):
        original = client_cls._transport_for_url
        undo.append((client_cls, original))
        client_cls._transport_for_url = _patched(original, lib, is_async, route)

    def restore() -> None:
        for client_cls, original in undo:
            client_cls._transport_for_url = original  # type: ignore[attr-defined]

    return restore


def _patched(original: Callable[..., Any], lib: types.ModuleType, is_async: bool, route: Route) -> Callable[..., Any]:
    transport_cls = _transport_classes(lib)[1 if is_async else 0]

    def _transport_for_url(self: Any, url: Any) -> Any:
        inner = original(self, url)
        handler = route()
        return inner if handler is None else transport_cls(handler, inner, lib)

    return _transport_for_url


async def answer_async(handler: Handler, request: Any, inner: Any, lib: types.ModuleType) -> Any:
    """``handler``'s response to an async client's ``request`` (``inner``: the transport it would have used)."""
    await request.aread()
    with handing_over():
        result = handler.handle(request, inner, lib, True)
        return await result if asyncio.iscoroutine(result) else result


_CLASS_CACHE: dict[str, tuple[type, type, type, type]] = {}


def _transport_classes(lib: types.ModuleType) -> tuple[type, type, type, type]:
    """(sync transport, async transport, sync stream, async stream) built on ``lib``'s bases.

    httpx checks ``isinstance(response.stream, AsyncByteStream)`` against its own
    classes, so each library gets its own subclasses.
    """
    if lib.__name__ in _CLASS_CACHE:
        return _CLASS_CACHE[lib.__name__]

    class SyncTransport(lib.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, handler: Handler, inner: Any, library: types.ModuleType) -> None:
            self.handler, self.inner, self.lib = handler, inner, library

        def handle_request(self, request: Any) -> Any:
            request.read()
            with handing_over():
                return self.handler.handle(request, self.inner, self.lib, False)

    class AsyncTransport(lib.AsyncBaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self, handler: Handler, inner: Any, library: types.ModuleType) -> None:
            self.handler, self.inner, self.lib = handler, inner, library

        async def handle_async_request(self, request: Any) -> Any:
            return await answer_async(self.handler, request, self.inner, self.lib)

    class SyncStream(lib.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, source: Iterator[bytes], on_close: Callable[[], None]) -> None:
            self.source, self.on_close = source, on_close

        def __iter__(self) -> Iterator[bytes]:
            return self.source

        def close(self) -> None:
            self.on_close()

    class AsyncStream(lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, source: AsyncIterator[bytes], on_close: Callable[[], Any]) -> None:
            self.source, self.on_close = source, on_close

        def __aiter__(self) -> AsyncIterator[bytes]:
            return self.source

        async def aclose(self) -> None:
            result = self.on_close()
            if asyncio.iscoroutine(result):
                await result

    _CLASS_CACHE[lib.__name__] = (SyncTransport, AsyncTransport, SyncStream, AsyncStream)
    return _CLASS_CACHE[lib.__name__]


# -- recording --------------------------------------------------------------------------


def recording_response(lib: types.ModuleType, response: Any, recorder: Recorder, is_async: bool) -> Any:
    """Swap the live response's stream for one that records while passing fragments through."""
    sync_stream, async_stream = _transport_classes(lib)[2:]
    inner = response.stream
    if hasattr(response, "_content"):
        # A transport that builds its response from bytes (MockTransport, respx) hands
        # it over already read: nothing will stream through, so note the body now.
        if isinstance(inner, lib.ByteStream):
            raw = b"".join(inner)
        else:  # only the decoded body is left: record it as such
            raw = response.content
            recorder.interaction.headers = [
                (k, v) for k, v in recorder.interaction.headers if k.lower() != "content-encoding"
            ]
        recorder.fragment(raw)
        recorder.finish(complete=True)
        return response
    if is_async:
        areads = _AsyncReads(inner)  # one iterator, shared by the reader and the drain

        async def aclose() -> None:
            if not recorder.done and not areads.interrupted and await ended_async(areads):
                recorder.finish(complete=True)
            recorder.finish(complete=False)  # a no-op when the body was read to the end
            await inner.aclose()

        response.stream = async_stream(tapped_async(areads, recorder), aclose)
    else:
        reads = _Reads(inner)

        def close() -> None:
            if not recorder.done and not reads.interrupted and ended_sync(inner, reads):
                recorder.finish(complete=True)
            recorder.finish(complete=False)
            inner.close()

        response.stream = sync_stream(tapped_sync(reads, recorder), close)
    return response


# A read that a cancellation (or KeyboardInterrupt) went through has finished the body's
# iterator: asked again, it answers "ended", and the drain would take that for the end of
# the body, recording ``complete: true`` for a stream its reader left in the middle. So
# the reads below remember being cut short, and a cut body is never probed for its end.
# Failures (a ReadError, a timeout) are the recorder's to note: they are not interruptions.


class _Reads:
    """The live body's pieces (read once, by the caller and then the drain); ``interrupted``: a read was cut short."""

    def __init__(self, body: Any) -> None:
        self.pieces: Iterator[bytes] = iter(body)
        self.interrupted = False

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self.pieces)
        except Exception:  # the body's end, or a failure the recorder notes
            raise
        except BaseException:  # a cancellation, a KeyboardInterrupt: the read was cut short
            self.interrupted = True
            raise


class _AsyncReads:
    """:class:`_Reads` of an async body."""

    def __init__(self, body: Any) -> None:
        self.pieces: AsyncIterator[bytes] = body.__aiter__()
        self.interrupted = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.pieces.__anext__()
        except Exception:  # the body's end, or a failure the recorder notes
            raise
        except BaseException:  # a cancellation, a KeyboardInterrupt: the read was cut short
            self.interrupted = True
            raise


# -- replay ------------------------------------------------------------------------------


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout") or {}
    value = timeout.get("read")
    return float(value) if value is not None else None


def _stop_error(lib: types.ModuleType, stop: Stop, request: Any, path: str) -> BaseException:
    if stop.kind == "abandoned":
        return abandoned_error(stop, path)
    if stop.kind == "stall":
        return lib.ReadTimeout(stop.message or "read timed out (stalled stream)", request=request)  # type: ignore[no-any-return]
    exc_type = getattr(lib, stop.error, None)
    if not (isinstance(exc_type, type) and issubclass(exc_type, lib.TransportError)):
        exc_type = lib.ReadError
    return exc_type(stop.message or stop.error, request=request)  # type: ignore[no-any-return]


def replay_response(
    lib: types.ModuleType,
    request: Any,
    interaction: Interaction,
    *,
    fragmentation: Fragmentation,
    speed: float,
    fault: Fault | None,
    path: str,
    is_async: bool,
) -> Any:
    """A response that serves the recorded body as the options ask."""
    sync_stream, async_stream = _transport_classes(lib)[2:]
    pacing, failure = pacing_for(interaction, fragmentation, speed, fault, _read_timeout(request),
                                 lambda stop: _stop_error(lib, stop, request, path))
    if is_async:
        stream = async_stream(planned_async(pacing, failure), lambda: None)
    else:
        stream = sync_stream(planned_sync(pacing, failure), lambda: None)
    extensions = {"http_version": b"HTTP/1.1"}
    if interaction.reason:
        extensions["reason_phrase"] = interaction.reason.encode("ascii", "replace")
    return lib.Response(
        interaction.status, headers=replay_headers(interaction), stream=stream, request=request, extensions=extensions
    )
