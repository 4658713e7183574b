"""A scripted LLM provider on loopback, for testing streaming code against real sockets.

``ProviderEmulator`` is a small HTTP/1.1 server bound to ``127.0.0.1`` on an
ephemeral port, served from background threads. Because it is a real server,
whatever talks HTTP can use it: ``httpx`` clients in sync or async tests,
provider SDKs, or a subprocess such as a ``pytester`` run (hand it
``emu.base_url``)::

    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat/completions",
                ScriptedResponse.json({"error": {"message": "busy"}}, status=503),
                ScriptedResponse.streaming(sse_body, delay=0.01))
        ... point the adapter at emu.base_url ...
        assert emu.requests[0].headers["authorization"] == "Bearer test"

Design
------
* **Scripts.** ``add(method, path, *responses)`` queues responses for one route
  (the path without its query). They are served in order and the last one
  repeats for every later request, so "503 twice, then a stream" and "always
  503" are both one call. A request with no script gets a 501 whose JSON body
  names the route and the scripted ones.
* **Fragments.** A :class:`ScriptedResponse` is a list of byte fragments. Each is
  written to the socket in its own ``send`` (one HTTP chunk each, by default),
  optionally after a pause, so the client sees the body arrive in exactly these
  pieces - including pieces cut inside CRLF or inside a UTF-8 character
  (:func:`random_fragments`).
* **Endings.** ``end="close"`` finishes the body; ``"truncate"`` closes the
  connection cleanly (FIN) without finishing it, as a proxy that gives up does
  (the chunked body lacks its last chunk); ``"reset"`` aborts the TCP
  connection with an RST (``SO_LINGER`` 0) after the fragments; ``"stall"``
  keeps the connection open, sending nothing, until the client goes away or the
  emulator stops.
* **One connection per request.** Every response says ``Connection: close``, so
  a connection belongs to exactly one exchange and "the client closed the
  connection" is unambiguous. While pausing (``delay`` or ``stall``) the server
  polls the socket; when the client hangs up early, the exchange's
  ``client_closed`` event is set. Without a pause there is no moment to notice,
  so tests of early closing should give the response a delay or a stall.
* **Prompt stop.** Every wait polls a stop flag (every 20 ms), and ``stop()``
  shuts down the sockets of connections still open, so a handler blocked on a
  silent client wakes up too. ``stop()`` returns within a fraction of a second
  whatever the scripts do.

Only the standard library is used (``socketserver`` + ``http.server``).
"""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import struct
import sys
import threading
import time
from collections import deque
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .scripts import (
    End,
    Exchange,
    RecordedRequest,
    ScriptedResponse,
    check_int,
    check_path,
    check_responses,
    check_route,
    check_seconds,
    random_fragments,
    split_by_sizes,
)

__all__ = [
    "End",
    "Exchange",
    "ProviderEmulator",
    "RecordedRequest",
    "ScriptedResponse",
    "random_fragments",
    "split_by_sizes",
]

_POLL = 0.02  # seconds between checks of the stop flag and the client socket
_JOIN_TIMEOUT = 2.0  # per thread, only reached if a handler misbehaves
_REASONS = {529: "Site Overloaded", 599: "Network Connect Timeout Error"}


class ProviderEmulator:
    """A scripted HTTP/1.1 provider on ``127.0.0.1``; see the module docstring.

    Record an adapter's cassettes against it as against the real provider: point
    the adapter's ``base_url`` at :attr:`base_url` and run the tests with
    ``--record-mode=once`` (``examples/cohere/record_with_emulator.py``)::

        with ProviderEmulator() as emu:
            emu.add("POST", "/v2/chat",
                    ScriptedResponse.json({"message": "slow down"}, status=429),
                    ScriptedResponse.streaming(body, fragment_sizes=[173, 61, 402], delay=0.004))
            adapter = CohereAdapter("sk-test-key", base_url=emu.base_url)
            ...  # the first request gets the 429, every later one the stream
            assert emu.requests[0].json()["stream"] is True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[tuple[str, str], deque[ScriptedResponse]] = {}
        self._exchanges: list[Exchange] = []
        self._stopping = threading.Event()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> ProviderEmulator:
        """Bind an ephemeral port and serve from a background thread."""
        if self._server is not None:
            raise RuntimeError("ProviderEmulator is already running")
        self._stopping.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _POLL},
            name=f"ProviderEmulator:{self._server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop every open connection; returns promptly."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
        with self._lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            # Wakes a handler blocked reading from a client that never speaks.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, handler_thread in connections:
            handler_thread.join(_JOIN_TIMEOUT)
        self._server = self._thread = None

    def __enter__(self) -> ProviderEmulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses -----------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running emulator."""
        if self._server is None:
            raise RuntimeError("ProviderEmulator is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url(self, path: str) -> str:
        """The absolute URL of *path* on this emulator."""
        path = check_path(path)
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- scripting -----------------------------------------------------------

    def add(self, method: str, path: str, *responses: ScriptedResponse) -> None:
        """Queue *responses* for ``method path``; the last one repeats for later requests.

        Calling ``add`` again for the same route appends to its queue. *method* is
        DELETE, GET, PATCH, POST or PUT (any case); *path* starts with ``/`` and has no query.
        """
        route = check_route(method, path)
        check_responses(responses)
        with self._lock:
            self._scripts.setdefault(route, deque()).extend(responses)

    def _next_response(self, method: str, path: str) -> tuple[ScriptedResponse, bool]:
        # Called with self._lock held.
        queue = self._scripts.get((method, path))
        if queue:
            return (queue.popleft() if len(queue) > 1 else queue[0]), True
        routes = sorted(f"{m} {p}" for m, p in self._scripts)
        message = (
            f"ProviderEmulator has no scripted response for {method} {path}; "
            f"scripted routes: {', '.join(routes) or 'none'}"
        )
        payload = {"error": {"message": message, "type": "unscripted_route"}}
        return ScriptedResponse.json(payload, status=501), False

    # -- observation ---------------------------------------------------------

    @property
    def exchanges(self) -> list[Exchange]:
        """Every exchange so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._exchanges)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        return [exchange.request for exchange in self.exchanges]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Wait until at least *count* requests arrived; raise ``TimeoutError`` if not."""
        check_int("count", count, 0)
        check_seconds("timeout", timeout)
        deadline = time.monotonic() + timeout
        while len(self.exchanges) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"expected {count} request(s), got {len(self.exchanges)}")
            time.sleep(_POLL)
        return self.requests

    def _begin(self, request: RecordedRequest) -> Exchange:
        # One lock for both steps, so concurrent requests take scripted responses
        # in the same order as they appear in ``exchanges``.
        with self._lock:
            exchange = Exchange(request, *self._next_response(request.method, request.path))
            self._exchanges.append(exchange)
        return exchange


