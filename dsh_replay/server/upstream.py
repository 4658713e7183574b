"""Where the recording proxy sends a request, and what goes with it.

The upstreams are given on the command line: ``--upstream URL`` for one
provider, or one per route, ``--upstream openai=https://api.openai.com``. A
request picks a route with the header ``x-dsh-replay-route: ROUTE`` or with
the first part of its cassette name (``/_dsh/openai/text/-/...``); a shipped
route nobody gave an upstream for goes to its provider's public address
(:data:`PUBLIC_UPSTREAMS`). The request's own path follows the upstream's
(``https://api.openai.com`` + ``/v1/chat/completions``), as it followed the
client's base URL. The host the client named never counts: the proxy sends
nowhere but to an upstream it was given or a shipped route's provider, so it
is no open proxy.

An upstream must be ``https://``: the client's credential goes along.
``allow_insecure`` (``--allow-insecure-upstream``) lets ``http://`` through,
for a loopback emulator in tests or a local Ollama.

Forwarded headers are the client's, less the hop-by-hop ones, ``host`` and
``content-length`` (set for the upstream), and ours. ``accept-encoding`` is
replaced by ``identity``: an uncompressed body is what the secret scan can
read and what the cassette keeps readable, and every client takes one.

The request goes out through :class:`UpstreamTransport`: httpx's requests and
responses over httpcore's connection pool, as ``httpx.AsyncHTTPTransport``
sends them, on connections of asyncio's own (see below) rather than anyio's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import select
import ssl
from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from ..cassette.timeouts import within
from ..errors import ConfigError
from .replay import SELECT_HEADER

__all__ = ["ENDED", "PUBLIC_UPSTREAMS", "READ_AHEAD", "ROUTE_HEADER", "UpstreamTransport", "Upstreams", "forwarded_headers",
           "upstream_url"]

#: the request header that picks the route (and so the upstream) of a request
ROUTE_HEADER = "x-dsh-replay-route"

#: each shipped route's provider, as an origin: the client's path (``/v1/...``) follows it
PUBLIC_UPSTREAMS: Mapping[str, str] = {
    "openai": "https://api.openai.com",
    "openai-responses": "https://api.openai.com",
    "deepseek": "https://api.deepseek.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://localhost:11434",
}

_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", SELECT_HEADER, ROUTE_HEADER,
})


def _checked(url: str, where: str, *, insecure: bool) -> str:
    """``url`` as an upstream, without a trailing slash; a :class:`ConfigError` saying what is wrong."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as exc:
        raise ConfigError(f"{where}: {url!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: {url!r} is not an http(s) URL such as https://api.openai.com")
    if "@" in parts.netloc:
        raise ConfigError(f"{where}: {parts.scheme}://…@{parts.hostname}: a credential in the URL would be sent "
                          "with every request; the client sends its own")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: {url!r} has a query or fragment; give the base URL only")
    if parts.scheme == "http" and not insecure:
        raise ConfigError(f"{where}: {url} is not https://, and the client's credential would cross the network "
                          "in clear; use https://, or add --allow-insecure-upstream for a loopback emulator "
                          "or a local server")
    return url.rstrip("/")


@dataclass(frozen=True, slots=True)
class Upstreams:
    """The upstream of each route, and the one for every request (``default``), if given."""

    default: str | None = None
    by_route: Mapping[str, str] = field(default_factory=dict)
    insecure: bool = False

    @classmethod
    def parse(cls, values: Sequence[str], *, insecure: bool = False) -> Upstreams:
        """``--upstream`` values: ``URL`` or ``ROUTE=URL`` each."""
        default: str | None = None
        by_route: dict[str, str] = {}
        for value in values:
            route, equals, url = value.partition("=")
            if equals and "://" not in route:
                route = route.strip()
                if not route or route in by_route:
                    raise ConfigError(f"--upstream {value}: " + ("a route before '='" if not route else
                                      f"route {route!r} has two upstreams"))
                by_route[route] = _checked(url.strip(), f"--upstream {route}", insecure=insecure)
            elif default is not None:
                raise ConfigError(f"--upstream {value}: a second upstream for every request; give each its route, "
                                  "--upstream ROUTE=URL")
            else:
                default = _checked(value.strip(), "--upstream", insecure=insecure)
        return cls(default, by_route, insecure)

    def routes(self) -> list[str]:
        """The routes a request may pick."""
        return sorted({*self.by_route, *PUBLIC_UPSTREAMS})

    def pick(self, name: str, headers: Sequence[tuple[str, str]]) -> tuple[str | None, str]:
        """(the route, the upstream) of a request recorded as ``name``; a :class:`ConfigError` says why none."""
        asked = next((value.strip() for key, value in headers if key.lower() == ROUTE_HEADER), None)
        first = name.split("/", 1)[0]
        route = asked or (first if first in self.by_route or first in PUBLIC_UPSTREAMS else None)
        if route is not None and route in self.by_route:
            return route, self.by_route[route]
        if asked is not None and asked not in PUBLIC_UPSTREAMS and self.default is None:
            raise ConfigError(f"{ROUTE_HEADER}: {asked!r} has no upstream; routes: {', '.join(self.routes())}")
        if self.default is not None:
            return route, self.default
        if route is not None:
            return route, _checked(PUBLIC_UPSTREAMS[route], f"the {route} provider", insecure=self.insecure)
        if len(self.by_route) == 1:
            return next(iter(self.by_route.items()))
        raise ConfigError(
            f"cassette {name!r} names no route, so it is not known which provider to send it to: start its name "
            f"with one (/_dsh/openai/{name}/-/...), send the header {ROUTE_HEADER}: ROUTE, or start the server "
            f"with --upstream URL; routes: {', '.join(self.routes())}"
        )


