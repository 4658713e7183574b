"""The validator's state: the phase machine as data, and what a stream has shown so far.

As in h11's ``_state.py``, the phases and the steps between them are a table,
``TRANSITIONS`` (phase x chunk type -> next phase, and the rule an illegal step
breaks), not code: the order rules P8/P9/P11 can be read off it. Everything
else the rules need to remember lives in one :class:`StreamState`, which the
checks of ``_rules`` read and its records update.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .chunks import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UsageChunk,
)
from .violation import Violation

__all__ = [
    "AFTER_USAGE",
    "BLOCK_CHUNKS",
    "CHUNK_KINDS",
    "CHUNK_TYPE",
    "DONE",
    "OK",
    "PHASES",
    "STREAMING",
    "TRANSITIONS",
    "Check",
    "Folded",
    "Found",
    "OpenBlock",
    "Step",
    "StreamState",
    "found",
]

# -- phases ------------------------------------------------------------------------

#: blocks come and go; no usage yet
STREAMING: Final = "streaming"
#: usage has come; only finish may follow
AFTER_USAGE: Final = "after-usage"
#: finish has come; nothing may follow
DONE: Final = "done"
PHASES: Final = (STREAMING, AFTER_USAGE, DONE)

#: the wire ``type`` of each chunk class
CHUNK_TYPE: Final[dict[type, str]] = {
    BlockStart: "block-start",
    TextDelta: "text-delta",
    ReasoningDelta: "reasoning-delta",
    ToolCallDelta: "tool-call-delta",
    BlockEnd: "block-end",
    UsageChunk: "usage",
    Finish: "finish",
}
CHUNK_KINDS: Final = frozenset(CHUNK_TYPE.values())
BLOCK_CHUNKS: Final = ("block-start", "text-delta", "reasoning-delta", "tool-call-delta", "block-end")

#: what a check found: (position, one-line message) of each violation; empty when its rule holds
Found = tuple[tuple[int, str], ...]
OK: Final[Found] = ()


def found(position: int, message: str) -> Found:
    """One violation at ``position``."""
    return ((position, message),)


#: the rule an illegal step breaks, and why
Illegal = tuple[str, str]

_AFTER_FINISH: Final[Illegal] = ("P11", "nothing may follow finish")

#: phase x chunk type -> (next phase, the rule broken when the step is illegal)
TRANSITIONS: Final[dict[str, dict[str, tuple[str, Illegal | None]]]] = {
    STREAMING: {
        **dict.fromkeys(BLOCK_CHUNKS, (STREAMING, None)),
        "usage": (AFTER_USAGE, None),
        "finish": (DONE, ("P9", "finish must directly follow usage")),
    },
    AFTER_USAGE: {
        **dict.fromkeys(BLOCK_CHUNKS, (AFTER_USAGE, ("P9", "only finish may follow usage"))),
        # in order; that it is a second usage is the count rule's to say (P8)
        "usage": (AFTER_USAGE, None),
        "finish": (DONE, None),
    },
    # a second finish is P11 here, and P9 by the count rule
    DONE: dict.fromkeys((*BLOCK_CHUNKS, "usage", "finish"), (DONE, _AFTER_FINISH)),
}


# -- what the stream has shown ---------------------------------------------------------


#: the characters of the deltas joined that a message may quote (it quotes 60)
_HEAD: Final = 256
_SLICE: Final = 1 << 16  # the characters of a block's text encoded at once, to compare it with a digest


class Folded:
    """The deltas of a long block joined, as much of them as P6/P7 need: length, digest, first characters.

    The text of 1.5 M deltas, kept as pieces, was ~60 bytes a delta until its
    ``block-end``, then joined again (4 bytes a character, with one emoji) to be
    compared. Folded, it is a running BLAKE2b of its UTF-8 (``surrogatepass``: a
    delta may hold half of a surrogate pair, and the encoding is one character
    at a time, so the digest of the pieces is the digest of the whole), its
    length, and the first :data:`_HEAD` characters for a message.
    """

    __slots__ = ("digest", "head", "length")

    def __init__(self) -> None:
        self.digest = hashlib.blake2b(digest_size=32)
        self.head = ""
        self.length = 0

    def add(self, text: str) -> None:
        if len(self.head) < _HEAD:
            self.head += text[: _HEAD - len(self.head)]
        self.length += len(text)
        self.digest.update(text.encode("utf-8", "surrogatepass"))

    def is_start_of(self, text: str) -> bool:
        """Whether ``text`` starts with the folded text (a digest's word: equal digests, equal texts)."""
        if len(text) < self.length or not text.startswith(self.head):
            return False
        other = hashlib.blake2b(digest_size=32)
        for at in range(0, self.length, _SLICE):
            other.update(text[at : min(at + _SLICE, self.length)].encode("utf-8", "surrogatepass"))
        return other.digest() == self.digest.digest()


@dataclass(slots=True)
class OpenBlock:
    """A block between its ``block-start`` and its ``block-end``."""

    block_type: str
    start: int
    #: the text (or argumentsDelta) of each delta since the last fold, in order
    parts: list[str] = field(default_factory=list)
    #: the deltas before ``parts``, once folded (:meth:`fold`); None for a block never folded
    folded: Folded | None = None
    #: (position, id, name) of each tool-call delta whose id/name differs from the one before
    identities: list[tuple[int, str, str]] = field(default_factory=list)
    last_id: str | None = None
    last_name: str | None = None

    def fold(self) -> None:
        """Fold ``parts`` (at least one) into ``folded``: P6/P7 judge the block the same (:class:`Folded`)."""
        if self.folded is None:
            self.folded = Folded()
        self.folded.add("".join(self.parts))
        self.parts.clear()

    @property
    def has_deltas(self) -> bool:
        """Whether any delta came, an empty one too (a fold takes one or more)."""
        return bool(self.parts) or self.folded is not None

    def joined_length(self) -> int:
        """The length of the deltas joined."""
        return sum(map(len, self.parts)) + (self.folded.length if self.folded is not None else 0)

    def joined_is(self, text: str) -> bool:
        """Whether the deltas joined are ``text``, exactly."""
        folded = self.folded
        if folded is None:
            return "".join(self.parts) == text
        tail = "".join(self.parts)
        return len(text) == folded.length + len(tail) and text.endswith(tail) and folded.is_start_of(text)

    def joined_head(self) -> str:
        """The deltas joined, or their first characters when folded (at least 61: a message quotes 60)."""
        folded = self.folded
        if folded is None:
            return "".join(self.parts)
        return folded.head if folded.length >= _HEAD else (folded.head + "".join(self.parts))[:_HEAD]


@dataclass(slots=True, eq=False)
class StreamState:
    """Everything the rules remember about one stream, and the violations found so far."""

    allow_interleaving: bool = False
    json_arguments: bool = True
    violations: list[Violation] = field(default_factory=list)
    #: the position of the next chunk (= the chunks seen so far)
    position: int = 0
    phase: str = STREAMING
    #: the chunk fed last; the type name of a malformed dict; None before any or after junk
    previous: object = None
    open: dict[int, OpenBlock] = field(default_factory=dict)
    used_indexes: set[int] = field(default_factory=set)
    call_ids: set[str] = field(default_factory=set)
    #: block-starts of type tool-call (P10)
    tool_blocks: int = 0
    #: the position of the first usage / finish, None before it (P8, P9)
    usage_at: int | None = None
    finish_at: int | None = None
    #: the step of each chunk class in this phase (set with ``phase``, by the validator)
    steps: dict[type, Step] = field(default_factory=dict)

    def report(self, rule: str, position: int, message: str) -> None:
        self.violations.append(Violation(rule, position, message))

    def describe_open(self) -> str:
        """The open blocks by index, as ``0 (text), 2 (reasoning)``."""
        return ", ".join(f"{i} ({b.block_type})" for i, b in sorted(self.open.items()))

    def describe_previous(self, position: int) -> str:
        """What the chunk at ``position`` follows, for a message."""
        previous = self.previous
        if previous is None:
            return "it follows no well-formed chunk" if position > 0 else "it is the first chunk"
        kind = previous if isinstance(previous, str) else CHUNK_TYPE[type(previous)]
        return f"it follows a {kind}"


#: a check of one rule on one chunk: ``(state, chunk, position) -> Found``; it changes nothing
Check = Callable[[StreamState, Any, int], Found]
#: what a chunk does to the state: a record, or the whole step of a chunk class in a phase
Step = Callable[[StreamState, Any, int], None]
