"""The rule table: which check judges which chunk, under which rule id.

``RULES`` lists every check of ``_block_rules`` (P2-P7j, P12) and
``_stream_rules`` (P8-P10) with its rule id and the chunk types it judges, in
rule-id order, which is also the order in which one chunk's violations are
reported. A check knows no rule id; the table gives it one. Two flags say where
else a check applies: ``fieldless`` (it reads no field, so it also judges a
malformed dict of a known type, reported as P1) and ``late`` (it also judges a
chunk after ``finish``: a second usage or finish is still counted).

From the table come three ``Judge`` tables, chunk type -> the checks to run and
the record to take afterwards:

- ``JUDGES``           a chunk before ``finish``: every check of its type;
- ``SHAPELESS_JUDGES`` a malformed dict before ``finish``: its fieldless checks;
- ``LATE_JUDGES``      any chunk after ``finish``: its late checks (P8, P9 counts).

``FAST_STEPS`` stand for ``judge(JUDGES[kind], ...)`` before usage, where
nearly every chunk is: each takes the common case, in which it tests exactly
what the checks of its type test and finds that they hold, in one call, and
hands anything else to the table. The checks stay the only word on what is
wrong; ``tests/test_rules.py`` checks that both ways agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .block_rules import (
    BLOCK_KIND,
    add_call_delta,
    arguments_json_object,
    block_kind,
    call_block,
    call_id_unique,
    closes_open_block,
    delta_not_empty,
    delta_placement,
    no_interleaving,
    record_block_end,
    record_block_start,
    record_call_delta,
    record_delta,
    text_block,
    unique_index,
)
from .chunks import BlockEnd, BlockStart, ToolCallDelta
from .stream_rules import (
    finish_once,
    finish_reason,
    record_finish,
    record_usage,
    usage_after_blocks,
    usage_before_finish,
    usage_once,
)
from .validator_state import CHUNK_KINDS, Check, OpenBlock, Step, StreamState
from .violation import Violation

__all__ = [
    "FAST_STEPS",
    "JUDGES",
    "LATE_JUDGES",
    "RULES",
    "SHAPELESS_JUDGES",
    "Judge",
    "Rule",
    "judge",
]


@dataclass(frozen=True, slots=True)
class Rule:
    """One check of rule ``id``, on chunks of the types ``chunks``."""

    id: str
    chunks: tuple[str, ...]
    check: Check
    #: reads no field of the chunk, so it also judges a malformed dict of these types
    fieldless: bool = False
    #: also judges these chunks after finish: a second usage or finish still counts
    late: bool = False
    #: a block-end check that finds nothing unless the block-end carries one of these kinds
    blocks: tuple[str, ...] = ("text", "tool-call", "reasoning")


_DELTAS = ("text-delta", "reasoning-delta", "tool-call-delta")
_END = ("block-end",)
_TOOL = ("tool-call",)

#: every check, in rule-id order (the order of one chunk's violations)
RULES: Final[tuple[Rule, ...]] = (
    Rule("P2", ("block-start",), unique_index),
    Rule("P3", ("block-start",), no_interleaving),
    Rule("P4", _DELTAS, delta_placement),
    Rule("P5", _END, closes_open_block),
    Rule("P6", ("text-delta", "reasoning-delta"), delta_not_empty),
    Rule("P6", _END, text_block, blocks=("text", "reasoning")),
    Rule("P7", _END, call_block, blocks=_TOOL),
    Rule("P7j", _END, arguments_json_object, blocks=_TOOL),
    Rule("P8", ("usage",), usage_once, fieldless=True, late=True),
    Rule("P8", ("usage",), usage_after_blocks, fieldless=True),
    Rule("P8", ("finish",), usage_before_finish, fieldless=True),
    Rule("P9", ("finish",), finish_once, fieldless=True, late=True),
    Rule("P10", ("finish",), finish_reason),
    Rule("P12", _END, call_id_unique, blocks=_TOOL),
)

#: what a chunk of each type changes in the state, after its checks
_RECORDS: Final[dict[str, Step]] = {
    "block-start": record_block_start,
    "text-delta": record_delta,
    "reasoning-delta": record_delta,
    "tool-call-delta": record_call_delta,
    "block-end": record_block_end,
    "usage": record_usage,
    "finish": record_finish,
}
#: the records that read no field of the chunk
_FIELDLESS_RECORDS: Final = frozenset(("usage", "finish"))


@dataclass(frozen=True, slots=True)
class Judge:
    """How a chunk of one type is judged: the checks with their rule ids, then its record."""

    checks: tuple[tuple[str, Check], ...]
    record: Step | None


def _judges(keep: Callable[[Rule], bool], recorded: Callable[[str], bool]) -> dict[str, Judge]:
    return {
        kind: Judge(
            tuple((rule.id, rule.check) for rule in RULES if kind in rule.chunks and keep(rule)),
            _RECORDS[kind] if recorded(kind) else None,
        )
        for kind in sorted(CHUNK_KINDS)
    }


#: a chunk before finish
JUDGES: Final = _judges(lambda rule: True, lambda kind: True)
#: a malformed dict of a known type (P1) before finish: what needs none of its fields
SHAPELESS_JUDGES: Final = _judges(lambda rule: rule.fieldless, _FIELDLESS_RECORDS.__contains__)
#: any chunk after finish (P11): only whether it repeats a once-per-stream chunk
LATE_JUDGES: Final = _judges(lambda rule: rule.late, _FIELDLESS_RECORDS.__contains__)


def judge(judged: Judge, state: StreamState, chunk: Any, position: int) -> None:
    """Run the checks of ``judged`` on ``chunk``, report what they find, then record it."""
    for rule, check in judged.checks:
        found = check(state, chunk, position)
        if found:
            state.violations += [Violation(rule, at, message) for at, message in found]
    if judged.record is not None:
        judged.record(state, chunk, position)


# -- fast steps --------------------------------------------------------------------


def _start_step(state: StreamState, chunk: BlockStart, position: int) -> None:
    index = chunk.index
    if index in state.used_indexes or (state.open and not state.allow_interleaving):  # P2, P3
        judge(JUDGES["block-start"], state, chunk, position)
        return
    state.used_indexes.add(index)
    if chunk.block_type == "tool-call":
        state.tool_blocks += 1
    state.open[index] = OpenBlock(chunk.block_type, position)


def _text_step(block_type: str) -> Step:
    judged = JUDGES[f"{block_type}-delta"]

    def take(state: StreamState, chunk: Any, position: int) -> None:
        block = state.open.get(chunk.index)
        text = chunk.text
        if text and block is not None and block.block_type == block_type:  # P4, P6
            block.parts.append(text)
        else:
            judge(judged, state, chunk, position)

    return take


def _call_step(state: StreamState, chunk: ToolCallDelta, position: int) -> None:
    block = state.open.get(chunk.index)
    if block is not None and block.block_type == "tool-call":  # P4
        add_call_delta(block, chunk, position)
    else:
        judge(JUDGES["tool-call-delta"], state, chunk, position)


#: the block-end checks that can find something, by the kind of block carried
_END_JUDGES: Final = {
    kind: Judge(
        tuple((rule.id, rule.check) for rule in RULES if "block-end" in rule.chunks and kind in rule.blocks),
        record_block_end,
    )
    for kind in ("text", "tool-call", "reasoning")
}


def _end_step(state: StreamState, chunk: BlockEnd, position: int) -> None:
    carried = chunk.block
    kind = BLOCK_KIND.get(type(carried)) or block_kind(carried)
    if kind != "tool-call":
        block = state.open.get(chunk.index)
        # P5 and P6, the only checks of a text or reasoning block-end
        if (
            block is not None
            and block.block_type == kind
            and block.parts
            and block.folded is None
            and "".join(block.parts) == carried.text  # type: ignore[union-attr]
        ):
            del state.open[chunk.index]
            return
    judge(_END_JUDGES.get(kind, JUDGES["block-end"]), state, chunk, position)


#: the steps that stand for ``judge(JUDGES[kind], ...)`` before usage, faster
FAST_STEPS: Final[dict[str, Step]] = {
    "block-start": _start_step,
    "text-delta": _text_step("text"),
    "reasoning-delta": _text_step("reasoning"),
    "tool-call-delta": _call_step,
    "block-end": _end_step,
}
