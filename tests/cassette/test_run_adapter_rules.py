"""``run_adapter`` checks every chunk against the rules: live when told of each violation, else after the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dsh_replay import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    Message,
    StreamChunk,
    TextBlock,
    TextDelta,
    Usage,
    UsageChunk,
)
from dsh_replay.cassette.replay import run_adapter
from dsh_replay.protocol.validator import Violation

OPTIONS = GenerateOptions(model="m", messages=[Message(role="user", content="hi")])
BROKEN: list[StreamChunk] = [
    TextDelta(index=0, text="a delta before its block opened"),
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="ok"),
    BlockEnd(index=0, block=TextBlock(text="something else")),
    UsageChunk(usage=Usage(input_tokens=1, output_tokens=1)),
]  # and no finish


class Scripted:
    """An adapter that yields ``chunks`` and then raises ``error``, noting how far it got."""

    route = "scripted"

    def __init__(self, chunks: list[StreamChunk], error: Exception | None = None) -> None:
        self.chunks, self.error, self.yielded = chunks, error, 0

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        for chunk in self.chunks:
            self.yielded += 1
            yield chunk
            await asyncio.sleep(0)
        if self.error is not None:
            raise self.error


def _found(violations: list[Violation]) -> list[tuple[str, int]]:
    return [(v.rule, v.position) for v in violations]


def test_the_rules_find_the_same_violations_after_the_stream_as_live() -> None:
    told: list[tuple[Violation, int]] = []
    adapter = Scripted(BROKEN)
    live = asyncio.run(run_adapter(adapter, OPTIONS, on_violation=lambda v: told.append((v, adapter.yielded))))
    after = asyncio.run(run_adapter(Scripted(BROKEN), OPTIONS))
    assert _found(after.violations) == _found(live.violations)
    assert {rule for rule, _ in _found(after.violations)} >= {"P11"}  # the missing finish, found at the end
    assert len(after.violations) >= 3
    # live: each violation is told while the stream runs, as soon as its chunk is checked
    first, when = told[0]
    assert (first.position, when) == (0, 1)


@pytest.mark.parametrize("tell", [False, True])
def test_a_stream_that_raises_is_checked_up_to_where_it_stopped_without_the_end_of_stream_rule(tell: bool) -> None:
    chunks: list[StreamChunk] = [BlockStart(index=0, block_type="text"), TextDelta(index=0, text="x")]
    told: list[Any] = []
    outcome = asyncio.run(run_adapter(Scripted(chunks, RuntimeError("boom")), OPTIONS,
                                      on_violation=told.append if tell else None))
    assert isinstance(outcome.raised, RuntimeError)
    assert outcome.chunks == chunks
    assert outcome.violations == []  # an open block is no violation when the stream was cut by an error
    finished = asyncio.run(run_adapter(Scripted([*chunks, Finish(reason=FinishReason(kind="stop"))]), OPTIONS))
    assert [v.rule for v in finished.violations]  # the same blocks left open at a finish break a rule
