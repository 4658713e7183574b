"""What every intercepted HTTP client shares: the handler it calls, the recorder, the replay plan.

A patched client (``clients_httpx``, ``clients_aiohttp``, ``clients_requests``)
asks the interception layer (:mod:`.intercept`) for the :class:`Handler` of
the calling task and hands it each request. A body is the same sequence of
pieces whatever the client:

- **recording** wraps the live body in :func:`tapped_sync` / :func:`tapped_async`:
  each piece reaches the caller the moment the client reads it, and the
  :class:`Recorder` notes its size and arrival time; a failure is noted at its
  byte offset and re-raised as it was;
- **replay** serves :func:`planned_sync` / :func:`planned_async`: the recorded
  body cut and paced as asked (:mod:`.pacing`), ending with the client
  library's own exception where the recording (or an injected fault) failed.

Each client turns these pieces into its library's own response object. What a
cassette stores names no client: failures are recorded under the httpx names
the format has always used (:data:`PORTABLE_KINDS`), so a stream recorded with
one client replays with any other.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import CassetteError
from .pacing import Fault, Fragmentation, Pacing, Stop, clip, piece_plan, stop_for
from .store import Interaction, RecordedError

__all__ = [
    "PORTABLE_KINDS",
    "Handler",
    "HeaderItems",
    "Live",
    "Recorder",
    "Route",
    "abandoned_error",
    "forwarding",
    "handing_over",
    "pacing_for",
    "planned_async",
    "planned_sync",
    "replay_headers",
    "tapped_async",
    "tapped_sync",
]

#: the failure kinds a cassette stores: a read that timed out, a body cut short, any other broken read
PORTABLE_KINDS = ("ReadTimeout", "RemoteProtocolError", "ReadError")


class Handler(Protocol):
    """What the patched clients call into: the active cassette session.

    ``request`` is an ``httpx.Request`` (other clients' requests are translated);
    ``inner`` sends it for real (``handle_request`` / ``handle_async_request``);
    ``lib`` is the httpx module, or for another client the call itself, which
    knows how to build its library's responses (``replay``, ``record``).
    """

    def handle(self, request: Any, inner: Any, lib: Any, is_async: bool) -> Any: ...


#: the handler of the calling task or thread (None: the request goes out as it is)
Route = Callable[[], "Handler | None"]

#: True while a request is with its handler. A client that sends through another
#: (litellm's httpx client over an aiohttp transport) is answered once, at the outer one.
forwarding: contextvars.ContextVar[bool] = contextvars.ContextVar("dsh_replay_forwarding", default=False)


@contextlib.contextmanager
def handing_over() -> Iterator[None]:
    """Around a request's time with its handler: what the inner client sends then is not intercepted again."""
    token = forwarding.set(True)
    try:
        yield
    finally:
        forwarding.reset(token)


class HeaderItems(list[tuple[str, str]]):
    """Response headers as ``(name, value)`` pairs, read the way httpx's are."""

    def multi_items(self) -> list[tuple[str, str]]:
        return list(self)


@dataclass(frozen=True, slots=True)
class Live:
    """A live response of a client other than httpx, as the session reads it to start a recording."""

    response: Any
    status_code: int
    reason_phrase: str
    headers: HeaderItems


# -- recording ------------------------------------------------------------------------


class Recorder:
    """Notes the fragments of one live response as they pass through.

    ``ended``: asked when the recording is closed early; True if the body had in
    fact ended there (the client read its last byte, not its end marker).
    """

    def __init__(self, interaction: Interaction, on_done: Callable[[Interaction], None]) -> None:
        self.interaction = interaction
        self.on_done = on_done
        self.started = time.perf_counter()
        self.parts: list[bytes] = []
        self.done = False
        self.ended: Callable[[], bool] | None = None
        interaction.fragments = []

    def fragment(self, data: bytes) -> None:
        if not data:
            return
        assert self.interaction.fragments is not None
        self.interaction.fragments.append(((time.perf_counter() - self.started) * 1000.0, len(data)))
        self.parts.append(data)

    def failed(self, exc: BaseException, described: tuple[str, str] | None = None) -> None:
        """The body broke with ``exc``; ``described``: its (portable kind, message), if not its own."""
        at_ms = (time.perf_counter() - self.started) * 1000.0
        kind, message = described or (type(exc).__name__, str(exc))
        self.interaction.error = RecordedError(kind, message, sum(map(len, self.parts)), at_ms)
        self.finish(complete=True)

    def finish(self, *, complete: bool) -> None:
        if self.done:
            return
        if not complete and self.ended is not None:
            try:
                complete = self.ended()
            except Exception:  # a probe of a connection already gone: the recording stays incomplete
                complete = False
        self.done = True
        self.interaction.body = b"".join(self.parts)
        self.parts = []  # the pieces are the body now: a session keeps its recorders, not twice the bytes
        self.interaction.complete = complete
        self.on_done(self.interaction)


#: a failure's portable kind (:data:`PORTABLE_KINDS`) and message, or None for its own
Describe = Callable[[BaseException], "tuple[str, str] | None"]


def tapped_sync(pieces: Iterable[bytes], recorder: Recorder, describe: Describe = lambda _: None) -> Iterator[bytes]:
    """``pieces`` passed through one by one, each noted as it arrives."""
    try:
        for data in pieces:
            recorder.fragment(data)
            yield data
    except Exception as exc:
        recorder.failed(exc, describe(exc))
        raise
    recorder.finish(complete=True)


async def tapped_async(
    pieces: AsyncIterator[bytes], recorder: Recorder, describe: Describe = lambda _: None
) -> AsyncIterator[bytes]:
    """``pieces`` passed through one by one, each noted as it arrives."""
    try:
        async for data in pieces:
            recorder.fragment(data)
            yield data
    except Exception as exc:
        recorder.failed(exc, describe(exc))
        raise
    recorder.finish(complete=True)


# -- replay ------------------------------------------------------------------------------


def pacing_for(
    interaction: Interaction, fragmentation: Fragmentation, speed: float, fault: Fault | None,
    read_timeout: float | None, error_for: Callable[[Stop], BaseException],
) -> tuple[Pacing, Callable[[], BaseException]]:
    """When each piece of ``interaction``'s body is due, and the error (in the client's own
    terms, from ``error_for``) to raise where the body breaks."""
    plan = piece_plan(interaction, fragmentation)
    stop = stop_for(interaction, fault)
    if stop is not None:
        plan = clip(plan, stop.at)

    def failure() -> BaseException:
        assert stop is not None  # a plan only breaks where a stop cut it
        return error_for(stop)

    return Pacing(interaction.body, plan, speed, stop, read_timeout, fault is not None), failure


def planned_sync(pacing: Pacing, failure: Callable[[], BaseException]) -> Iterator[bytes]:
    """The planned pieces, sleeping (``time.sleep``) until each is due; ``failure()`` where the body breaks."""
    for delay, piece in pacing.steps():
        if delay > 0:
            pacing.clock.sleep(delay)
        if piece is None:
            raise failure()
        yield piece


async def planned_async(pacing: Pacing, failure: Callable[[], BaseException]) -> AsyncIterator[bytes]:
    """The planned pieces, sleeping in the running async library until each is due."""
    for delay, piece in pacing.steps():
        if delay > 0:
            await pacing.clock.async_sleep(delay)  # asyncio or trio, whichever runs
        if piece is None:
            raise failure()
        yield piece


def abandoned_error(stop: Stop, path: str) -> CassetteError:
    return CassetteError(
        f"cassette {path}: the recorded response was abandoned by the caller after {stop.at} bytes; "
        "this replay reads further. Re-record it (--record-mode=rewrite).",
        path=path,
    )


def replay_headers(interaction: Interaction) -> list[tuple[str, str]]:
    """The recorded headers less the length/encoding framing, which no longer describes a re-cut body."""
    return [(k, v) for k, v in interaction.headers if k.lower() not in ("content-length", "transfer-encoding")]