def upstream_url(upstream: str, path: str, query: str) -> str:
    """The URL the request goes to: the upstream, then the request's path and query."""
    return upstream + (path if path.startswith("/") else f"/{path}") + (f"?{query}" if query else "")


def forwarded_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers as they go upstream (see the module docstring)."""
    kept = [(name, value) for name, value in headers if name.lower() not in _NOT_FORWARDED]
    return [*kept, ("accept-encoding", "identity")]


# -- the upstream's connections ------------------------------------------------------------------
#
# httpcore reads its connections through anyio by default, 64 KiB at a time: each read
# arms a cancel scope, pauses and resumes the socket's reading (two epoll calls) and
# cuts asyncio's receive (up to 256 KiB) into 64 KiB pieces, copying the rest each
# time; at a 10 MB stream, a third of the relay's time. The connections here are
# asyncio's own: a read hands over what one receive got, whole (h11 takes any size),
# and reading pauses only when READ_AHEAD bytes wait unread (a client that reads slowly).

#: bytes received ahead of the relay before the upstream socket stops being read
READ_AHEAD = 1024 * 1024
#: the request extension called the moment the response body's end is read, before whoever reads the
#: body hears of it: the proxy passes the end to its client then, rather than after the recorder has
#: joined the body it holds (milliseconds for megabytes)
ENDED = "dsh_replay.ended"


class _Socket(asyncio.Protocol):
    """What arrived on one upstream connection, each receive whole, until :class:`_Stream` reads it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.waiting = 0  # bytes in ``chunks``
        self.ended = False  # the upstream's FIN, or the connection lost
        self.error: Exception | None = None
        self.reader: asyncio.Future[bool] | None = None  # a read waiting for bytes
        self.writable: asyncio.Future[None] | None = None  # set while the transport's buffer is full
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(bytes(data))  # bytes as they are; the proactor loop may give a bytearray
        self.waiting += len(data)
        if self.waiting >= READ_AHEAD and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self.wake(True)

    def eof_received(self) -> bool:
        self.ended = True
        self.wake(True)
        return False  # the transport closes: a client sends nothing once the server has ended

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = self.error or exc
        self.wake(True)
        self.resume_writing()

    def pause_writing(self) -> None:
        self.writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.writable is not None and not self.writable.done():
            self.writable.set_result(None)
        self.writable = None

    def wake(self, arrived: bool) -> None:  # False: the read waiting has waited its timeout
        if self.reader is not None and not self.reader.done():
            self.reader.set_result(arrived)

    def take(self) -> bytes:
        data = self.chunks.popleft()
        self.waiting -= len(data)
        if self.paused and self.waiting < READ_AHEAD // 2 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data


