"""One response on the wire: h11 frames it, an asyncio stream carries it.

A :class:`Reply` is what a responder (:class:`.http.Responder`) writes an
answer through: a head, the body piece by piece (one HTTP chunk each, handed
to the socket at once, so a piece leaves as its own TCP segment unless the
client reads slowly; the writer waits only when the client is that far
behind), then an ending:

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

h11 frames the head and the ending, and chooses the body's framing (chunked
for an HTTP/1.1 client, the connection's end for an HTTP/1.0 one). A chunk's
frame is a few bytes, written here rather than through h11, whose state a
piece of the body does not change: at a stream of many pieces, h11's checks
of each one were a good part of the relay's time.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable, Sequence

import h11
import orjson

from ..cassette.timeouts import within
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
        self._chunked = False  # h11 framed a piece of the body as a chunk: it chose chunked framing
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
        if self.send(data):
            await self.writer.drain()

    def send(self, data: bytes) -> bool:
        """One piece of the body, as one HTTP chunk, handed to the socket now; True when the client is behind.

        When it is, the caller awaits ``writer.drain()`` before the next piece; a client that went
        away raises ConnectionResetError.
        """
        transport = self.writer.transport
        if transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        if data and self._chunked:
            transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        elif data:
            framed = self.conn.send_with_data_passthrough(h11.Data(data=data)) or []
            # as h11 framed this piece, so are the next ones of a chunked body: size line, piece, CRLF
            self._chunked = len(framed) == 3 and framed[2] == b"\r\n"
            transport.write(b"".join(framed))
        return transport.get_write_buffer_size() > 0

    async def end(self, ending: Ending) -> None:
        """End the body as ``ending`` says (see the module docstring)."""
        await self.unwatch()
        if ending == "complete":
            self.finish_body()
            await self.writer.drain()
            return
        self.keep = False
        if ending == "stall" and self.reader is not None:
            # silence until the client's read timeout ends it, or ours does
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                await within(self.stall_seconds, until_closed(self.reader))
        self.reset = ending == "reset"

    def finish_body(self) -> None:
        """The body's end on its way now, before what the responder does next (:meth:`end` does it, if not yet)."""
        if self.conn.our_state is h11.SEND_BODY:
            self.writer.write(self.conn.send(h11.EndOfMessage()) or b"")
        if self._watcher is not None:  # the response is whole: a client that leaves now cuts nothing
            self._watcher.cancel()

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
