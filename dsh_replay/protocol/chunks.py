"""StreamChunk values: the wire protocol between an adapter and the harness.

Each chunk and block is a frozen, slotted, keyword-only dataclass with
snake_case attributes; ``_jsonl`` maps them to the camelCase JSON of the seed.
Constructors check what a single value can know about itself (types, known
literals, non-negative indexes and counts); rules that need the whole sequence
(P2-P12) belong to the validator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NewType

__all__ = [
    "BLOCK_TYPES",
    "FINISH_KINDS",
    "Block",
    "BlockEnd",
    "BlockStart",
    "BlockType",
    "CallId",
    "Finish",
    "FinishKind",
    "FinishReason",
    "ReasoningBlock",
    "ReasoningDelta",
    "StreamChunk",
    "TextBlock",
    "TextDelta",
    "ToolCallBlock",
    "ToolCallDelta",
    "Usage",
    "UsageChunk",
]

#: The provider's own tool-call id, typed so it is not confused with any other
#: string (the seed's ``CallId('call-123')`` factory). Zero cost at run time.
CallId = NewType("CallId", str)

BlockType = Literal["text", "tool-call", "reasoning"]
FinishKind = Literal["stop", "tool-calls"]
BLOCK_TYPES: frozenset[str] = frozenset(("text", "tool-call", "reasoning"))
FINISH_KINDS: frozenset[str] = frozenset(("stop", "tool-calls"))


def _check_index(index: object) -> None:
    if type(index) is not int or index < 0:
        raise TypeError(f"index must be an int >= 0, got {index!r}")


def _check_str(name: str, value: object) -> None:
    if type(value) is not str:
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")


def _check_count(name: str, value: object, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if type(value) is not int or value < 0:
        raise TypeError(f"{name} must be an int >= 0, got {value!r}")


# --- blocks -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TextBlock:
    """A complete text block, carried by ``block-end``."""

    text: str

    def __post_init__(self) -> None:
        _check_str("text", self.text)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallBlock:
    """A complete tool call; ``arguments`` is the raw JSON text the model wrote."""

    id: CallId
    name: str
    arguments: str

    def __post_init__(self) -> None:
        _check_str("id", self.id)
        _check_str("name", self.name)
        _check_str("arguments", self.arguments)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningBlock:
    """A complete reasoning block; ``signature`` is the provider's opaque proof, if any."""

    text: str
    signature: str | None = None

    def __post_init__(self) -> None:
        _check_str("text", self.text)
        if self.signature is not None:
            _check_str("signature", self.signature)


Block = TextBlock | ToolCallBlock | ReasoningBlock

# --- values -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one generation, as the provider reported them."""

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __post_init__(self) -> None:
        _check_count("input_tokens", self.input_tokens)
        _check_count("output_tokens", self.output_tokens)
        _check_count("cached_input_tokens", self.cached_input_tokens, optional=True)
        _check_count("reasoning_tokens", self.reasoning_tokens, optional=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishReason:
    """Why the generation ended: ``stop``, or ``tool-calls`` to ask for tool execution.

    ``raw`` keeps the provider's own reason string (``"length"``, ``"end_turn"``…).
    """

    kind: FinishKind
    raw: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FINISH_KINDS:
            raise ValueError(f"kind must be one of {sorted(FINISH_KINDS)}, got {self.kind!r}")
        if self.raw is not None:
            _check_str("raw", self.raw)


# --- chunks -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockStart:
    """Opens block ``index`` of type ``block_type``."""

    index: int
    block_type: BlockType

    def __post_init__(self) -> None:
        _check_index(self.index)
        if self.block_type not in BLOCK_TYPES:
            raise ValueError(
                f"block_type must be one of {sorted(BLOCK_TYPES)}, got {self.block_type!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of the text of the open text block ``index``."""

    index: int
    text: str

    def __post_init__(self) -> None:
        _check_index(self.index)
        _check_str("text", self.text)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta:
    """A piece of the text of the open reasoning block ``index``."""

    index: int
    text: str

    def __post_init__(self) -> None:
        _check_index(self.index)
        _check_str("text", self.text)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A raw slice of a tool call's JSON arguments (never parsed on the way)."""

    index: int
    id: CallId
    name: str
    arguments_delta: str

    def __post_init__(self) -> None:
        _check_index(self.index)
        _check_str("id", self.id)
        _check_str("name", self.name)
        _check_str("arguments_delta", self.arguments_delta)


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockEnd:
    """Closes block ``index`` and carries the complete block."""

    index: int
    block: Block

    def __post_init__(self) -> None:
        _check_index(self.index)
        if not isinstance(self.block, (TextBlock, ToolCallBlock, ReasoningBlock)):
            raise TypeError(f"block must be a TextBlock, ToolCallBlock or ReasoningBlock, got {self.block!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageChunk:
    """Token usage; comes once, after every block is closed, right before ``finish``."""

    usage: Usage

    def __post_init__(self) -> None:
        if not isinstance(self.usage, Usage):
            raise TypeError(f"usage must be a Usage, got {self.usage!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """The last chunk of every stream."""

    reason: FinishReason

    def __post_init__(self) -> None:
        if not isinstance(self.reason, FinishReason):
            raise TypeError(f"reason must be a FinishReason, got {self.reason!r}")


StreamChunk = BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish
