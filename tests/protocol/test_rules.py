"""The validator's tables (``rules.RULES``, ``validator_state.TRANSITIONS``).

What each rule finds is tested in ``test_validator.py``; these tests check that
the tables say what the theory of operation says, that the fast steps agree
with the plain table (the layering is in ``tests/test_architecture.py``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_replay import (
    BlockEnd,
    ReasoningBlock,
    ReasoningDelta,
    SequenceValidator,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallDelta,
    check_chunk_sequence,
    chunk_to_json,
)
from dsh_replay.protocol.rules import FAST_STEPS, JUDGES, LATE_JUDGES, RULES, SHAPELESS_JUDGES
from dsh_replay.protocol.stream_rules import stream_end
from dsh_replay.protocol.validator import _STEPS, _compile
from dsh_replay.protocol.validator_state import (
    AFTER_USAGE,
    BLOCK_CHUNKS,
    CHUNK_KINDS,
    CHUNK_TYPE,
    DONE,
    PHASES,
    STREAMING,
    TRANSITIONS,
)

try:
    from tests.strategies import interleaved_sequences, near_chunks, valid_sequences
except ImportError:  # tests/ is not a package: pytest put it on sys.path itself
    from strategies import interleaved_sequences, near_chunks, valid_sequences  # type: ignore[no-redef, import-not-found]

SPEC_RULES = ["P1", "P2", "P3", "P4", "P5", "P6", "P7", "P7j", "P8", "P9", "P10", "P11", "P12"]
PACKAGE = Path(importlib.util.find_spec("dsh_replay").origin).parent  # type: ignore[arg-type, union-attr]
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- the rule table -------------------------------------------------------------------


def test_every_check_states_its_rule_first() -> None:
    """A check's docstring opens with the id the table gives it: the check reads on its own."""
    for rule in RULES:
        doc = rule.check.__doc__ or ""
        assert doc.startswith(f"{rule.id}: "), (rule.id, rule.check.__name__, doc)
    assert (stream_end.__doc__ or "").startswith("P11: ")


def test_rules_are_in_rule_id_order_and_judge_known_chunks() -> None:
    order = [SPEC_RULES.index(rule.id) for rule in RULES]
    assert order == sorted(order)
    assert all(set(rule.chunks) <= CHUNK_KINDS and rule.chunks for rule in RULES)


def test_every_spec_rule_is_enforced_somewhere() -> None:
    by_table = {rule.id for rule in RULES}
    by_steps = {illegal[0] for row in TRANSITIONS.values() for _, illegal in row.values() if illegal}
    # P1 is the reading of a dict; P11 also ends the stream (stream_end)
    assert by_table | by_steps | {"P1", "P11"} == set(SPEC_RULES)
    assert by_steps == {"P9", "P11"}


def test_judges_follow_the_flags() -> None:
    for kind in CHUNK_KINDS:
        everything = [(r.id, r.check) for r in RULES if kind in r.chunks]
        assert list(JUDGES[kind].checks) == everything
        assert list(SHAPELESS_JUDGES[kind].checks) == [(r.id, r.check) for r in RULES if kind in r.chunks and r.fieldless]
        assert list(LATE_JUDGES[kind].checks) == [(r.id, r.check) for r in RULES if kind in r.chunks and r.late]
    # after finish, only the counts: a second usage (P8) or finish (P9)
    assert {k: [rule for rule, _ in j.checks] for k, j in LATE_JUDGES.items() if j.checks} == {
        "usage": ["P8"],
        "finish": ["P9"],
    }
    assert all(j.record is None for k, j in SHAPELESS_JUDGES.items() if k in BLOCK_CHUNKS)


# -- the phase table ---------------------------------------------------------------------


def test_transitions_cover_every_phase_and_chunk_type() -> None:
    assert set(TRANSITIONS) == set(PHASES)
    for row in TRANSITIONS.values():
        assert set(row) == CHUNK_KINDS
        assert all(next_phase in PHASES for next_phase, _ in row.values())


def test_transitions_read_as_the_theory_of_operation() -> None:
    legal = {
        (phase, kind): next_phase
        for phase, row in TRANSITIONS.items()
        for kind, (next_phase, illegal) in row.items()
        if illegal is None
    }
    assert legal == {
        **{(STREAMING, kind): STREAMING for kind in BLOCK_CHUNKS},
        (STREAMING, "usage"): AFTER_USAGE,
        (AFTER_USAGE, "usage"): AFTER_USAGE,  # in order; P8 counts the second usage
        (AFTER_USAGE, "finish"): DONE,
    }
    assert TRANSITIONS[STREAMING]["finish"] == (DONE, ("P9", "finish must directly follow usage"))
    assert {illegal for _, illegal in TRANSITIONS[DONE].values()} == {("P11", "nothing may follow finish")}
    assert all(row[1] == (AFTER_USAGE, ("P9", "only finish may follow usage")) for row in (
        (kind, TRANSITIONS[AFTER_USAGE][kind]) for kind in BLOCK_CHUNKS
    ))


