"""Long blocks: their deltas are folded, not kept, and judged exactly as if they had been joined.

A 200 MB body's answer is one text block of ~1.5 M deltas. The sequencer folds
the pieces of an item into UTF-8 as they come and decodes them once for its
``block-end``; the validator, when asked (``SequenceValidator.compact``, as
``dsh-replay check`` does), folds an open block's deltas into a running digest,
its length and its first characters. Either way the result must be what joining
every piece gave: the same ``block-end`` text, the same verdicts (P6, P7, P7j) and
the same messages, for any cut of the text into pieces and any folding points:
lone surrogates (half of a pair in each of two deltas) and astral characters
included, since both change what a piece is in UTF-8.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_replay import (
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    SequenceValidator,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
    Violation,
)
from dsh_replay.protocol.validator_state import OpenBlock
from dsh_replay.wire import sequencer
from dsh_replay.wire.sequencer import BlockSequencer

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: characters that differ in UTF-8 width, astral ones, and both halves of a surrogate pair
_CHARS = st.sampled_from(["a", "b", " ", "\n", "é", "東", "\U0001f600", "\ud83d", "\ude00", '"', "{", "}"])
_PIECE = st.text(_CHARS, max_size=6)
_PIECES = st.lists(_PIECE, min_size=0, max_size=40)


def _mutations(joined: str) -> st.SearchStrategy[str]:
    """The joined text itself, or texts near it: one character changed, one more, one fewer, another text."""
    near = [joined, joined + "a", joined[:-1], "{}", ""]
    if joined:
        near += [joined[:-1] + ("b" if joined[-1] != "b" else "c"), "x" + joined[1:], joined[::-1]]
    return st.sampled_from(near) | st.text(_CHARS, max_size=12)


def _stream(kind: str, pieces: list[str], carried: str) -> list[StreamChunk]:
    """One block of ``kind`` with a delta per piece, closed carrying ``carried``, then usage and finish."""
    if kind == "tool-call":
        deltas: list[StreamChunk] = [
            ToolCallDelta(index=0, id=CallId("call-1"), name="bash", arguments_delta=p) for p in pieces
        ]
        block: Any = ToolCallBlock(id=CallId("call-1"), name="bash", arguments=carried)
    elif kind == "text":
        deltas = [TextDelta(index=0, text=p) for p in pieces]
        block = TextBlock(text=carried)
    else:
        deltas = [ReasoningDelta(index=0, text=p) for p in pieces]
        block = ReasoningBlock(text=carried)
    reason = "tool-calls" if kind == "tool-call" else "stop"
    return [
        BlockStart(index=0, block_type=kind),  # type: ignore[arg-type]
        *deltas,
        BlockEnd(index=0, block=block),
        UsageChunk(usage=Usage(input_tokens=1, output_tokens=1)),
        Finish(reason=FinishReason(kind=reason)),  # type: ignore[arg-type]
    ]


def _judged(
    chunks: list[StreamChunk], compact_after: frozenset[int] = frozenset(), keep: int = 1, **options: Any
) -> list[Violation]:
    """The violations of ``chunks``, the validator compacted after each position in ``compact_after``."""
    validator = SequenceValidator(**options)
    for position, chunk in enumerate(chunks):
        validator.feed(chunk)
        if position in compact_after:
            validator.compact(min_deltas=keep)
    validator.finish()
    return validator.violations


# -- the validator -----------------------------------------------------------------


@PROPERTY
@given(
    kind=st.sampled_from(["text", "reasoning", "tool-call"]),
    pieces=_PIECES,
    data=st.data(),
)
def test_a_compacted_block_is_judged_as_its_deltas_joined(kind: str, pieces: list[str], data: st.DataObject) -> None:
    carried = data.draw(_mutations("".join(pieces)), label="carried")
    chunks = _stream(kind, pieces, carried)
    folds = data.draw(st.frozensets(st.integers(0, len(chunks) - 1)), label="compact after")
    keep = data.draw(st.integers(1, 3), label="min_deltas")
    # the reference is the validator that keeps every delta and joins them at block-end
    assert _judged(chunks, folds, keep) == _judged(chunks)


@PROPERTY
@given(
    kind=st.sampled_from(["text", "tool-call"]),
    pieces=st.lists(_PIECE, min_size=1, max_size=40),
    data=st.data(),
)
def test_a_difference_past_the_first_characters_is_found_by_the_digest(
    kind: str, pieces: list[str], data: st.DataObject
) -> None:
    # past the first 256 characters (all a folded block keeps) and of the same length: only the digest tells
    pieces = ["0123456789" * 30, *pieces]
    joined = "".join(pieces)
    at = data.draw(st.integers(300, len(joined)), label="changed at")
    other = data.draw(_CHARS.filter(lambda char: joined[at : at + 1] != char), label="into")
    carried = data.draw(st.sampled_from([joined, joined[:at] + other + joined[at + 1 :]]), label="carried")
    chunks = _stream(kind, pieces, carried)
    folds = data.draw(st.frozensets(st.integers(1, len(chunks) - 1), min_size=1), label="compact after")
    assert _judged(chunks, folds) == _judged(chunks)


@PROPERTY
@given(pieces=_PIECES, data=st.data())
def test_a_folded_block_answers_as_the_join(pieces: list[str], data: st.DataObject) -> None:
    joined = "".join(pieces)
    block = OpenBlock("text", 0)
    folds = data.draw(st.sets(st.integers(0, len(pieces))), label="fold before")
    for at, piece in enumerate(pieces):
        if at in folds and block.parts:
            block.fold()
        block.parts.append(piece)
    assert block.has_deltas == bool(pieces)
    assert block.joined_length() == len(joined)
    head = block.joined_head()
    # the message quotes 60 characters: the head has as many as the join, or more than 60
    assert joined.startswith(head) and (head == joined or len(head) > 60)
    for other in data.draw(st.lists(_mutations(joined), min_size=1, max_size=4), label="compared with"):
        assert block.joined_is(other) == (other == joined)


def _long_text(count: int) -> list[str]:
    words = [" the", " caf\u00e9", " \U0001f600", ",", " \u6771\u4eac", "\n\n"]
    return [words[n % len(words)] for n in range(count)]


def _compacted_as_check_does(chunks: list[StreamChunk]) -> tuple[list[Violation], bool]:
    """(violations, whether a block was folded), compacting every 1024 chunks as ``check`` does."""
    validator, folded = SequenceValidator(), False
    for count, chunk in enumerate(chunks, start=1):
        validator.feed(chunk)
        if not count & 1023:
            validator.compact()
            folded |= any(block.folded is not None for block in validator._state.open.values())
    validator.finish()
    return validator.violations, folded


@pytest.mark.parametrize(
    "change",
    ["none", "one character in the middle", "one character more", "one character fewer", "empty"],
)
def test_a_long_block_compacted_as_check_does(change: str) -> None:
    pieces = _long_text(5000)
    joined = "".join(pieces)
    carried = {
        "none": joined,
        "one character in the middle": joined[:3000] + "X" + joined[3001:],
        "one character more": joined + ".",
        "one character fewer": joined[:-1],
        "empty": "",
    }[change]
    chunks = _stream("text", pieces, carried)
    found, folded = _compacted_as_check_does(chunks)
    assert folded  # the digest, not the pieces, judged this block
    assert found == _judged(chunks)
    if change == "none":
        assert found == []
    else:
        assert [(v.rule, v.position) for v in found] == [("P6", 5001)]
        assert found[0].message.startswith(
            f"block-end at position 5001: text block 0 carries text {_clip(carried)}, "
            f"but its deltas joined are {_clip(joined)}"
        )


def _clip(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:59] + "…")


def test_half_pairs_in_two_deltas_are_not_the_astral_character() -> None:
    # Python does not pair surrogates: the two halves are two characters, as the old join compared them
    for keep in (1, 2):
        pieces = ["a", "\ud83d", "\ude00"]
        assert _judged(_stream("text", pieces, "a\ud83d\ude00"), frozenset({1, 2, 3}), keep) == []
        wrong = _judged(_stream("text", pieces, "a\U0001f600"), frozenset({1, 2, 3}), keep)
        assert wrong == _judged(_stream("text", pieces, "a\U0001f600"))
        assert [v.rule for v in wrong] == ["P6"]


def test_compact_keeps_short_blocks_as_they_are() -> None:
    validator = SequenceValidator()
    for chunk in _stream("text", ["a", "b"], "ab")[:3]:
        validator.feed(chunk)
    validator.compact()  # 2 deltas: fewer than the default 1024
    assert validator._state.open[0].folded is None
    validator.compact(min_deltas=0)  # at least one delta, whatever is asked
    assert validator._state.open[0].folded is not None


# -- the sequencer -----------------------------------------------------------------


@pytest.fixture
def fold_at() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _sequenced(kind: str, pieces: list[str]) -> list[StreamChunk]:
    seq = BlockSequencer()
    out: list[StreamChunk] = []
    for piece in pieces:
        if kind == "text":
            out += seq.text(piece)
        elif kind == "reasoning":
            out += seq.reasoning(piece)
        else:
            out += seq.tool_call(("tool", 0), call_id="call-1", name="bash", arguments=piece)
    return out + seq.finish(usage=Usage(input_tokens=1, output_tokens=1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(["text", "reasoning", "tool-call"]),
    pieces=st.lists(_PIECE.filter(bool), min_size=1, max_size=40),
    every=st.integers(1, 5),
)
def test_the_sequencer_ends_a_block_with_every_piece(
    fold_at: pytest.MonkeyPatch, kind: str, pieces: list[str], every: int
) -> None:
    fold_at.setattr(sequencer, "_FOLD_AT", every)
    chunks = _sequenced(kind, pieces)
    (end,) = [chunk for chunk in chunks if isinstance(chunk, BlockEnd)]
    carried = end.block.arguments if isinstance(end.block, ToolCallBlock) else end.block.text
    assert carried == "".join(pieces)
    deltas = [c for c in chunks if isinstance(c, (TextDelta, ReasoningDelta, ToolCallDelta))]
    assert [d.arguments_delta if isinstance(d, ToolCallDelta) else d.text for d in deltas] == pieces
    assert _judged(chunks, json_arguments=False) == []  # arguments of any text: P7j is not the sequencer's


def test_a_long_text_run_is_sequenced_whole_and_valid() -> None:
    # the last piece before the sequencer's first fold is half of a pair, the next piece the other half
    pieces = [*_long_text(sequencer._FOLD_AT - 1), "\ud83d", "\ude00", *_long_text(2000)]
    chunks = _sequenced("text", pieces)
    assert chunks[-3] == BlockEnd(index=0, block=TextBlock(text="".join(pieces)))
    found, folded = _compacted_as_check_does(chunks)
    assert (found, folded) == ([], True)


def test_an_item_that_waits_in_the_queue_keeps_its_pieces_in_order(fold_at: pytest.MonkeyPatch) -> None:
    fold_at.setattr(sequencer, "_FOLD_AT", 2)
    seq = BlockSequencer()
    out = seq.tool_call(("tool", 0), call_id="call-1", name="bash", arguments='{"a":')
    for piece in ["x", "y", "\U0001f600", "z"]:  # text waits behind the open call, folded as it waits
        out += seq.text(piece)
    out += seq.tool_call(("tool", 0), arguments="1}")
    out += seq.end(("tool", 0))
    out += seq.finish(usage=Usage(input_tokens=1, output_tokens=1))
    ends = [chunk.block for chunk in out if isinstance(chunk, BlockEnd)]
    assert ends == [
        ToolCallBlock(id=CallId("call-1"), name="bash", arguments='{"a":1}'),
        TextBlock(text="xy\U0001f600z"),
    ]
    assert _judged(out) == []
