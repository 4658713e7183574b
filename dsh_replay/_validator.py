"""The StreamChunk ordering rules, checked incrementally.

Theory of operation
-------------------
A stream is a sequence of blocks (``block-start`` → deltas → ``block-end``)
followed by ``usage`` and then ``finish``. The validator keeps two pieces of
state: the *phase* of the stream and the set of *open blocks*.

The phase moves along the table ``_PHASES`` below (phase x chunk type → next
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
      id, name and arguments non-empty. A call without arguments carries
      ``"{}"`` while its deltas (if any) carry none.
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
A malformed dict whose ``type`` is known still takes its step through the
phase table, so a bad ``finish`` does not also read as a missing one.

The table is compiled, per phase, into a dict from chunk class to handler:
a legal step that stays in its phase (every block chunk while streaming) goes
straight to its per-type check, which keeps the hot path to one dict lookup
and one call per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NoReturn

import orjson

from ._chunks import (
    Block,
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
from ._jsonl import chunk_from_json, loads_json

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
_CHUNK_KINDS = frozenset(_CHUNK_TYPE.values())
_BLOCK_CHUNKS = ("block-start", "text-delta", "reasoning-delta", "tool-call-delta", "block-end")

# (phase, chunk type) -> (next phase, (rule, why) when the step is illegal)
_PHASES: dict[tuple[str, str], tuple[str, tuple[str, str] | None]] = {
    **{(_STREAMING, kind): (_STREAMING, None) for kind in _BLOCK_CHUNKS},
    (_STREAMING, "usage"): (_AFTER_USAGE, None),
    (_STREAMING, "finish"): (_DONE, ("P9", "finish must directly follow usage")),
    **{
        (_AFTER_USAGE, kind): (_AFTER_USAGE, ("P9", "only finish may follow usage"))
        for kind in _BLOCK_CHUNKS
    },
    (_AFTER_USAGE, "usage"): (_AFTER_USAGE, ("P8", "usage must come exactly once")),
    (_AFTER_USAGE, "finish"): (_DONE, None),
    **{
        (_DONE, kind): (_DONE, ("P11", "nothing may follow finish"))
        for kind in (*_BLOCK_CHUNKS, "usage", "finish")
    },
}

_BLOCK_KIND: dict[type, str] = {TextBlock: "text", ToolCallBlock: "tool-call", ReasoningBlock: "reasoning"}

_Check = Callable[[Any, int], None]
_POSITION = attrgetter("position")


@dataclass(slots=True)
class _OpenBlock:
    block_type: str
    start: int
    parts: list[str] = field(default_factory=list)
    # (position, id, name) of each tool-call delta whose id/name differs from the one before
    identities: list[tuple[int, str, str]] = field(default_factory=list)
    last_id: str | None = None
    last_name: str | None = None


class SequenceValidator:
    """Checks a chunk stream as it flows: ``feed`` each chunk, then ``finish``.

    ``feed`` and ``finish`` return the violations they found; ``violations``
    holds all of them so far, in the order they were found. ``finish`` ends the
    stream: calling it again changes nothing, and ``feed`` after it raises
    ``RuntimeError`` (a chunk after the ``finish`` *chunk* is a P11 violation,
    but a chunk after ``finish()`` belongs to another stream).
    """

    def __init__(self, *, allow_interleaving: bool = False, json_arguments: bool = True) -> None:
        self.allow_interleaving = allow_interleaving
        self.json_arguments = json_arguments
        self.violations: list[Violation] = []
        self._position = 0
        self._phase = _STREAMING
        # the chunk fed last; the type name of a malformed dict; None before any or after junk
        self._previous: object = None
        self._open: dict[int, _OpenBlock] = {}
        self._used_indexes: set[int] = set()
        self._call_ids: set[str] = set()
        self._tool_blocks = 0
        self._usage_seen = False
        checks: dict[type, _Check] = {
            BlockStart: self._block_start,
            TextDelta: self._text_delta,
            ReasoningDelta: self._reasoning_delta,
            ToolCallDelta: self._tool_call_delta,
            BlockEnd: self._block_end,
            UsageChunk: self._usage,
            Finish: self._finish,
        }
        self._tables: dict[str, dict[type, _Check]] = {
            phase: {cls: self._compile(phase, kind, checks[cls]) for cls, kind in _CHUNK_TYPE.items()}
            for phase in (_STREAMING, _AFTER_USAGE, _DONE)
        }
        self._table = self._tables[_STREAMING]
        # what a malformed dict of a known type still checks: only what needs no field
        self._structural: dict[str, _Check] = {"usage": self._usage, "finish": self._usage_before_finish}
        # what finish() found, kept so a second call neither repeats nor loses it; None before
        self._ended: list[Violation] | None = None
        # the table once finish() was called: every chunk refused, at no cost to feed before
        self._finished_table: dict[type, _Check] = dict.fromkeys(_CHUNK_TYPE, self._fed_after_finish)

    # -- public ------------------------------------------------------------------

    def feed(self, chunk: StreamChunk | Mapping[str, Any]) -> list[Violation]:
        """Check the next chunk; return the violations it caused (often none).

        A tool-call delta's id and name can only be judged against its
        ``block-end``: that feed reports them, with the delta's position.
        """
        violations = self.violations
        before = len(violations)
        self._feed(chunk)
        return violations[before:] if len(violations) != before else []

    def feed_unreadable(self, reason: str) -> list[Violation]:
        """Count a chunk that could not even be read (e.g. a JSONL line that is not JSON) as P1."""
        position = self._position
        if self._ended is not None:
            self._fed_after_finish(None, position)
        self._position = position + 1
        self._report("P1", position, f"chunk at position {position} {reason}")
        return self.violations[-1:]

    def finish(self) -> list[Violation]:
        """Signal the end of the stream; return the end-of-stream violations (P11).

        A second call reports nothing new and returns what the first one did.
        """
        if self._ended is not None:
            return list(self._ended)
        found_before = len(self.violations)
        if self._phase != _DONE:
            still_open = self._describe_open()
            tail = f"; blocks still open: {still_open}" if still_open else ""
            self._report(
                "P11",
                self._position,
                f"stream ended after {self._position} chunk(s) without finish{tail}",
            )
        self._ended = self.violations[found_before:]
        self._table = self._finished_table
        return list(self._ended)

    # -- the phase machine -------------------------------------------------------------

    def _feed(self, chunk: object) -> None:
        position = self._position
        self._position = position + 1
        handler = self._table.get(type(chunk))
        if handler is None:
            self._feed_other(chunk, position)
            return
        handler(chunk, position)
        self._previous = chunk

    def _compile(self, phase: str, kind: str, check: _Check) -> _Check:
        """The handler of a ``kind`` chunk in ``phase``, from ``_PHASES``."""
        next_phase, illegal = _PHASES[(phase, kind)]
        if illegal is None and next_phase == phase:
            return check

        def step(chunk: Any, position: int) -> None:
            self._step(kind, check, chunk, position)

        return step

    def _step(self, kind: str, check: _Check | None, chunk: object, position: int) -> None:
        """Take the phase step of a ``kind`` chunk, reporting it if illegal, and run ``check``."""
        phase = self._phase
        next_phase, illegal = _PHASES[(phase, kind)]
        if illegal is not None:
            rule, why = illegal
            tail = f"; {self._describe_previous()}" if rule == "P9" and kind == "finish" else ""
            self._report(rule, position, f"{kind} at position {position}: {why}{tail}")
        if check is not None and phase != _DONE:
            check(chunk, position)
        if next_phase != phase:
            self._phase = next_phase
            self._table = self._tables[next_phase]

    def _fed_after_finish(self, chunk: object, position: int) -> NoReturn:
        self._position = position  # the refused chunk is not counted
        raise RuntimeError(
            "SequenceValidator.feed() after finish(): that stream has ended; "
            "use a new SequenceValidator for the next stream"
        )

    def _feed_other(self, data: object, position: int) -> None:
        """A JSON dict (P1 when malformed), or a value that is no chunk at all (P1)."""
        if self._ended is not None:
            self._fed_after_finish(data, position)
        if not isinstance(data, Mapping):
            self._previous = None
            self._report(
                "P1",
                position,
                f"chunk at position {position} must be a StreamChunk or a JSON object, got {data!r:.80}",
            )
            return
        chunk = self._parse(data, position)
        if chunk is not None:
            self._table[type(chunk)](chunk, position)
            self._previous = chunk
            return
        kind = data.get("type")
        if isinstance(kind, str) and kind in _CHUNK_KINDS:
            self._step(kind, self._structural.get(kind), None, position)
            self._previous = kind
        else:
            self._previous = None

    def _parse(self, data: Mapping[str, Any], position: int) -> StreamChunk | None:
        usage = data.get("usage") if data.get("type") == "usage" else None
        if isinstance(usage, Mapping):
            negative = [
                key
                for key in ("inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens")
                if type(usage.get(key)) is int and usage[key] < 0
            ]
            if negative:
                # a negative count is a usage-rule problem (P8), not a shape problem
                self._report(
                    "P8", position, f"usage at position {position}: {', '.join(negative)} must be >= 0"
                )
                data = {**data, "usage": {**usage, **dict.fromkeys(negative, 0)}}
        try:
            return chunk_from_json(data)
        except ValueError as exc:
            self._report("P1", position, f"chunk at position {position}: {exc}")
            return None

    # -- helpers -------------------------------------------------------------------

    def _report(self, rule: str, position: int, message: str) -> None:
        self.violations.append(Violation(rule, position, message))

    def _describe_open(self) -> str:
        return ", ".join(f"{i} ({b.block_type})" for i, b in sorted(self._open.items()))

    def _describe_previous(self) -> str:
        previous = self._previous
        if previous is None:
            return "it follows no well-formed chunk" if self._position > 1 else "it is the first chunk"
        kind = previous if isinstance(previous, str) else _CHUNK_TYPE[type(previous)]
        return f"it follows a {kind}"

    # -- per chunk type --------------------------------------------------------------

    def _block_start(self, chunk: BlockStart, position: int) -> None:
        index = chunk.index
        if index in self._used_indexes:
            self._report(
                "P2",
                position,
                f"block-start at position {position} reuses index {index}; "
                "every block-start needs an index not used before in the stream",
            )
        if self._open and not self.allow_interleaving:
            self._report(
                "P3",
                position,
                f"block-start {index} at position {position} while block {self._describe_open()} "
                "is still open; close it first",
            )
        self._used_indexes.add(index)
        if chunk.block_type == "tool-call":
            self._tool_blocks += 1
        if index not in self._open:
            self._open[index] = _OpenBlock(chunk.block_type, position)

    def _text_delta(self, chunk: TextDelta, position: int) -> None:
        block = self._open.get(chunk.index)
        if block is None or block.block_type != "text":
            self._misplaced("text-delta", "text", chunk.index, block, position)
            return
        text = chunk.text
        if not text:
            self._report("P6", position, f"text-delta at position {position} has empty text; a delta carries >= 1 character")
        block.parts.append(text)

    def _reasoning_delta(self, chunk: ReasoningDelta, position: int) -> None:
        block = self._open.get(chunk.index)
        if block is None or block.block_type != "reasoning":
            self._misplaced("reasoning-delta", "reasoning", chunk.index, block, position)
            return
        text = chunk.text
        if not text:
            self._report(
                "P6", position, f"reasoning-delta at position {position} has empty text; a delta carries >= 1 character"
            )
        block.parts.append(text)

    def _tool_call_delta(self, chunk: ToolCallDelta, position: int) -> None:
        block = self._open.get(chunk.index)
        if block is None or block.block_type != "tool-call":
            self._misplaced("tool-call-delta", "tool-call", chunk.index, block, position)
            return
        block.parts.append(chunk.arguments_delta)
        if chunk.id != block.last_id or chunk.name != block.last_name:
            block.last_id, block.last_name = chunk.id, chunk.name
            block.identities.append((position, chunk.id, chunk.name))

    def _misplaced(self, kind: str, wanted: str, index: int, block: _OpenBlock | None, position: int) -> None:
        if block is None:
            opened = f"open: {self._describe_open()}" if self._open else "no block is open"
            self._report(
                "P4",
                position,
                f"{kind} at position {position} targets block {index}, which is not open ({opened}); "
                f"a {kind} must target an open {wanted} block",
            )
        else:
            self._report(
                "P4",
                position,
                f"{kind} at position {position} targets block {index}, a {block.block_type} block; "
                f"a {kind} must target a {wanted} block",
            )

    def _block_end(self, chunk: BlockEnd, position: int) -> None:
        index = chunk.index
        block = self._open.pop(index, None)
        carried = chunk.block
        got_type = _BLOCK_KIND.get(type(carried)) or _block_kind(carried)
        if block is None:
            state = "was already closed" if index in self._used_indexes else "was never opened"
            opened = f" (open: {self._describe_open()})" if self._open else ""
            self._report(
                "P5",
                position,
                f"block-end at position {position} closes block {index}, which {state}{opened}; "
                "a block-end must close an open block",
            )
            return
        if got_type != block.block_type:
            self._report(
                "P5",
                position,
                f"block-end at position {position} carries a {got_type} block; block {index} was "
                f"opened as {block.block_type}, so it must carry a {block.block_type} block",
            )
            return
        if isinstance(carried, ToolCallBlock):
            self._check_tool_call(carried, block, index, position)
        else:
            self._check_text(carried.text, block, index, position)

    def _check_text(self, text: str, block: _OpenBlock, index: int, position: int) -> None:
        kind = block.block_type
        if not block.parts:
            self._report(
                "P6",
                position,
                f"{kind} block {index} closed at position {position} without any delta; "
                f"a {kind} block needs at least one {kind}-delta",
            )
            return
        joined = "".join(block.parts)
        if joined != text:
            self._report(
                "P6",
                position,
                f"block-end at position {position}: {kind} block {index} carries text {_clip(text)}, "
                f"but its deltas joined are {_clip(joined)}; they must be equal",
            )

    def _check_tool_call(self, call: ToolCallBlock, block: _OpenBlock, index: int, position: int) -> None:
        where = f"block-end at position {position}: tool-call block {index}"
        arguments = call.arguments
        if not call.id:
            self._report("P7", position, f"{where} has an empty id; a tool call needs the provider's call id")
        if not call.name:
            self._report("P7", position, f"{where} has an empty name; a tool call needs the tool's name")
        if not arguments:
            self._report("P7", position, f"{where} has empty arguments; a call without arguments carries \"{{}}\"")
        joined = "".join(block.parts)
        # "{}" stands for "no arguments", which the deltas carry as nothing at all
        if joined != arguments and (joined or arguments != "{}"):
            if joined:
                self._report(
                    "P7",
                    position,
                    f"{where} arguments {_clip(arguments)} differ from the argumentsDelta joined "
                    f"{_clip(joined)}; they must be equal",
                )
            else:
                self._report(
                    "P7",
                    position,
                    f"{where} has arguments {_clip(arguments)} but no delta carried them; "
                    "only a call without arguments (\"{}\") may stream none",
                )
        for delta_position, delta_id, delta_name in block.identities:
            if delta_id != call.id:
                self._report(
                    "P7",
                    delta_position,
                    f"tool-call-delta at position {delta_position} has id {delta_id!r}; "
                    f"block {index} ends with id {call.id!r}, and every delta must carry it",
                )
            if not call.name.startswith(delta_name):
                self._report(
                    "P7",
                    delta_position,
                    f"tool-call-delta at position {delta_position} has name {delta_name!r}; "
                    f"it must equal {call.name!r} or be a prefix of it",
                )
        if self.json_arguments and arguments:
            problem = _json_object_problem(arguments)
            if problem is not None:
                self._report(
                    "P7j", position, f"{where} arguments {problem}: {_clip(arguments)}; they must be a JSON object"
                )
        if call.id:
            if call.id in self._call_ids:
                self._report(
                    "P12", position, f"{where} reuses call id {call.id!r}; call ids must be unique in a stream"
                )
            self._call_ids.add(call.id)

    def _usage(self, chunk: object, position: int) -> None:
        self._usage_seen = True
        if self._open:
            self._report(
                "P8",
                position,
                f"usage at position {position} while block {self._describe_open()} is still open; "
                "usage comes after every block is closed",
            )

    def _usage_before_finish(self, chunk: object, position: int) -> None:
        if not self._usage_seen:
            self._report(
                "P8",
                position,
                f"finish at position {position}: no usage came before it; "
                "a stream carries exactly one usage, right before finish",
            )

    def _finish(self, chunk: Finish, position: int) -> None:
        self._usage_before_finish(chunk, position)
        wanted = "tool-calls" if self._tool_blocks else "stop"
        if chunk.reason.kind != wanted:
            because = (
                f"the stream has {self._tool_blocks} tool-call block(s)"
                if self._tool_blocks
                else "the stream has no tool-call block"
            )
            self._report(
                "P10",
                position,
                f"finish at position {position} has kind {chunk.reason.kind!r}; {because}, so it must be {wanted!r}",
            )


def _block_kind(block: Block) -> str:
    """The kind of a block of a subclass of one of the block classes."""
    for cls, kind in _BLOCK_KIND.items():
        if isinstance(block, cls):
            return kind
    return type(block).__name__


def _json_object_problem(text: str) -> str | None:
    """What keeps ``text`` from being a JSON object, or None when it is one."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        # orjson refuses some valid JSON (numbers beyond a double, lone surrogate
        # escapes, deep nesting); the exact parser has the last word
        try:
            value = loads_json(text)
        except ValueError:
            return "are not valid JSON"
    return None if isinstance(value, dict) else "are JSON but not an object"


def _clip(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[: limit - 1] + "…")


def check_chunk_sequence(
    chunks: Iterable[StreamChunk | Mapping[str, Any]],
    *,
    allow_interleaving: bool = False,
    json_arguments: bool = True,
    complete: bool = True,
) -> list[Violation]:
    """Run every rule over ``chunks``; return the violations (empty when valid), by position.

    ``complete=False`` skips the end-of-stream check (P11), for the prefix an
    adapter yielded before it raised.
    """
    if isinstance(chunks, (Mapping, str, bytes)):
        # one chunk's dict (or a text) passed where the sequence goes: its keys would be "chunks"
        raise TypeError(f"chunks must be a sequence of chunks, got a {type(chunks).__name__}; wrap one chunk in a list")
    validator = SequenceValidator(allow_interleaving=allow_interleaving, json_arguments=json_arguments)
    feed = validator._feed
    for chunk in chunks:
        feed(chunk)
    if complete:
        validator.finish()
    # stable: a tool-call delta's P7 is found at its block-end, after later chunks' violations
    return sorted(validator.violations, key=_POSITION)


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
