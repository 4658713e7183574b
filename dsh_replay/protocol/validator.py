"""The StreamChunk ordering rules (SPEC §3), checked incrementally.

Theory of operation
-------------------
A stream is a sequence of blocks (``block-start`` -> deltas -> ``block-end``)
followed by ``usage`` and then ``finish``. The rules, with the ids every
violation carries:

- P1  shape - every chunk has a known ``type``, the fields of that type with the
      right JSON types, and known values for ``blockType``, ``block.type`` and
      ``reason.kind``.
- P2  unique index - a ``block-start`` index is never reused in one stream.
- P3  no interleaving - a ``block-start`` while another block is open is a
      violation (relaxed by ``allow_interleaving=True``; P4/P5 still hold).
- P4  delta placement - a delta targets an open block with the same index, and
      its kind matches the block's ``blockType``.
- P5  block-end - closes an open block with the same index; ``block.type``
      equals the ``blockType`` of its ``block-start``.
- P6  text/reasoning blocks - at least one delta; no delta with empty text;
      deltas concatenated in order equal ``block.text`` exactly.
- P7  tool-call blocks - concatenated ``argumentsDelta`` equals
      ``block.arguments``; every delta's ``id`` equals ``block.id``; every
      delta's ``name`` equals ``block.name`` or is a prefix of it; ``block.id``,
      ``block.name`` and ``block.arguments`` non-empty (a call with no arguments
      carries ``"{}"``, and its deltas, if any, carry nothing).
- P7j JSON arguments - ``block.arguments`` parses as a JSON object (disabled by
      ``json_arguments=False``).
- P8  usage - exactly once, after every block is closed; counts are ints >= 0.
- P9  finish - exactly once, the last chunk, immediately after ``usage``.
- P10 finish reason - ``tool-calls`` iff the stream has a tool-call block,
      otherwise ``stop``.
- P11 termination - nothing after ``finish``; a sequence that ends without
      ``finish`` is a violation that names the blocks still open.
- P12 call ids - tool-call ids are unique within a stream.

Two tables do the work, over one ``StreamState``:

- the phase table ``_validator_state.TRANSITIONS`` (phase x chunk type -> next
  phase, and the rule an illegal step breaks) holds the *order* of P9 and P11::

      streaming   --usage-->   after-usage  --finish-->  done
      streaming   --finish-->  done          P9: finish must directly follow usage
      after-usage --block-->   after-usage   P9: only finish may follow usage
      done        --any-->     done          P11: nothing may follow finish

- the rule table ``_rules.RULES`` (rule id -> a small check, per chunk type)
  holds the rest, P9's and P8's *counts* included.

One chunk is judged in this order: the illegal step's violation, if any, then
its checks in rule-id order. Before ``finish`` every check of its type runs;
after it, only the counts (the chunk is already P11, and its content belongs to
no stream). So:

- a second ``finish``: P11 (nothing after finish) and P9 (exactly one finish),
  at its position;
- a ``finish`` in the middle: P9 at it (not right after usage; and P8 when no
  usage came before it), then P11 at every later chunk, and P9 again at a
  later ``finish``;
- ``usage`` twice before ``finish``: P8 at the second;
- ``usage`` after ``finish``: P11, and P8 when it is the second usage.

Input may be chunk objects or their JSON dicts, so a malformed dict (a golden
edited by hand, a log from another harness) is reported as P1, never raised.
A malformed dict whose ``type`` is known still takes its step through the phase
table and the checks that read no field, so a bad ``finish`` does not also read
as a missing one. A negative count in a usage dict is P8, not P1.

Speed: the phase table is compiled, per phase, into a dict from chunk class to
step. While streaming, a block chunk's step is its ``_rules.FAST_STEPS`` entry,
which takes the common case (its checks would find nothing) itself and hands
the rest to the rule table: one dict lookup and one call per chunk on the hot
path; ``feed`` and ``check_chunk_sequence`` add no call of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from operator import attrgetter
from typing import Any, Final, NoReturn

from ..errors import ProtocolViolation
from .chunks import StreamChunk
from .jsonl import chunk_from_json
from .rules import FAST_STEPS, JUDGES, LATE_JUDGES, SHAPELESS_JUDGES, Judge, judge
from .stream_rules import stream_end
from .validator_state import (
    CHUNK_KINDS,
    CHUNK_TYPE,
    DONE,
    PHASES,
    STREAMING,
    TRANSITIONS,
    Step,
    StreamState,
)
from .violation import Violation

__all__ = [
    "SequenceValidator",
    "Violation",
    "assert_chunk_sequence",
    "check_chunk_sequence",
]

_POSITION = attrgetter("position")
_COUNTS: Final = ("inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens")


def _take_step(state: StreamState, kind: str, judged: Judge, chunk: object, position: int) -> None:
    """Step the phase on a ``kind`` chunk (reporting the step when illegal), then judge the chunk."""
    phase = state.phase
    next_phase, illegal = TRANSITIONS[phase][kind]
    if illegal is not None:
        rule, why = illegal
        tail = f"; {state.describe_previous(position)}" if rule == "P9" and kind == "finish" else ""
        state.report(rule, position, f"{kind} at position {position}: {why}{tail}")
    judge(judged, state, chunk, position)
    if next_phase != phase:
        state.phase = next_phase
        state.steps = _STEPS[next_phase]


def _compile(phase: str, kind: str, *, fast: bool = True) -> Step:
    """The step of a ``kind`` chunk in ``phase``, from ``TRANSITIONS``.

    ``fast=False`` leaves out ``FAST_STEPS``: the plain table, for tests.
    """
    judged = (LATE_JUDGES if phase == DONE else JUDGES)[kind]
    if TRANSITIONS[phase][kind] == (phase, None):
        fast_step = FAST_STEPS.get(kind) if fast and phase != DONE else None
        return fast_step or partial(judge, judged)

    def step(state: StreamState, chunk: Any, position: int) -> None:
        _take_step(state, kind, judged, chunk, position)

    return step


def _refuse(state: StreamState, chunk: object, position: int) -> NoReturn:
    state.position = position  # the refused chunk is not counted
    raise RuntimeError(
        "SequenceValidator.feed() after finish(): that stream has ended; "
        "use a new SequenceValidator for the next stream"
    )


#: phase -> chunk class -> step
_STEPS: Final[dict[str, dict[type, Step]]] = {
    phase: {cls: _compile(phase, kind) for cls, kind in CHUNK_TYPE.items()} for phase in PHASES
}
#: the steps once finish() was called: every chunk refused, at no cost to feed before
_REFUSED: Final[dict[type, Step]] = dict.fromkeys(CHUNK_TYPE, _refuse)


class SequenceValidator:
    """Checks a chunk stream as it flows: ``feed`` each chunk, then ``finish``.

    ``feed`` and ``finish`` return the violations they found; ``violations``
    holds all of them so far, in the order they were found. ``finish`` ends the
    stream: calling it again changes nothing, and ``feed`` after it raises
    ``RuntimeError`` (a chunk after the ``finish`` *chunk* is a P11 violation,
    but a chunk after ``finish()`` belongs to another stream).
    """

    def __init__(self, *, allow_interleaving: bool = False, json_arguments: bool = True) -> None:
        self._state = StreamState(
            allow_interleaving=allow_interleaving, json_arguments=json_arguments, steps=_STEPS[STREAMING]
        )
        self.violations: list[Violation] = self._state.violations
        # what finish() found, kept so a second call neither repeats nor loses it; None before
        self._ended: list[Violation] | None = None

    @property
    def allow_interleaving(self) -> bool:
        return self._state.allow_interleaving

    @allow_interleaving.setter
    def allow_interleaving(self, value: bool) -> None:
        self._state.allow_interleaving = value

    @property
    def json_arguments(self) -> bool:
        return self._state.json_arguments

    @json_arguments.setter
    def json_arguments(self, value: bool) -> None:
        self._state.json_arguments = value

    def feed(self, chunk: StreamChunk | Mapping[str, Any]) -> list[Violation]:
        """Check the next chunk; return the violations it caused (often none).

        A tool-call delta's id and name can only be judged against its
        ``block-end``: that feed reports them, with the delta's position.
        """
        state = self._state
        violations = state.violations
        before = len(violations)
        # the body of feed_all, inlined: this is the live stream's hot path
        position = state.position
        state.position = position + 1
        step = state.steps.get(type(chunk))
        if step is None:
            self._feed_other(chunk, position)
        else:
            step(state, chunk, position)
            state.previous = chunk
        return violations[before:] if len(violations) != before else []

    def compact(self, min_deltas: int = 1024) -> None:
        """Fold the deltas of each open block that kept ``min_deltas`` or more: the same verdicts, less memory.

        Until its ``block-end`` judges them (P6, P7), a block's deltas are kept
        as they came: the cheapest way when the caller keeps the chunks anyway.
        A caller that drops each chunk once fed (``dsh-replay check``) calls this
        every thousand chunks or so, and a block of a million deltas then costs
        a running digest and a few thousand pieces, not the million.
        """
        for block in self._state.open.values():
            if len(block.parts) >= max(min_deltas, 1):  # a fold of nothing would count as a delta
                block.fold()

    def feed_unreadable(self, reason: str) -> list[Violation]:
        """Count a chunk that could not even be read (e.g. a JSONL line that is not JSON) as P1."""
        state = self._state
        position = state.position
        if self._ended is not None:
            _refuse(state, None, position)
        state.position = position + 1
        state.report("P1", position, f"chunk at position {position} {reason}")
        return self.violations[-1:]

    def finish(self) -> list[Violation]:
        """Signal the end of the stream; return the end-of-stream violations (P11).

        A second call reports nothing new and returns what the first one did.
        """
        if self._ended is None:
            state = self._state
            self._ended = [Violation("P11", at, message) for at, message in stream_end(state)]
            self.violations.extend(self._ended)
            state.steps = _REFUSED
        return list(self._ended)

    # -- feeding ---------------------------------------------------------------------

    def feed_all(self, chunks: Iterable[StreamChunk | Mapping[str, Any]]) -> None:
        """``feed`` each of ``chunks``, with the same findings in :attr:`violations` (the batch hot path:
        no call per chunk but its step)."""
        state = self._state
        feed_other = self._feed_other
        position = state.position
        for chunk in chunks:
            state.position = position + 1
            step = state.steps.get(type(chunk))
            if step is None:
                feed_other(chunk, position)
            else:
                step(state, chunk, position)
                state.previous = chunk
            position += 1

    def _feed_other(self, data: object, position: int) -> None:
        """A JSON dict (P1 when malformed), or a value that is no chunk at all (P1)."""
        state = self._state
        if self._ended is not None:
            _refuse(state, data, position)
        if not isinstance(data, Mapping):
            state.previous = None
            state.report(
                "P1",
                position,
                f"chunk at position {position} must be a StreamChunk or a JSON object, got {data!r:.80}",
            )
            return
        chunk = self._parse(data, position)
        if chunk is not None:
            state.steps[type(chunk)](state, chunk, position)
            state.previous = chunk
            return
        kind = data.get("type")
        if isinstance(kind, str) and kind in CHUNK_KINDS:
            shapeless = LATE_JUDGES if state.phase == DONE else SHAPELESS_JUDGES
            _take_step(state, kind, shapeless[kind], None, position)
            state.previous = kind
        else:
            state.previous = None

    def _parse(self, data: Mapping[str, Any], position: int) -> StreamChunk | None:
        """The chunk ``data`` stands for; None (and P1) when it is malformed."""
        usage = data.get("usage") if data.get("type") == "usage" else None
        if isinstance(usage, Mapping):
            negative = [key for key in _COUNTS if type(usage.get(key)) is int and usage[key] < 0]
            if negative:
                # a negative count is a usage-rule problem (P8), not a shape problem
                self._state.report(
                    "P8", position, f"usage at position {position}: {', '.join(negative)} must be >= 0"
                )
                data = {**data, "usage": {**usage, **dict.fromkeys(negative, 0)}}
        try:
            return chunk_from_json(data)
        except ValueError as exc:
            self._state.report("P1", position, f"chunk at position {position}: {exc}")
            return None


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
    validator.feed_all(chunks)
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
