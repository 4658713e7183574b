"""The server on the wire: asyncio streams and h11, one task per connection.

h11 parses each request; a :class:`Responder` decides what to answer and
writes it through a :class:`.wire.Reply`: :class:`ReplayResponder` from
cassettes (:class:`.replay.CassetteServer`), the recording proxy
(:class:`.record.RecordingProxy`) from the provider behind it. Connections
are kept alive between requests; :meth:`HttpServer.close` stops listening and
closes every open connection (a response cut mid-body is reset, so no client
takes it for a whole one).

No client holds the server for the others:

- the diagnosis of a request nothing matches (the nearest cassette, a body
  diff) runs in a worker thread, so a big chat history that matches nothing
  does not stop the streams of other connections;
- a connection has ``idle_timeout`` seconds to send each request's head, and
  as long between two reads of its body, and ``body_timeout`` seconds for the
  whole body however it trickles in; then it is closed (after a 408 when it
  had begun a request), so idle and half-sent connections do not pile up;
- at most ``max_connections`` are served at once: one more is answered 503
  and closed, and the log says so the first time only. A refused client's
  request is read and dropped for up to ``LINGER_SECONDS`` after the answer:
  closed with it unread, the connection would be reset, and the client could
  read the reset instead of the answer.

The log has one line per request; a target's credentials (``?key=...``) are
replaced as a cassette's are (:class:`..cassette.scrub.Scrubber`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import h11

from ..cassette.scrub import Scrubber
from ..cassette.timeouts import within
from ..errors import DshReplayError
from .replay import CassetteServer, Unmatched
from .wire import READ_SIZE, Reply, finish

__all__ = [
    "BODY_TIMEOUT", "IDLE_TIMEOUT", "LINGER_SECONDS", "MAX_CONNECTIONS", "MAX_REQUEST_BYTES", "STALL_SECONDS",
    "HttpServer", "ReplayResponder", "Request", "Responder",
]

#: a request body beyond this is refused (413): no provider request is near it, a runaway upload is
MAX_REQUEST_BYTES = 32 * 1024 * 1024
#: how long a stalled response stays silent before the server closes it, if the client has not given up
STALL_SECONDS = 300.0
#: seconds a connection has to send a request's head (idle between requests included), or between two body reads
IDLE_TIMEOUT = 10.0
#: seconds a connection has to send a whole request body, once its head is in: a trickle of bytes does not hold it
BODY_TIMEOUT = 60.0
#: seconds a refused connection's request is read and dropped after the answer, before the close
LINGER_SECONDS = 2.0
_LINGER_BYTES = 1024 * 1024
#: connections served at once; well under the usual ``ulimit -n`` of 1024, so accept() never runs out of descriptors
MAX_CONNECTIONS = 256
# h11 quotes the bytes it refused (a request line with its query, a header with its credential)
_QUOTED = re.compile(r"(?::\s*|\s+)(?:bytearray\()?b['\"].*", re.DOTALL)


class _Closed(Exception):
    """The client went away, or sent something that is not HTTP/1.1."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One whole request: ``target`` is the request line's path and query; ``shown`` is how the log shows it."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    shown: str


class Responder(Protocol):
    """Answers a request through ``reply``; a :class:`DshReplayError` before the head becomes a 500."""

    async def respond(self, request: Request, reply: Reply) -> None: ...


class ReplayResponder:
    """Answers from cassettes: the recorded response, or a 404 that says why nothing matched."""

    def __init__(self, core: CassetteServer, log: Callable[[str], None]) -> None:
        self.core, self.log = core, log

    async def respond(self, request: Request, reply: Reply) -> None:
        answer = self.core.find(request.method, request.target, request.headers, request.body)
        if isinstance(answer, Unmatched):
            # the diagnosis reads the request against every candidate interaction: on this loop, a
            # big request that matches nothing would hold every other connection's stream
            miss = await asyncio.to_thread(self.core.diagnose, answer)
            await reply.json(404, miss.body())
            self.log(f"{request.shown} -> 404 no match (nearest: {miss.nearest or '-'})")
            return
        await reply.play(answer)
        again = " again" if answer.repeated else ""
        self.log(f"{request.shown} -> {answer.status} {answer.cassette} #{answer.position}{again} ({answer.ending})")