# -- the fast steps agree with the plain table -------------------------------------------

_PLAIN = {cls: _compile(STREAMING, kind, fast=False) for cls, kind in CHUNK_TYPE.items()}


def test_fast_steps_stand_for_block_chunks_only_while_streaming() -> None:
    assert set(FAST_STEPS) <= set(BLOCK_CHUNKS)
    fast = set(FAST_STEPS.values())
    assert {_STEPS[STREAMING][cls] for cls, kind in CHUNK_TYPE.items() if kind in FAST_STEPS} == fast
    for phase in (AFTER_USAGE, DONE):
        assert not set(_STEPS[phase].values()) & fast, phase


def _alter(chunk: Any, data: st.DataObject) -> Any:
    """``chunk`` with what a fast step tests changed: its index, its text, its kind, its block."""
    if not dataclasses.is_dataclass(chunk) or not hasattr(chunk, "index"):
        return chunk
    how = data.draw(st.sampled_from(["index", "blank", "kind", "block"]))
    if how == "index":
        return dataclasses.replace(chunk, index=data.draw(st.integers(0, 3)))
    if how == "blank" and isinstance(chunk, (TextDelta, ReasoningDelta)):
        return dataclasses.replace(chunk, text="")
    if how == "blank" and isinstance(chunk, ToolCallDelta):
        return dataclasses.replace(chunk, arguments_delta="")
    if how == "kind" and isinstance(chunk, (TextDelta, ReasoningDelta)):
        other = ReasoningDelta if isinstance(chunk, TextDelta) else TextDelta
        return other(index=chunk.index, text=chunk.text)
    if how == "block" and isinstance(chunk, BlockEnd) and isinstance(chunk.block, (TextBlock, ReasoningBlock)):
        text = data.draw(st.sampled_from(["", chunk.block.text + "!", chunk.block.text[1:]]))
        block = TextBlock(text=text) if data.draw(st.booleans()) else ReasoningBlock(text=text)
        return dataclasses.replace(chunk, block=block)
    return chunk


def _plain_check(chunks: list[Any], **opts: Any) -> list[Any]:
    """``check_chunk_sequence`` with every step taken by the plain rule table, one chunk at a time."""
    validator = SequenceValidator(**opts)
    validator._state.steps = _PLAIN  # only the streaming phase has fast steps
    for chunk in chunks:
        validator.feed(chunk)
    validator.finish()
    return sorted(validator.violations, key=lambda v: v.position)


def _agree(chunks: list[Any]) -> None:
    for opts in ({}, {"allow_interleaving": True}, {"json_arguments": False}):
        assert check_chunk_sequence(chunks, **opts) == _plain_check(chunks, **opts), (chunks, opts)


@FAST
@given(valid_sequences(max_blocks=4))
def test_fast_steps_agree_on_valid_sequences(chunks: list[StreamChunk]) -> None:
    _agree(chunks)


@FAST
@given(interleaved_sequences(max_blocks=4))
def test_fast_steps_agree_on_interleaved_sequences(chunks: list[StreamChunk]) -> None:
    _agree(chunks)


@FAST
@given(valid_sequences(max_blocks=3), st.data())
def test_fast_steps_agree_on_shuffled_and_spliced_sequences(chunks: list[StreamChunk], data: st.DataObject) -> None:
    """Chunks moved, repeated or dropped, and near chunks spliced in: every rule gets to fire."""
    values: list[Any] = list(chunks)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(values) - 1))
        move = data.draw(st.sampled_from(["drop", "repeat", "swap", "splice", "alter"]))
        if move == "drop" and len(values) > 1:
            values.pop(i)
        elif move == "repeat":
            values.insert(i, values[i])
        elif move == "swap" and i + 1 < len(values):
            values[i], values[i + 1] = values[i + 1], values[i]
        elif move == "splice":
            values.insert(i, data.draw(near_chunks()))
        else:
            values[i] = _alter(values[i], data)
    _agree(values)
    _agree([chunk_to_json(v) if not isinstance(v, dict) and type(v) in CHUNK_TYPE else v for v in values])
