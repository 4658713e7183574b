"""The proxy's upstream transport: httpx over httpcore, on asyncio connections of its own.

Each test runs a small HTTP/1.1 server on loopback (plain or TLS, a
certificate made for the test), so what the transport does on the socket is
what is checked: TLS, pooled connections the server closed, a body read in
pieces while reading pauses and resumes, failures mapped to httpx's
exceptions. Waits are hang guards, never timings.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from dsh_replay.server import upstream
from dsh_replay.server.upstream import UpstreamTransport

from .proxying import GUARD, run

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _request(reader: asyncio.StreamReader) -> bool:
    """Read one request (head and body); False when the client closed instead."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return False
    length = next((int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                   if line.startswith(b"content-length:")), 0)
    await reader.readexactly(length)
    return True


def _chunked(pieces: list[bytes]) -> bytes:
    frames = b"".join(b"%x\r\n%b\r\n" % (len(piece), piece) for piece in pieces)
    return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + frames + b"0\r\n\r\n"


@asynccontextmanager
async def serving(handler: Handler, context: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """``handler`` serving each connection on loopback: the base URL; every connection closed at the end."""
    tasks: set[asyncio.Task[None]] = set()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if context else 'http'}://127.0.0.1:{port}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def _certificate(folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(the server's context, a client's that trusts it) for a certificate of 127.0.0.1 made now."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                       critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert, secret = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    secret.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, secret)
    return server, ssl.create_default_context(cafile=str(cert))


async def _get(client: httpx.AsyncClient, url: str) -> list[bytes]:
    async with client.stream("POST", url, content=b"{}") as response:
        assert response.status_code == 200
        return [piece async for piece in response.aiter_raw()]


def test_a_tls_upstream_streams_through_and_its_connection_is_kept_for_the_next_request(tmp_path: Path) -> None:
    server_context, client_context = _certificate(tmp_path)
    pieces = [b"data: one\n\n", b"data: two\n\n"]
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        while await _request(reader):
            writer.write(_chunked(pieces))
            await writer.drain()

    async def scenario() -> list[list[bytes]]:
        async with serving(handler, server_context) as url, \
                httpx.AsyncClient(transport=UpstreamTransport(client_context), timeout=GUARD) as client:
            return [await _get(client, url), await _get(client, url)]

    got = run(scenario)
    assert [b"".join(body) for body in got] == [b"".join(pieces)] * 2
    assert connections == [0]  # one TLS connection, kept alive for the second request


def test_a_pooled_connection_the_upstream_closed_is_not_used_again() -> None:
    connections: list[int] = []
    closed = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        if await _request(reader):  # answered as if kept alive, then closed
            writer.write(_chunked([b"hello"]))
            await writer.drain()
        writer.close()
        await writer.wait_closed()
        closed.set()

    async def scenario() -> list[list[bytes]]:
        async with serving(handler) as url, httpx.AsyncClient(transport=UpstreamTransport(), timeout=GUARD) as client:
            first = await _get(client, url)
            await asyncio.wait_for(closed.wait(), GUARD)
            transport = client._transport
            assert isinstance(transport, UpstreamTransport)
            for _ in range(int(GUARD / 0.01)):  # a hang guard: until the upstream's end has reached the pool
                if all(connection.has_expired() for connection in transport.pool.connections):
                    break
                await asyncio.sleep(0.01)
            return [first, await _get(client, url)]

    assert run(scenario) == [[b"hello"], [b"hello"]]
    assert connections == [0, 1]


def test_a_long_body_comes_whole_while_reading_pauses_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "READ_AHEAD", 4096)  # pause at every read that lags
    pieces = [bytes([n % 251]) * 65536 for n in range(48)]  # 3 MiB

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await _request(reader):
            writer.write(_chunked(pieces))
            await writer.drain()

    async def scenario() -> bytes:
        async with serving(handler) as url, httpx.AsyncClient(transport=UpstreamTransport(), timeout=GUARD) as client:
            got = bytearray()
            async with client.stream("POST", url, content=b"{}") as response:
                async for piece in response.aiter_raw():
                    got += piece
                    await asyncio.sleep(0)  # the server's bytes pile up meanwhile: reading pauses
            return bytes(got)

    assert run(scenario) == b"".join(pieces)


@pytest.mark.parametrize("failure", ["refused", "silent"])
def test_failures_are_httpx_s_exceptions(failure: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _request(reader)
        await reader.read()  # nothing sent back until the client gives up

    async def scenario() -> BaseException:
        async with serving(handler) as url, httpx.AsyncClient(transport=UpstreamTransport()) as client:
            if failure == "refused":
                listening = await asyncio.start_server(handler, "127.0.0.1", 0)
                port = listening.sockets[0].getsockname()[1]
                listening.close()
                await listening.wait_closed()
                url = f"http://127.0.0.1:{port}"
            with pytest.raises(httpx.TransportError) as caught:
                await client.post(url, content=b"{}", timeout=httpx.Timeout(GUARD, read=0.05))
            return caught.value

    caught = run(scenario)
    assert type(caught) is {"refused": httpx.ConnectError, "silent": httpx.ReadTimeout}[failure]