class _Stream(httpcore.AsyncNetworkStream):
    """One upstream connection for httpcore: a read returns what one receive got, whole, however much was asked."""

    def __init__(self, transport: asyncio.Transport, socket: _Socket) -> None:
        self.transport, self.socket = transport, socket
        self.closed = False

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        socket = self.socket
        if not socket.chunks and not socket.ended and not self.closed:
            loop = asyncio.get_running_loop()
            socket.reader = loop.create_future()
            timer = loop.call_later(timeout, socket.wake, False) if timeout is not None else None
            try:
                if not await socket.reader:
                    raise httpcore.ReadTimeout(f"the upstream sent nothing for {timeout:g} s")
            finally:
                socket.reader = None
                if timer is not None:
                    timer.cancel()
        if socket.chunks:
            return socket.take()
        if self.closed:
            raise httpcore.ReadError("the connection was closed")
        if socket.error is not None:
            raise httpcore.ReadError(str(socket.error) or type(socket.error).__name__) from socket.error
        return b""  # the upstream's end of file

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self.closed or self.transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self.transport.write(buffer)
        if self.socket.writable is not None:
            try:
                await within(timeout, asyncio.shield(self.socket.writable))
            except asyncio.TimeoutError:
                raise httpcore.WriteTimeout(f"the upstream took nothing for {timeout:g} s") from None
        if self.socket.error is not None:
            raise httpcore.WriteError(str(self.socket.error)) from self.socket.error

    async def aclose(self) -> None:
        self.closed = True
        self.transport.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            transport = await within(
                timeout, loop.start_tls(self.transport, self.socket, ssl_context, server_hostname=server_hostname))
        except asyncio.TimeoutError:
            self.transport.abort()
            raise httpcore.ConnectTimeout(f"no TLS handshake with the upstream within {timeout:g} s") from None
        except (OSError, ssl.SSLError) as exc:
            self.transport.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        assert isinstance(transport, asyncio.Transport)
        self.socket.transport = transport
        return _Stream(transport, self.socket)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # asked of an idle pooled connection: has the upstream closed it (or spoken)?
            return self.socket.ended or bool(self.socket.chunks) or _readable(self.transport.get_extra_info("socket"))
        return self.transport.get_extra_info({"client_addr": "sockname", "server_addr": "peername"}.get(info, info))


def _is_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host) is not None
    except ValueError:
        return False


def _readable(sock: Any) -> bool:
    fileno = sock.fileno() if sock is not None else -1
    return fileno < 0 or bool(select.select([fileno], [], [], 0)[0])


class _Backend(httpcore.AsyncNetworkBackend):
    """Opens :class:`_Stream` connections (asyncio only, as the server runs on asyncio)."""

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        # as anyio does: a name with IPv6 and IPv4 addresses tries the next after 250 ms (RFC 8305);
        # an address has nothing to race, and the race costs a task and a turn of the loop
        delay = None if _is_address(host) else 0.25
        opening = asyncio.get_running_loop().create_connection(
            _Socket, host, port, local_addr=local, happy_eyeballs_delay=delay)
        return await self._opened(opening, timeout, socket_options)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._opened(asyncio.get_running_loop().create_unix_connection(_Socket, path), timeout,
                                  socket_options)

    async def _opened(
        self, opening: Awaitable[tuple[asyncio.BaseTransport, asyncio.BaseProtocol]], timeout: float | None,
        socket_options: Iterable[Any] | None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            transport, socket = await within(timeout, opening)
        except asyncio.TimeoutError:
            raise httpcore.ConnectTimeout(f"no connection to the upstream within {timeout:g} s") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        assert isinstance(transport, asyncio.Transport) and isinstance(socket, _Socket)
        for option in socket_options or ():
            transport.get_extra_info("socket").setsockopt(*option)
        return _Stream(transport, socket)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _httpx_error(exc: Exception, request: httpx.Request) -> Exception:
    """httpx's exception for httpcore's ``exc`` (the same name: httpx's transport maps them one to one)."""
    for kind in type(exc).__mro__:
        mapped = getattr(httpx, kind.__name__, None)
        if isinstance(mapped, type) and issubclass(mapped, httpx.TransportError):
            return mapped(str(exc), request=request)
    return exc


class _Body(httpx.AsyncByteStream):
    """A response body as httpcore reads it, failures as httpx's exceptions; its end told to ``ended`` first."""

    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self.stream, self.request = stream, request
        self.pieces = stream.__aiter__()
        self.ended: Callable[[], object] | None = request.extensions.get(ENDED)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.pieces.__anext__()
        except StopAsyncIteration:
            if self.ended is not None:
                self.ended()
            raise
        except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise _httpx_error(exc, self.request) from exc

    async def aclose(self) -> None:
        close = getattr(self.stream, "aclose", None)
        if close is not None:
            await close()


class UpstreamTransport(httpx.AsyncBaseTransport):
    """httpx's transport to the upstreams, on :class:`_Backend`; no pool limit (the server's connection cap is one)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        keep = httpx.Limits()  # httpx's: idle connections kept, and for how long
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(), max_connections=None,
            max_keepalive_connections=keep.max_keepalive_connections, keepalive_expiry=keep.keepalive_expiry,
            network_backend=_Backend())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = httpcore.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                           target=request.url.raw_path)
        sent = httpcore.Request(request.method, url, headers=request.headers.raw, content=request.stream,
                                extensions=request.extensions)
        try:
            response = await self.pool.handle_async_request(sent)
        except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError,
                httpcore.UnsupportedProtocol) as exc:
            raise _httpx_error(exc, request) from exc
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(response.status, headers=response.headers, stream=_Body(response.stream, request),
                              extensions=response.extensions)

    async def aclose(self) -> None:
        await self.pool.aclose()
