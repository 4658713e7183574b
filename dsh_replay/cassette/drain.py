"""Did a body end where its reader stopped? Settled at close time, without waiting long.

Many clients stop reading at the provider's terminal event and close the
response without reading the end of the HTTP body: the sync ``openai`` client
breaks out at ``data: [DONE]`` and closes, where the async one drains the rest
first. The server has sent everything by then — only the chunked body's last,
empty chunk is left, on its way or already in the socket — so the recording
would say ``complete: false`` of a stream that was received whole.

So when a recorded response is closed early, the recorder reads once more,
through the same iterator the reader used: if the body ends there, before any
further byte of content, the interaction is complete; if more content comes
(the reader really did abandon the stream), a read times out, the body breaks,
or the transport is one we cannot bound, it stays incomplete and holds exactly
what the reader read. Nothing read here is recorded. The wait is short: sync
reads of the HTTP/1.1 connection are bounded by ``GRACE`` seconds each, async
ones by ``GRACE`` in all (``anyio.move_on_after``, so asyncio and trio alike).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

__all__ = ["GRACE", "ended_async", "ended_sync"]

GRACE = 0.25  # seconds the body's end may take to arrive once the reader has stopped
_EMPTY_READS = 8  # empty pieces tolerated before the end (a transport may yield b"")


def _connection(stream: Any) -> Any | None:
    """The HTTP/1.1 connection under an httpx (or httpx2) response stream, else None."""
    connection_stream = getattr(getattr(stream, "_httpcore_stream", None), "_stream", None)
    connection = getattr(connection_stream, "_connection", None)
    if getattr(connection, "_h11_state", None) is None or getattr(connection, "_network_stream", None) is None:
        return None
    return connection


def _short_reads(connection: Any) -> Callable[[], None]:
    """Bound every socket read of ``connection`` by GRACE; returns the undo."""
    network = connection._network_stream
    original = network.read

    def read(max_bytes: int, timeout: float | None = None) -> bytes:
        return original(max_bytes, timeout=GRACE if timeout is None else min(timeout, GRACE))  # type: ignore[no-any-return]

    network.read = read
    return lambda: setattr(network, "read", original)


def ended_sync(stream: Any, pieces: Iterator[bytes]) -> bool:
    """Does the body end before any more content? Reads at most GRACE per socket read."""
    connection = _connection(stream)
    if connection is None:
        return False
    undo = _short_reads(connection)
    try:
        for _ in range(_EMPTY_READS):
            if next(pieces):
                return False
    except StopIteration:
        return True
    except Exception:  # a read timed out, or the body broke after the reader left
        pass
    finally:
        undo()
    return False


async def ended_async(pieces: AsyncIterator[bytes]) -> bool:
    """Does the body end before any more content, within GRACE seconds?"""
    try:
        import anyio

        with anyio.move_on_after(GRACE):
            for _ in range(_EMPTY_READS):
                if await pieces.__anext__():
                    return False
    except StopAsyncIteration:
        return True
    except Exception:  # no async library anyio knows, or the body broke after the reader left
        pass
    return False
