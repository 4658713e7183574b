"""The StreamChunk ordering rules, checked incrementally.

Theory of operation
-------------------
A stream is a sequence of blocks (``block-start`` → deltas → ``block-end``)
followed by ``usage`` and then ``finish``. The validator keeps two pieces of
state: the *phase* of the stream and the set of *open blocks*.

The phase moves along the table ``_PHASES`` below (phase × chunk type → next
phase, and the rule broken when the step is illegal)::

    streaming   --usage-->  after-usage  --finish-->  done
    streaming   --finish--> done          (P9: finish must directly follow usage)
    after-usage --other-->  after-usage   (P9 / P8)
    done        --any-->    done          (P11: nothing may follow finish)

Per-block rules are checked against the open-block records:

- P1  shape — a known ``type`` with correctly typed fields and known literals.
- P2  unique index — a ``block-start`` index is never reused.
- P3  no interleaving — no ``block-start`` while another block is open
      (relaxed by ``allow_interleaving``; P4/P5 still hold).
- P4  delta placement — a delta targets an open block of its own kind.
- P5  block-end — closes an open block with the same index and type.
- P6  text/reasoning — ≥ 1 delta, none empty, concatenation == ``block.text``.
- P7  tool-call — concatenated ``argumentsDelta`` == ``block.arguments``; every
      delta's id == ``block.id``; its name == ``block.name`` or a prefix of it;
      id, name and arguments non-empty.
- P7j JSON arguments — ``block.arguments`` parses as a JSON object
      (disabled by ``json_arguments=False``).
- P8  usage — exactly once, after every block closed, counts ints ≥ 0.
- P9  finish — exactly once, last, immediately after ``usage``.
- P10 finish reason — ``tool-calls`` iff the stream has a tool-call block.
- P11 termination — nothing after ``finish``; a stream that ends without it is a
      violation naming the blocks still open.
- P12 call ids — tool-call ids are unique within the stream.

Input may be chunk objects or their JSON dicts, so a malformed dict (a golden
edited by hand, a log from another harness) is reported as P1, never raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ._chunks import (
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
)
from ._exceptions import ProtocolViolation
from ._jsonl import chunk_from_json

__all__ = [
    "SequenceValidator",
    "Violation",
    "assert_chunk_sequence",
    "check_chunk_sequence",
]


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: its id (``"P4"``), the 0-based chunk position, a one-line message."""

    rule: str
    position: int
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


_STREAMING, _AFTER_USAGE, _DONE = "streaming", "after-usage", "done"

_CHUNK_TYPE: dict[type, str] = {
    BlockStart: "block-start",
    TextDelta: "text-delta",
    ReasoningDelta: "reasoning-delta",
    ToolCallDelta: "tool-call-delta",
    BlockEnd: "block-end",
    UsageChunk: "usage",
    Finish: "finish",
}
_BLOCK_CHUNKS = ("block-start", "text-delta", "reasoning-delta", "tool-call-delta", "block-end")

# (phase, chunk type) -> (next phase, (rule, why) when the step is illegal)
_PHASES: dict[tuple[str, str], tuple[str, tuple[str, str] | None]] = {
    **{(_STREAMING, kind): (_STREAMING, None) for kind in _BLOCK_CHUNKS},
    (_STREAMING, "usage"): (_AFTER_USAGE, None),
    (_STREAMING, "finish"): (_DONE, ("P9", "must directly follow usage")),
    **{(_AFTER_USAGE, kind): (_AFTER_USAGE, ("P9", "only finish may follow usage")) for kind in _BLOCK_CHUNKS},
    (_AFTER_USAGE, "usage"): (_AFTER_USAGE, ("P8", "usage must come exactly once")),
    (_AFTER_USAGE, "finish"): (_DONE, None),
    **{(_DONE, kind): (_DONE, ("P11", "nothing may follow finish")) for kind in (*_BLOCK_CHUNKS, "usage", "finish")},
}

_BLOCK_KIND: dict[type, str] = {TextBlock: "text", ToolCallBlock: "tool-call", ReasoningBlock: "reasoning"}
_DELTA_BLOCK_TYPE = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}


@dataclass(slots=True)
class _OpenBlock:
    block_type: str
    start: int
    parts: list[str] = field(default_factory=list)
    # (position, id, name) of each tool-call delta whose id/name differs from the one before
    identities: list[tuple[int, str, str]] = field(default_factory=list)


