"""Route every httpx (and httpx2) client through the active cassette session.

httpx asks ``Client._transport_for_url(url)`` for the transport of each
request; while a cassette is active that method is patched to wrap whatever
transport the client would have used (its pool, a MockTransport, an SDK's
custom transport) in one of ours. So clients created anywhere — in adapters,
inside the ``openai``/``anthropic`` SDKs (which use httpx2), before or inside
the ``with`` block — are intercepted, and nothing is patched at import time.

The response streams are where stream fidelity lives:

- ``recording`` streams pass each fragment to the caller the moment the real
  transport yields it, noting its size and arrival time; a failure is noted
  with its byte offset and re-raised; an early close marks the interaction
  incomplete — unless the body ends right there, before any more content
  (:mod:`.drain`).
- ``replay`` streams cut the recorded body as asked and, with a speed factor,
  sleep until each piece's recorded arrival time; a recorded failure (or an
  injected fault) is raised again at the same byte offset as the same
  exception type of the client's library.
"""

from __future__ import annotations

import asyncio
import importlib
import time
import types
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol

from ..errors import CassetteError
from .drain import ended_async, ended_sync
from .pacing import Fault, Fragmentation, Pacing, Stop, clip, piece_plan, stop_for
from .store import Interaction, RecordedError

__all__ = ["Handler", "Recorder", "active_handlers", "answer_async", "install", "recording_response", "replay_response", "uninstall"]


# -- the handler protocol ------------------------------------------------------------


class Handler(Protocol):
    """What the patched clients call into: the active cassette session."""

    def handle(self, request: Any, inner: Any, lib: types.ModuleType, is_async: bool) -> Any: ...


_active: list[Handler] = []
_originals: list[tuple[type, Callable[..., Any]]] = []


def _libraries() -> list[types.ModuleType]:
    libs = []
    for name in ("httpx", "httpx2"):
        try:
            libs.append(importlib.import_module(name))
        except ImportError:
            continue
    return libs


def install(handler: Handler) -> None:
    """Make ``handler`` the active session; patch the clients on first use."""
    _active.append(handler)
    if _originals:
        return
    for lib in _libraries():
        for client_cls, is_async in ((lib.Client, False), (lib.AsyncClient, True)):
            original = client_cls._transport_for_url
            _originals.append((client_cls, original))
            client_cls._transport_for_url = _patched(original, lib, is_async)


def active_handlers() -> list[Handler]:
    """The sessions active now, the innermost last."""
    return list(_active)


def uninstall(handler: Handler) -> None:
    """Deactivate ``handler``; restore the clients when no session is left."""
    if handler in _active:
        _active.remove(handler)
    if not _active:
        while _originals:
            client_cls, original = _originals.pop()
            client_cls._transport_for_url = original  # type: ignore[attr-defined]


def _patched(original: Callable[..., Any], lib: types.ModuleType, is_async: bool) -> Callable[..., Any]:
    transport_cls = _transport_classes(lib)[1 if is_async else 0]

    def _transport_for_url(self: Any, url: Any) -> Any:
        inner = original(self, url)
        if not _active:
            return inner
        return transport_cls(_active[-1], inner, lib)

    return _transport_for_url


async def answer_async(handler: Handler, request: Any, inner: Any, lib: types.ModuleType) -> Any:
    """``handler``'s response to an async client's ``request`` (``inner``: the transport it would have used)."""
    await request.aread()
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


class Recorder:
    """Notes the fragments of one live response as they pass through."""

    def __init__(self, interaction: Interaction, on_done: Callable[[Interaction], None]) -> None:
        self.interaction = interaction
        self.on_done = on_done
        self.started = time.perf_counter()
        self.parts: list[bytes] = []
        self.done = False
        interaction.fragments = []

    def fragment(self, data: bytes) -> None:
        if not data:
            return
        assert self.interaction.fragments is not None
        self.interaction.fragments.append(((time.perf_counter() - self.started) * 1000.0, len(data)))
        self.parts.append(data)

    def failed(self, exc: BaseException) -> None:
        at_ms = (time.perf_counter() - self.started) * 1000.0
        self.interaction.error = RecordedError(type(exc).__name__, str(exc), sum(map(len, self.parts)), at_ms)
        self.finish(complete=True)

    def finish(self, *, complete: bool) -> None:
        if self.done:
            return
        self.done = True
        self.interaction.body = b"".join(self.parts)
        self.interaction.complete = complete
        self.on_done(self.interaction)


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
        apieces: list[AsyncIterator[bytes]] = []  # one iterator, shared by the reader and the drain

        def asource() -> AsyncIterator[bytes]:
            if not apieces:
                apieces.append(inner.__aiter__())
            return apieces[0]

        async def agen() -> AsyncIterator[bytes]:
            try:
                async for data in asource():
                    recorder.fragment(data)
                    yield data
            except Exception as exc:
                recorder.failed(exc)
                raise
            recorder.finish(complete=True)

        async def aclose() -> None:
            if not recorder.done and await ended_async(asource()):
                recorder.finish(complete=True)
            recorder.finish(complete=False)  # a no-op when the body was read to the end
            await inner.aclose()

        response.stream = async_stream(agen(), aclose)
    else:
        pieces: list[Iterator[bytes]] = []

        def source() -> Iterator[bytes]:
            if not pieces:
                pieces.append(iter(inner))
            return pieces[0]

        def gen() -> Iterator[bytes]:
            try:
                for data in source():
                    recorder.fragment(data)
                    yield data
            except Exception as exc:
                recorder.failed(exc)
                raise
            recorder.finish(complete=True)

        def close() -> None:
            if not recorder.done and ended_sync(inner, source()):
                recorder.finish(complete=True)
            recorder.finish(complete=False)
            inner.close()

        response.stream = sync_stream(gen(), close)
    return response


# -- replay ------------------------------------------------------------------------------


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout") or {}
    value = timeout.get("read")
    return float(value) if value is not None else None


def _stop_error(lib: types.ModuleType, stop: Stop, request: Any, path: str) -> BaseException:
    if stop.kind == "abandoned":
        return CassetteError(
            f"cassette {path}: the recorded response was abandoned by the caller after {stop.at} bytes; "
            "this replay reads further. Re-record it (--record-mode=rewrite).",
            path=path,
        )
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
    plan = piece_plan(interaction, fragmentation)
    stop = stop_for(interaction, fault)
    if stop is not None:
        plan = clip(plan, stop.at)
    pacing = Pacing(interaction.body, plan, speed, stop, _read_timeout(request), fault is not None)

    def failure() -> BaseException:
        assert stop is not None
        return _stop_error(lib, stop, request, path)

    async def agen() -> AsyncIterator[bytes]:
        for delay, piece in pacing.steps():
            if delay > 0:
                await pacing.clock.async_sleep(delay)  # asyncio or trio, whichever runs
            if piece is None:
                raise failure()
            yield piece

    def gen() -> Iterator[bytes]:
        for delay, piece in pacing.steps():
            if delay > 0:
                pacing.clock.sleep(delay)
            if piece is None:
                raise failure()
            yield piece

    stream = async_stream(agen(), lambda: None) if is_async else sync_stream(gen(), lambda: None)
    extensions = {"http_version": b"HTTP/1.1"}
    if interaction.reason:
        extensions["reason_phrase"] = interaction.reason.encode("ascii", "replace")
    # the recorded length/encoding framing no longer describes a re-cut body
    headers = [(k, v) for k, v in interaction.headers if k.lower() not in ("content-length", "transfer-encoding")]
    return lib.Response(interaction.status, headers=headers, stream=stream, request=request, extensions=extensions)