class HttpServer:
    """Serves ``responder`` (or a :class:`CassetteServer`, answered by :class:`ReplayResponder`) over HTTP/1.1.

    ``log`` gets one line per request.
    """

    def __init__(
        self, responder: Responder | CassetteServer, *, log: Callable[[str], None] | None = None,
        stall_seconds: float = STALL_SECONDS, idle_timeout: float = IDLE_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS, body_timeout: float = BODY_TIMEOUT, linger_seconds: float = LINGER_SECONDS,
    ) -> None:
        self.log = log or (lambda line: None)
        if isinstance(responder, CassetteServer):
            responder = ReplayResponder(responder, self.log)
        self.responder: Responder = responder
        self.stall_seconds = stall_seconds
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.body_timeout = body_timeout
        self.linger_seconds = linger_seconds
        #: connections answered 503 because ``max_connections`` were open
        self.turned_away = 0
        self._served = 0
        self._lingering = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port); return the port bound."""
        self._server = await asyncio.start_server(self._connection, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening, close open connections (mid-response ones too) and wait for their tasks."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self._served >= self.max_connections:
                await self._turn_away(reader, writer)
                return
            self._served += 1
            try:
                await self._serve(reader, writer)
            finally:
                self._served -= 1
        finally:
            self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the connection's requests until it closes, or one answer ends it."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        abort = False
        try:
            while True:
                request = await self._read_request(conn, reader, writer)
                if request is None:
                    break
                keep, abort = await self._respond(conn, writer, reader, *request)
                if not keep or conn.our_state is h11.MUST_CLOSE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except (_Closed, ConnectionError, h11.LocalProtocolError):
            abort = True
        except Exception as exc:  # a bug must cost one connection, never the server
            self.log(f"connection dropped: {type(exc).__name__}: {exc}")
            abort = True
        except asyncio.CancelledError:
            # shutting down: a response cut mid-body is reset, so no client takes it for a whole one
            abort = conn.our_state is h11.SEND_BODY
        finally:
            finish(writer, reset=abort)

    async def _turn_away(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer 503 and close: ``max_connections`` are open. Logged the first time only.

        The request is not parsed, only read and dropped until the client closes, for
        ``linger_seconds`` at most; at most ``max_connections`` connections linger so, and one
        more is closed at once: connections over the limit never add up to what ``ulimit -n`` allows.
        """
        self.turned_away += 1
        if self.turned_away == 1:
            self.log(f"{self.max_connections} connections open, the most served at once: further ones are "
                     "answered 503 until one closes (logged once)")
        message = f"the server has {self.max_connections} connections open, its limit; retry when one closes"
        try:
            await self._refuse(h11.Connection(h11.SERVER), writer, 503, message, "dsh_replay_busy", quiet=True)
            if self._lingering < self.max_connections:
                self._lingering += 1
                try:
                    await self._linger(reader, writer)
                finally:
                    self._lingering -= 1
        except (OSError, asyncio.CancelledError):  # the client is gone, or the server is shutting down
            pass
        finally:
            writer.close()

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Drop what the client sends until it closes, for ``linger_seconds`` at most, the answer already sent.

        A socket closed with bytes unread is reset, and a reset can reach the client before it
        has read the answer; once its request is read, the close is a plain FIN.
        """
        if writer.can_write_eof():
            writer.write_eof()  # the answer is whole: the client may close as soon as it has read it
        loop = asyncio.get_running_loop()
        by, dropped = loop.time() + self.linger_seconds, 0
        with contextlib.suppress(asyncio.TimeoutError):
            while dropped < _LINGER_BYTES:
                data = await within(max(by - loop.time(), 0.0), reader.read(READ_SIZE))
                if not data:
                    break
                dropped += len(data)

    async def _read_request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[h11.Request, bytes] | None:
        """The next request and its whole body; None when the client closed, or timed out, between requests."""
        # the whole head by then, however it trickles in; the body has its own deadline, from the head's end
        loop = asyncio.get_running_loop()
        by, late = loop.time() + self.idle_timeout, f"the request did not arrive within {self.idle_timeout:g} s"
        request: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                reason = _QUOTED.sub("", str(exc))
                await self._refuse(conn, writer, exc.error_status_hint, f"not a valid HTTP/1.1 request: {reason}")
                return None
            if event is h11.NEED_DATA:
                data = await self._receive(conn, reader, writer, by, late)
                if data is None or (not data and request is None and conn.their_state is h11.IDLE):
                    return None
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
                by = loop.time() + self.body_timeout
                late = f"the request body did not arrive within {self.body_timeout:g} s"
                if (b"expect", b"100-continue") in [(name, value.lower()) for name, value in event.headers]:
                    # curl waits for this before sending a body over 1 KiB
                    writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_REQUEST_BYTES:
                    await self._refuse(conn, writer, 413, f"request body over {MAX_REQUEST_BYTES} bytes")
                    return None
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed):
                if request is None:
                    return None
                raise _Closed("the client closed the connection mid-request")

    async def _receive(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, by: float,
        late: str,
    ) -> bytes | None:
        """The next bytes (``b""``: the client closed), waiting ``idle_timeout`` at most and never past ``by``.

        None when the wait ran out: the connection is to be closed, after a 408 saying ``late`` if a
        request had begun.
        """
        wait = min(self.idle_timeout, max(by - asyncio.get_running_loop().time(), 0.0))
        try:
            return await within(wait, reader.read(READ_SIZE))
        except asyncio.TimeoutError:
            if conn.their_state is not h11.IDLE or conn.trailing_data[0]:
                await self._refuse(conn, writer, 408, late, "dsh_replay_timeout", quiet=True)
                await self._linger(reader, writer)  # a client still sending would be reset before it read the 408
            return None

    async def _refuse(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, message: str,
        kind: str = "dsh_replay_bad_request", *, quiet: bool = False,
    ) -> None:
        """Answer ``status`` with a JSON error and ``connection: close``; log it unless ``quiet``."""
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        await Reply(conn, None, writer, stall_seconds=0).error(status, kind, message, close=True)
        if not quiet:
            self.log(f"{status} refused: {message}")

    async def _respond(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, reader: asyncio.StreamReader,
        request: h11.Request, body: bytes,
    ) -> tuple[bool, bool]:
        """Answer one request: (keep the connection, reset it)."""
        method, target = request.method.decode("ascii"), request.target.decode("ascii", "replace")
        try:
            shown = f"{method} {Scrubber().uri(target)[0]}"  # what the log shows of the request
        except ValueError as exc:  # urlsplit's: "//[..." is no URI
            await self._refuse(conn, writer, 400, f"the request target is not a URI: {exc}")
            return False, False
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers]
        reply = Reply(conn, reader, writer, stall_seconds=self.stall_seconds)
        try:
            await self.responder.respond(Request(method=method, target=target, headers=headers, body=body,
                                                 shown=shown), reply)
        except DshReplayError as exc:  # a configured matcher that fails: say so to the client, keep serving
            await reply.unwatch()
            if reply.started:
                raise _Closed(str(exc)) from None
            await self._refuse(conn, writer, 500, str(exc), "dsh_replay_error")
            return False, False
        finally:
            await reply.unwatch()
        return reply.keep, reply.reset
