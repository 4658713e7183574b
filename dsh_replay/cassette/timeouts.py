"""Awaiting with a time limit, without the task ``asyncio.wait_for`` makes for each wait on Python 3.11.

A server's reads, the proxy's connections and ``check``'s cases each wait with a
limit, many times a second; a task per wait costs a turn of the event loop and
a good part of a small request's time.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


async def within(seconds: float | None, work: Awaitable[T]) -> T:
    """``await work``, cancelled after ``seconds`` (None: no limit) with :class:`asyncio.TimeoutError`."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)  # pragma: no cover - Python 3.10
