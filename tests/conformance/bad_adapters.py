"""Adapters that get the protocol wrong on purpose, for the suite to catch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from dsh_replay import (
    BlockEnd,
    Finish,
    FinishReason,
    GenerateOptions,
    StreamChunk,
    TextBlock,
    TextDelta,
)
from dsh_replay.adapters import OpenAIChatAdapter


class DropsBlockEnd(OpenAIChatAdapter):
    """Forgets to close its blocks."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        async for chunk in super().stream(options):
            if not isinstance(chunk, BlockEnd):
                yield chunk


class SwallowsErrors(OpenAIChatAdapter):
    """Turns every failure into a clean stop."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        finished = False
        try:
            async for chunk in super().stream(options):
                finished = finished or isinstance(chunk, Finish)
                yield chunk
        except Exception:
            if not finished:
                yield Finish(reason=FinishReason(kind="stop"))


class SendsExtraField(OpenAIChatAdapter):
    """Right stream, but a request body of its own shape."""

    def body(self, options: GenerateOptions) -> dict[str, Any]:
        return {**super().body(options), "user": "conformance"}


class EndsQuietlyOnErrors(OpenAIChatAdapter):
    """Stops yielding on a failure, with no error and no finish."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        try:
            async for chunk in super().stream(options):
                yield chunk
        except Exception:
            return


class RenamesTheStory(OpenAIChatAdapter):
    """Right protocol, other text: every golden differs."""

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        async for chunk in super().stream(options):
            if isinstance(chunk, TextDelta):
                chunk = TextDelta(index=chunk.index, text=chunk.text.upper())
            elif isinstance(chunk, BlockEnd) and isinstance(chunk.block, TextBlock):
                chunk = BlockEnd(index=chunk.index, block=TextBlock(text=chunk.block.text.upper()))
            yield chunk
