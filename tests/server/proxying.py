"""The recording proxy in-process, in front of a loopback :class:`ProviderEmulator`: what the tests share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.store import Cassette
from dsh_replay.server.http import HttpServer
from dsh_replay.server.record import RecordingProxy
from dsh_replay.server.upstream import Upstreams
from dsh_replay.testing import ProviderEmulator

GUARD = 10.0  # seconds: a hang guard, never a timing assertion
KEY = "sk-test-proxyClientKey0123456789abcdef"
CHAT = "/v1/chat/completions"
TEXT = Path(__file__).resolve().parents[2] / "cassettes" / "openai" / "text.yaml"
T = TypeVar("T")


def text_case() -> tuple[bytes, bytes]:
    """The request and the streamed body of the bundled openai/text case."""
    interaction = Cassette.load(TEXT).interactions[0]
    return bytes(interaction.request.body), interaction.body


@dataclass
class Proxy:
    url: str
    folder: Path
    proxy: RecordingProxy
    server: HttpServer
    log: list[str] = field(default_factory=list)
    stopped: bool = False

    def base(self, name: str) -> str:
        """The base URL a client records ``name`` through (the path after it is the provider's)."""
        return f"{self.url}/_dsh/{name}/-"

    async def stop(self) -> None:
        """Stop as ``serve`` stops on a signal: open connections closed, then the cassettes written."""
        if self.stopped:
            return
        self.stopped = True
        self.proxy.stopping()
        await asyncio.wait_for(self.server.close(), GUARD)
        await asyncio.wait_for(self.proxy.close(), GUARD)


@asynccontextmanager
async def proxying(folder: Path, emu: ProviderEmulator, **options: Any) -> AsyncIterator[Proxy]:
    """A recording proxy for ``folder``, the emulator as the openai route's upstream."""
    log: list[str] = []
    upstream = options.pop("upstreams", None) or Upstreams.parse([f"openai={emu.base_url}"], insecure=True)
    proxy = RecordingProxy(folder=folder, upstreams=upstream, log=log.append, routes=RouteTable.load(), **options)
    server = HttpServer(proxy, log=log.append, stall_seconds=GUARD)
    port = await server.start("127.0.0.1", 0)
    running = Proxy(f"http://127.0.0.1:{port}", folder, proxy, server, log)
    try:
        yield running
    finally:
        await running.stop()


def run(coro: Callable[[], Awaitable[T]], guard: float = GUARD * 3) -> T:
    async def guarded() -> T:
        return await asyncio.wait_for(coro(), guard)

    return asyncio.run(guarded())


async def stream(client: httpx.AsyncClient, url: str, body: bytes, **headers: str) -> tuple[int, list[bytes]]:
    """POST ``body`` with a key, read the response raw: (status, the pieces as they arrived)."""
    sent = {"authorization": f"Bearer {KEY}", "content-type": "application/json", **headers}
    async with client.stream("POST", url, content=body, headers=sent) as response:
        return response.status_code, [piece async for piece in response.aiter_raw()]
