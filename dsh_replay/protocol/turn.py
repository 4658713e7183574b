"""Assemble a chunk sequence into the turn an agent loop would build."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .chunks import (
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from .jsonl import chunk_from_json, loads_json

__all__ = ["ToolCall", "Turn", "collect"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A finished tool call: raw ``arguments`` text and, when it is a JSON object, ``parsed``."""

    id: CallId
    name: str
    arguments: str
    parsed: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        """True when the arguments parsed as a JSON object."""
        return self.parsed is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """What one generation produced, assembled from its ``block-end`` chunks."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    blocks: tuple[TextBlock | ToolCallBlock | ReasoningBlock, ...] = field(default=())
    usage: Usage | None = None
    finish_reason: FinishReason | None = None


def _parse_arguments(arguments: str) -> dict[str, Any] | None:
    # exact, not orjson: an id like 12345678901234567890123 must not come back as a float
    try:
        value = loads_json(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


_CHUNK_TYPES = (BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd, UsageChunk, Finish)
_CHUNK_CLASSES = frozenset(_CHUNK_TYPES)


def _chunk(item: object, position: int) -> StreamChunk:
    """``item`` as a chunk: its JSON dict parsed; anything else that is no chunk refused."""
    if isinstance(item, Mapping):
        try:
            return chunk_from_json(item)
        except ValueError as exc:
            raise ValueError(f"collect(): the chunk at position {position} is not a valid chunk: {exc}") from None
    if isinstance(item, _CHUNK_TYPES):
        return item  # a subclass of a chunk class
    raise TypeError(
        f"collect() takes StreamChunk objects or their JSON dicts; "
        f"the item at position {position} is {type(item).__name__} {item!r:.60}"
    )


def collect(chunks: Iterable[StreamChunk | Mapping[str, Any]]) -> Turn:
    """Build the :class:`Turn` of a chunk sequence (complete blocks only).

    Chunks may be objects or their JSON dicts, as for the validator; a dict that
    is no valid chunk raises ``ValueError`` and any other value ``TypeError``,
    both naming the position.
    """
    blocks: list[TextBlock | ToolCallBlock | ReasoningBlock] = []
    usage: Usage | None = None
    reason: FinishReason | None = None
    for position, chunk in enumerate(chunks):
        if type(chunk) not in _CHUNK_CLASSES:
            chunk = _chunk(chunk, position)
        if type(chunk) is BlockEnd:
            blocks.append(chunk.block)
        elif type(chunk) is UsageChunk:
            usage = chunk.usage
        elif type(chunk) is Finish:
            reason = chunk.reason
    return Turn(
        text="".join(b.text for b in blocks if type(b) is TextBlock),
        reasoning="".join(b.text for b in blocks if type(b) is ReasoningBlock),
        tool_calls=tuple(
            ToolCall(id=b.id, name=b.name, arguments=b.arguments, parsed=_parse_arguments(b.arguments))
            for b in blocks
            if type(b) is ToolCallBlock
        ),
        blocks=tuple(blocks),
        usage=usage,
        finish_reason=reason,
    )
