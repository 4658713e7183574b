"""One response on the wire: h11 frames it, an asyncio stream carries it.

A :class:`Reply` is what a responder (:class:`.http.Responder`) writes an
answer through: a head, the body piece by piece (one HTTP chunk each, with a
``drain()`` after it, so a piece leaves as its own TCP segment unless the
client reads slowly), then an ending:

==========  ==================================================================
ending      on the wire
==========  ==================================================================
complete    the final chunk; the connection may serve the next request
cut         the connection is closed (FIN) without the final chunk
reset       the connection is reset (RST): the client reads ECONNRESET
stall       nothing more until the client gives up (or ``stall_seconds``)
==========  ==================================================================

While a response streams, the client sends nothing (HTTP/1.1 has it wait
for the answer), so :meth:`Reply.watch` may read from it: end of file means
it went away, which a relay from a silent upstream would otherwise notice
only at its next write; anything else it sends is handed to h11 for the next
request.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable, Sequence

import h11
import orjson

from .replay import Ending, Playback

__all__ = ["READ_SIZE", "Reply", "finish", "until_closed"]

READ_SIZE = 65536


class Reply:
    """The answer to one request, written as h11 frames it; see the module docstring.

    After :meth:`end`, ``keep`` says whether the connection may serve another
    request and ``reset`` whether it is to be reset rather than closed.
    """

    def __init__(
        self, conn: h11.Connection, reader: asyncio.StreamReader | None, writer: asyncio.StreamWriter, *,
        stall_seconds: float,
    ) -> None:
        self.conn, self.reader, self.writer = conn, reader, writer
        self.stall_seconds = stall_seconds
        self.keep = True
        self.reset = False
        self._watcher: asyncio.Task[None] | None = None
        self._on_gone: Callable[[], object] | None = None
        #: set by :meth:`watch` when the client closes its side
        self.gone = asyncio.Event()

    @property
    def started(self) -> bool:
        """Has the head gone out (so that a failure can only cut the body now)?"""
        return self.conn.our_state is not h11.SEND_RESPONSE and self.conn.our_state is not h11.IDLE

    async def head(self, status: int, headers: Sequence[tuple[str, str]], reason: str = "") -> None:
        # latin-1, as HTTP/1.1 reads header bytes: a value outside ASCII goes out as it came in
        encoded = [(name.encode("latin-1", "replace"), value.encode("latin-1", "replace")) for name, value in headers]
        response = h11.Response(status_code=status, headers=encoded, reason=reason.encode("latin-1", "replace"))
        self.writer.write(self.conn.send(response) or b"")
        await self.writer.drain()

    async def piece(self, data: bytes) -> None:
        """One piece of the body, as one HTTP chunk, sent now."""
        if data:
            self.writer.write(self.conn.send(h11.Data(data=data)) or b"")
            await self.writer.drain()

    async def end(self, ending: Ending) -> None:
        """End the body as ``ending`` says (see the module docstring)."""
        await self.unwatch()
        if ending == "complete":
            self.writer.write(self.conn.send(h11.EndOfMessage()) or b"")
            await self.writer.drain()
            return
        self.keep = False
        if ending == "stall" and self.reader is not None:
            # silence until the client's read timeout ends it, or ours does
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                await asyncio.wait_for(until_closed(self.reader), self.stall_seconds)
        self.reset = ending == "reset"

    async def json(self, status: int, payload: bytes, *, close: bool = False) -> None:
        """A whole JSON answer (an error, a 404's diagnosis); ``close``: end the connection after it."""
        headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
        if close:
            headers.append(("connection", "close"))
            self.keep = False
        with contextlib.suppress(h11.LocalProtocolError):  # a client that already sent "connection: close"
            self.writer.write(self.conn.send(h11.Response(status_code=status, headers=headers)) or b"")
            self.writer.write(self.conn.send(h11.Data(data=payload)) or b"")
            self.writer.write(self.conn.send(h11.EndOfMessage()) or b"")
            await self.writer.drain()

    async def error(self, status: int, kind: str, message: str, *, close: bool = False) -> None:
        """``{"error": {"type": kind, "message": message}}`` with ``status``."""
        await self.json(status, orjson.dumps({"error": {"type": kind, "message": message}}), close=close)

    async def play(self, playback: Playback) -> tuple[int, int]:
        """Send a recorded response, paced, ended as recorded; (pieces, bytes) sent."""
        await self.head(playback.status, playback.headers, playback.reason)
        pieces = size = 0
        for delay, piece in playback.steps():
            if delay > 0:
                await playback.pacing.clock.async_sleep(delay)
            if piece:
                await self.piece(piece)
                pieces, size = pieces + 1, size + len(piece)
        await self.end(playback.ending)
        return pieces, size

    # -- noticing a client that went away ----------------------------------------------------

    def watch(self, on_gone: Callable[[], object] | None = None) -> asyncio.Event:
        """Start reading ahead from the client; when it closes its side, set the event returned and call ``on_gone``."""
        self._on_gone = on_gone
        if self._watcher is None and self.reader is not None:
            self._watcher = asyncio.create_task(self._watch())
        return self.gone

    async def _watch(self) -> None:
        assert self.reader is not None
        try:
            while data := await self.reader.read(READ_SIZE):
                self.conn.receive_data(data)  # a pipelined request: h11 keeps it for the next cycle
        except (ConnectionError, h11.RemoteProtocolError):
            pass
        # a cancelled read loses nothing: StreamReader takes bytes out of its buffer only once it resumes
        self.gone.set()
        if self._on_gone is not None:
            self._on_gone()

    async def unwatch(self) -> None:
        """Stop reading ahead (before the connection reads the next request itself)."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


async def until_closed(reader: asyncio.StreamReader) -> None:
    while await reader.read(READ_SIZE):
        pass


def finish(writer: asyncio.StreamWriter, *, reset: bool) -> None:
    """Close the connection: a FIN after what was sent, or with ``reset`` a TCP RST."""
    if reset:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # linger on, timeout 0: close() sends a RST instead of a FIN (the client reads ECONNRESET)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return
    writer.close()