class _Server(socketserver.ThreadingTCPServer):
    # Daemon handler threads: a forgotten stop() must not keep the interpreter alive.
    # stop() joins them itself, after unblocking them.
    daemon_threads = True
    block_on_close = False
    # socketserver's backlog is 5: fifty clients connecting at once would see SYNs dropped and
    # retried a second or more later, a stall that is the emulator's, not the code under test's
    request_queue_size = 128

    def __init__(self, emulator: ProviderEmulator) -> None:
        self.emulator = emulator
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        # Clients vanishing mid-response is the point of the fault tests; an OSError
        # here is expected and a traceback on stderr would only be noise.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A safety net for a connection stop() could not see yet; normal waits poll instead.
    timeout = 60.0
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.emulator._lock:
            self.server.emulator._connections[self.connection] = threading.current_thread()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.emulator._lock:
                self.server.emulator._connections.pop(self.connection, None)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: test output is not the place for an access log."""

    def _serve(self) -> None:
        self.close_connection = True
        split = urlsplit(self.path)
        request = RecordedRequest(
            method=self.command,
            path=split.path,
            query=dict(parse_qsl(split.query, keep_blank_values=True)),
            headers={name.lower(): value for name, value in self.headers.items()},
            body=self._read_body(),
        )
        exchange = self.server.emulator._begin(request)
        try:
            self._play(exchange)
        finally:
            exchange.done.set()

    # One per name in _scripts.METHODS: add() refuses the others (a test checks they agree).
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _play(self, exchange: Exchange) -> None:
        response = exchange.response
        reason = _REASONS.get(response.status) or _phrase(response.status)
        self.send_response(response.status, reason)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(sum(map(len, response.fragments))))
        self.send_header("Connection", "close")
        try:
            self.end_headers()
        except OSError:
            exchange.client_closed.set()
            return
        for index, fragment in enumerate(response.fragments):
            if not self._pause(response.pause_before(index), exchange):
                return
            if not fragment:
                continue  # an empty HTTP chunk would end the body
            frame = b"%x\r\n%s\r\n" % (len(fragment), fragment) if response.chunked else fragment
            if not self._send(frame, exchange):
                return
            exchange.fragments_sent += 1
        if response.end == "close":
            if response.chunked and not self._send(b"0\r\n\r\n", exchange):
                return
            exchange.all_sent.set()
        elif response.end == "truncate":
            exchange.all_sent.set()  # the server closes the socket after the handler returns
        elif response.end == "reset":
            exchange.all_sent.set()
            # Linger 0 makes close() send RST instead of FIN. The real close happens
            # when finish() releases rfile, which still holds the socket.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        else:
            exchange.all_sent.set()
            self._pause(float("inf"), exchange)

    def _send(self, data: bytes, exchange: Exchange) -> bool:
        try:
            self.wfile.write(data)
        except OSError:  # BrokenPipe / ConnectionReset: the client is gone
            exchange.client_closed.set()
            return False
        return True

    def _pause(self, seconds: float, exchange: Exchange) -> bool:
        """Wait *seconds*; ``False`` if the client left or the emulator is stopping."""
        deadline = time.monotonic() + seconds
        stopping = self.server.emulator._stopping
        while not stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            if self._client_gone(min(remaining, _POLL)):
                if not stopping.is_set():  # stop() shutting the socket is not the client
                    exchange.client_closed.set()
                return False
        return False

    def _client_gone(self, timeout: float) -> bool:
        readable, _, _ = select.select([self.connection], [], [], timeout)
        if not readable:
            return False
        try:
            data = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True  # reset by the client
        if data:
            time.sleep(timeout)  # unexpected bytes (not ours to read): avoid a busy loop
        return not data


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