class SequenceValidator:
    """Checks a chunk stream as it flows: ``feed`` each chunk, then ``finish``.

    ``feed`` and ``finish`` return the violations they found; ``violations``
    holds all of them so far.
    """

    def __init__(self, *, allow_interleaving: bool = False, json_arguments: bool = True) -> None:
        self.allow_interleaving = allow_interleaving
        self.json_arguments = json_arguments
        self.violations: list[Violation] = []
        self._position = 0
        self._phase = _STREAMING
        self._previous: str | None = None
        self._open: dict[int, _OpenBlock] = {}
        self._used_indexes: set[int] = set()
        self._call_ids: set[str] = set()
        self._tool_blocks = 0
        self._usage_seen = False
        self._finished = False
        self._dispatch = {
            BlockStart: self._block_start,
            TextDelta: self._delta,
            ReasoningDelta: self._delta,
            ToolCallDelta: self._delta,
            BlockEnd: self._block_end,
            UsageChunk: self._usage,
            Finish: self._finish,
        }

    # -- public ------------------------------------------------------------------

    def feed(self, chunk: StreamChunk | Mapping[str, Any]) -> list[Violation]:
        """Check the next chunk; return the violations it caused."""
        found_before = len(self.violations)
        position = self._position
        self._position += 1
        if isinstance(chunk, Mapping):
            parsed = self._parse(chunk, position)
            if parsed is None:
                self._previous = None
                return self.violations[found_before:]
            chunk = parsed
        kind = _CHUNK_TYPE.get(type(chunk))
        if kind is None:
            self._report("P1", position, f"chunk at position {position} is not a StreamChunk: {chunk!r:.80}")
            return self.violations[found_before:]
        phase, illegal = _PHASES[(self._phase, kind)]
        if illegal is not None:
            rule, why = illegal
            got = f"; got {self._previous}" if rule == "P9" and kind == "finish" else ""
            self._report(rule, position, f"{kind} at position {position}: {why}{got}")
        if self._phase != _DONE:
            self._dispatch[type(chunk)](chunk, position)  # type: ignore[operator]
        self._phase = phase
        self._previous = kind
        return self.violations[found_before:]

    def finish(self) -> list[Violation]:
        """Signal the end of the stream; return the end-of-stream violations (P11)."""
        found_before = len(self.violations)
        if self._phase != _DONE:
            still_open = self._describe_open()
            tail = f"; blocks still open: {still_open}" if still_open else ""
            self._report(
                "P11",
                self._position,
                f"stream ended after {self._position} chunk(s) without finish{tail}",
            )
        return self.violations[found_before:]

    # -- helpers -------------------------------------------------------------------

    def _report(self, rule: str, position: int, message: str) -> None:
        self.violations.append(Violation(rule, position, message))

    def _describe_open(self) -> str:
        return ", ".join(f"{i} ({b.block_type})" for i, b in sorted(self._open.items()))

    def _parse(self, data: Mapping[str, Any], position: int) -> StreamChunk | None:
        usage = data.get("usage") if data.get("type") == "usage" else None
        if isinstance(usage, Mapping):
            negative = [
                key for key in ("inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens")
                if type(usage.get(key)) is int and usage[key] < 0
            ]
            if negative:
                # a negative count is a usage-rule problem (P8), not a shape problem
                self._report("P8", position, f"usage at position {position}: {', '.join(negative)} must be >= 0")
                data = {**data, "usage": {**usage, **dict.fromkeys(negative, 0)}}
        try:
            return chunk_from_json(data)
        except ValueError as exc:
            self._report("P1", position, f"chunk at position {position}: {exc}")
            return None

    # -- per chunk type --------------------------------------------------------------

    def _block_start(self, chunk: BlockStart, position: int) -> None:
        index = chunk.index
        if index in self._used_indexes:
            self._report("P2", position, f"block-start at position {position} reuses index {index}")
        if self._open and not self.allow_interleaving:
            self._report(
                "P3",
                position,
                f"block-start {index} at position {position} while block {self._describe_open()} is still open; "
                "close it first",
            )
        self._used_indexes.add(index)
        if chunk.block_type == "tool-call":
            self._tool_blocks += 1
        if index not in self._open:
            self._open[index] = _OpenBlock(chunk.block_type, position)

    def _delta(self, chunk: TextDelta | ReasoningDelta | ToolCallDelta, position: int) -> None:
        kind = _CHUNK_TYPE[type(chunk)]
        block = self._open.get(chunk.index)
        if block is None:
            opened = f"open: {self._describe_open()}" if self._open else "no block is open"
            self._report("P4", position, f"{kind} at position {position} targets block {chunk.index}, which is not open ({opened})")
            return
        wanted = _DELTA_BLOCK_TYPE[type(chunk)]
        if block.block_type != wanted:
            self._report(
                "P4",
                position,
                f"{kind} at position {position} targets block {chunk.index} of type {block.block_type}; "
                f"expected a {block.block_type} delta",
            )
            return
        if type(chunk) is ToolCallDelta:
            block.parts.append(chunk.arguments_delta)
            last = block.identities[-1] if block.identities else None
            if last is None or last[1] != chunk.id or last[2] != chunk.name:
                block.identities.append((position, chunk.id, chunk.name))
            return
        if not chunk.text:  # type: ignore[union-attr]
            self._report("P6", position, f"{kind} at position {position} has empty text")
        block.parts.append(chunk.text)  # type: ignore[union-attr]

    def _block_end(self, chunk: BlockEnd, position: int) -> None:
        index = chunk.index
        block = self._open.pop(index, None)
        got_type = _BLOCK_KIND[type(chunk.block)]
        if block is None:
            state = "was already closed" if index in self._used_indexes else "was never opened"
            self._report("P5", position, f"block-end at position {position} closes block {index}, which {state}")
            return
        if got_type != block.block_type:
            self._report(
                "P5",
                position,
                f"block-end at position {position} carries a {got_type} block; block {index} was opened as {block.block_type}",
            )
            return
        if type(chunk.block) is ToolCallBlock:
            self._check_tool_call(chunk.block, block, index, position)
        else:
            self._check_text(chunk.block.text, block, index, position)  # type: ignore[union-attr]

    def _check_text(self, text: str, block: _OpenBlock, index: int, position: int) -> None:
        if not block.parts:
            self._report("P6", position, f"{block.block_type} block {index} closed at position {position} without any delta")
            return
        joined = "".join(block.parts)
        if joined != text:
            self._report(
                "P6",
                position,
                f"block-end at position {position}: {block.block_type} block {index} text {_clip(text)} "
                f"differs from its deltas joined {_clip(joined)}",
            )

    def _check_tool_call(self, call: ToolCallBlock, block: _OpenBlock, index: int, position: int) -> None:
        where = f"block-end at position {position}: tool-call block {index}"
        if not call.id:
            self._report("P7", position, f"{where} has an empty id")
        if not call.name:
            self._report("P7", position, f"{where} has an empty name")
        if not call.arguments:
            self._report("P7", position, f"{where} has empty arguments; a call without arguments carries \"{{}}\"")
        joined = "".join(block.parts)
        if block.parts and joined != call.arguments:
            self._report(
                "P7",
                position,
                f"{where} arguments {_clip(call.arguments)} differ from the argumentsDelta joined {_clip(joined)}",
            )
        elif not block.parts and call.arguments and call.arguments != "{}":
            self._report("P7", position, f"{where} has arguments {_clip(call.arguments)} but no delta carried them")
        for delta_position, delta_id, delta_name in block.identities:
            if delta_id != call.id:
                self._report(
                    "P7",
                    delta_position,
                    f"tool-call-delta at position {delta_position} has id {delta_id!r}; block {index} ends with id {call.id!r}",
                )
            if delta_name != call.name and not call.name.startswith(delta_name):
                self._report(
                    "P7",
                    delta_position,
                    f"tool-call-delta at position {delta_position} has name {delta_name!r}, "
                    f"neither equal to nor a prefix of {call.name!r}",
                )
        if self.json_arguments and call.arguments:
            try:
                parsed = orjson.loads(call.arguments)
            except orjson.JSONDecodeError:
                parsed = None
                self._report("P7j", position, f"{where} arguments are not valid JSON: {_clip(call.arguments)}")
            else:
                if not isinstance(parsed, dict):
                    self._report("P7j", position, f"{where} arguments are JSON but not an object: {_clip(call.arguments)}")
        if call.id:
            if call.id in self._call_ids:
                self._report("P12", position, f"{where} reuses call id {call.id!r}")
            self._call_ids.add(call.id)

    def _usage(self, chunk: UsageChunk, position: int) -> None:
        if self._usage_seen and self._phase == _STREAMING:
            self._report("P8", position, f"usage at position {position}: usage must come exactly once")
        self._usage_seen = True
        if self._open:
            self._report("P8", position, f"usage at position {position} while block {self._describe_open()} is still open")

    def _finish(self, chunk: Finish, position: int) -> None:
        if not self._usage_seen:
            self._report("P8", position, f"finish at position {position}: no usage came before it")
        wanted = "tool-calls" if self._tool_blocks else "stop"
        if chunk.reason.kind != wanted:
            because = (
                f"the stream has {self._tool_blocks} tool-call block(s)"
                if self._tool_blocks
                else "the stream has no tool-call block"
            )
            self._report("P10", position, f"finish at position {position} has kind {chunk.reason.kind!r}; {because}, so it must be {wanted!r}")


def _clip(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[: limit - 1] + "…")


def check_chunk_sequence(
    chunks: Iterable[StreamChunk | Mapping[str, Any]],
    *,
    allow_interleaving: bool = False,
    json_arguments: bool = True,
    complete: bool = True,
) -> list[Violation]:
    """Run every rule over ``chunks``; return the violations (empty when valid).

    ``complete=False`` skips the end-of-stream check (P11), for the prefix an
    adapter yielded before it raised.
    """
    validator = SequenceValidator(allow_interleaving=allow_interleaving, json_arguments=json_arguments)
    for chunk in chunks:
        validator.feed(chunk)
    if complete:
        validator.finish()
    return validator.violations


def assert_chunk_sequence(
    chunks: Iterable[StreamChunk | Mapping[str, Any]],
    *,
    allow_interleaving: bool = False,
    json_arguments: bool = True,
) -> None:
    """Raise :class:`ProtocolViolation` listing every violation, if there is any."""
    violations = check_chunk_sequence(
        chunks, allow_interleaving=allow_interleaving, json_arguments=json_arguments
    )
    if violations:
        raise ProtocolViolation(violations)
