"""The StreamChunk rules P1-P12 (SPEC §3), as checked by ``dsh_replay.protocol.validator``.

Each rule has sequences that break it and nothing else; the tests assert the
exact ``(rule, position)`` list and that the message says what was expected.
Sequences are checked as chunk objects and as their JSON dicts, which must give
the same violations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dsh_replay import (
    BlockEnd,
    BlockStart,
    CallId,
    DshReplayError,
    Finish,
    FinishReason,
    ProtocolViolation,
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
    assert_chunk_sequence,
    check_chunk_sequence,
    chunk_from_json,
    chunk_to_json,
)

try:
    from tests.strategies import interleaved_sequences, json_values, near_chunks, valid_sequences
except ImportError:  # tests/ is not a package: pytest put it on sys.path itself
    from strategies import interleaved_sequences, json_values, near_chunks, valid_sequences  # type: ignore[no-redef, import-not-found]

RULES = {"P1", "P2", "P3", "P4", "P5", "P6", "P7", "P7j", "P8", "P9", "P10", "P11", "P12"}
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- builders ------------------------------------------------------------------------


def bs(index: int, block_type: str) -> BlockStart:
    return BlockStart(index=index, block_type=block_type)  # type: ignore[arg-type]


def td(index: int, text: str) -> TextDelta:
    return TextDelta(index=index, text=text)


def rd(index: int, text: str) -> ReasoningDelta:
    return ReasoningDelta(index=index, text=text)


def tcd(index: int, args: str, *, id: str = "call-1", name: str = "bash") -> ToolCallDelta:
    return ToolCallDelta(index=index, id=CallId(id), name=name, arguments_delta=args)


def te(index: int, text: str) -> BlockEnd:
    return BlockEnd(index=index, block=TextBlock(text=text))


def re_(index: int, text: str, signature: str | None = None) -> BlockEnd:
    return BlockEnd(index=index, block=ReasoningBlock(text=text, signature=signature))


def tce(index: int, args: str, *, id: str = "call-1", name: str = "bash") -> BlockEnd:
    return BlockEnd(index=index, block=ToolCallBlock(id=CallId(id), name=name, arguments=args))


def usage(input_tokens: int = 10, output_tokens: int = 5) -> UsageChunk:
    return UsageChunk(usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens))


def fin(kind: str = "stop") -> Finish:
    return Finish(reason=FinishReason(kind=kind))  # type: ignore[arg-type]


STOP: list[StreamChunk] = [usage(), fin("stop")]
CALLS: list[StreamChunk] = [usage(), fin("tool-calls")]
TEXT0: list[StreamChunk] = [bs(0, "text"), td(0, "Hel"), td(0, "lo"), te(0, "Hello")]

#: The seed's exampleChunks (text block 0, tool-call block 1, usage, finish).
SEED: list[StreamChunk] = [
    bs(0, "text"),
    td(0, "runoob"),
    td(0, " 教程"),
    te(0, "runoob 教程"),
    bs(1, "tool-call"),
    tcd(1, '{"command":"echo runoob"}', id="call-123", name="bash"),
    tce(1, '{"command":"echo runoob"}', id="call-123", name="bash"),
    UsageChunk(usage=Usage(input_tokens=100, output_tokens=50)),
]


def pairs(violations: list[Violation]) -> list[tuple[str, int]]:
    return [(v.rule, v.position) for v in violations]


def check(chunks: list[Any], **opts: Any) -> list[Violation]:
    """Violations of ``chunks``; the same sequence as JSON dicts must give the same ones."""
    found = check_chunk_sequence(chunks, **opts)
    as_dicts = [chunk_to_json(c) if not isinstance(c, dict) else c for c in chunks]
    assert check_chunk_sequence(as_dicts, **opts) == found
    return found


@dataclass(frozen=True)
class Case:
    id: str
    chunks: list[Any]
    expected: list[tuple[str, int]]
    says: tuple[str, ...] = ()
    opts: tuple[tuple[str, Any], ...] = ()


def run_case(case: Case) -> None:
    found = check(case.chunks, **dict(case.opts))
    assert pairs(found) == case.expected, found
    for text in case.says:
        assert any(text in v.message for v in found), (text, found)


def cases(*items: Case) -> Callable[[Callable[[Case], None]], Callable[[Case], None]]:
    mark: Callable[[Callable[[Case], None]], Callable[[Case], None]] = pytest.mark.parametrize(
        "case", items, ids=[c.id for c in items]
    )
    return mark


# -- the seed and the empty generation ---------------------------------------------


def test_seed_example_is_valid_with_tool_calls() -> None:
    assert check([*SEED, fin("tool-calls")]) == []


def test_seed_example_with_stop_breaks_p10_only() -> None:
    found = check([*SEED, fin("stop")])
    assert pairs(found) == [("P10", 8)]
    assert "'tool-calls'" in found[0].message
    assert "1 tool-call block" in found[0].message


def test_empty_generation_is_valid() -> None:
    assert check([usage(0, 0), fin("stop")]) == []


def test_empty_generation_with_tool_calls_breaks_p10() -> None:
    found = check([usage(), fin("tool-calls")])
    assert pairs(found) == [("P10", 1)]
    assert "no tool-call block" in found[0].message and "'stop'" in found[0].message


def test_optional_fields_are_valid() -> None:
    chunks = [
        bs(0, "reasoning"),
        rd(0, "think"),
        re_(0, "think", signature="sig=="),
        bs(1, "text"),
        td(1, "ok"),
        te(1, "ok"),
        UsageChunk(usage=Usage(input_tokens=1, output_tokens=2, cached_input_tokens=0, reasoning_tokens=9)),
        Finish(reason=FinishReason(kind="stop", raw="end_turn")),
    ]
    assert check(chunks) == []


# -- P1 shape -------------------------------------------------------------------------

_TEXT_BLOCK_DICTS = [chunk_to_json(c) for c in TEXT0]
_STOP_DICTS = [chunk_to_json(c) for c in STOP]

#: malformed chunks inserted inside a valid text block (position 2): nothing else breaks
_INSERTED: list[tuple[str, Any, str]] = [
    ("missing-text", {"type": "text-delta", "index": 0}, "missing field 'text'"),
    ("bool-index", {"type": "text-delta", "index": True, "text": "x"}, "'index' must be int, got bool"),
    ("str-index", {"type": "text-delta", "index": "0", "text": "x"}, "'index' must be int, got str"),
    ("float-index", {"type": "text-delta", "index": 0.0, "text": "x"}, "must be int, got float"),
    ("negative-index", {"type": "text-delta", "index": -1, "text": "x"}, "index must be an int >= 0"),
    ("int-text", {"type": "text-delta", "index": 0, "text": 5}, "'text' must be str, got int"),
    ("null-text", {"type": "reasoning-delta", "index": 0, "text": None}, "'text' must be str, got NoneType"),
    (
        "missing-argumentsDelta",
        {"type": "tool-call-delta", "index": 0, "id": "c", "name": "n"},
        "missing field 'argumentsDelta'",
    ),
    (
        "int-id",
        {"type": "tool-call-delta", "index": 0, "id": 1, "name": "n", "argumentsDelta": ""},
        "'id' must be str, got int",
    ),
    ("unknown-blockType", {"type": "block-start", "index": 7, "blockType": "image"}, "'image'"),
    ("list-blockType", {"type": "block-start", "index": 7, "blockType": ["text"]}, "'blockType' must be str"),
    ("missing-blockType", {"type": "block-start", "index": 7}, "missing field 'blockType'"),
    (
        "unknown-block-type",
        {"type": "block-end", "index": 0, "block": {"type": "image", "text": "a"}},
        "unknown block type 'image'",
    ),
    ("block-not-object", {"type": "block-end", "index": 0, "block": "text"}, "'block' must be Mapping"),
    (
        "tool-block-missing-arguments",
        {"type": "block-end", "index": 0, "block": {"type": "tool-call", "id": "x", "name": "n"}},
        "missing field 'arguments'",
    ),
    (
        "signature-not-str",
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "a", "signature": 3}},
        "'signature' must be str",
    ),
    ("unknown-type", {"type": "bogus"}, "unknown chunk type 'bogus'"),
    ("wrong-case-type", {"type": "Text-Delta", "index": 0, "text": "x"}, "unknown chunk type 'Text-Delta'"),
    ("null-type", {"type": None}, "unknown chunk type None"),
    ("list-type", {"type": ["text-delta"], "index": 0, "text": "x"}, "unknown chunk type ['text-delta']"),
    ("no-type", {}, "unknown chunk type None"),
    ("raised-line", {"type": "raised", "error": "E", "message": "m"}, "unknown chunk type 'raised'"),
    ("list", [], "must be a StreamChunk or a JSON object, got []"),
    ("str", "text-delta", "got 'text-delta'"),
    ("int", 3, "got 3"),
    ("none", None, "got None"),
    ("bool", True, "got True"),
    ("object", object(), "got <object object"),
]


@pytest.mark.parametrize(("bad", "says"), [(b, s) for _, b, s in _INSERTED], ids=[i for i, _, _ in _INSERTED])
def test_p1_malformed_chunk_is_reported_and_skipped(bad: Any, says: str) -> None:
    chunks = [*_TEXT_BLOCK_DICTS[:2], bad, *_TEXT_BLOCK_DICTS[2:], *_STOP_DICTS]
    found = check_chunk_sequence(chunks)
    assert pairs(found) == [("P1", 2)], found
    assert says in found[0].message
    assert "position 2" in found[0].message


_REPLACED_TAIL: list[tuple[str, Any, int, str]] = [
    ("usage-missing", {"type": "usage"}, 0, "missing field 'usage'"),
    ("usage-not-object", {"type": "usage", "usage": [1, 2]}, 0, "'usage' must be Mapping, got list"),
    ("usage-bool-count", {"type": "usage", "usage": {"inputTokens": True, "outputTokens": 1}}, 0, "got bool"),
    ("usage-float-count", {"type": "usage", "usage": {"inputTokens": 1.5, "outputTokens": 1}}, 0, "got float"),
    ("usage-missing-output", {"type": "usage", "usage": {"inputTokens": 1}}, 0, "missing field 'outputTokens'"),
    (
        "usage-str-cached",
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1, "cachedInputTokens": "3"}},
        0,
        "'cachedInputTokens' must be int, got str",
    ),
    ("finish-missing-reason", {"type": "finish"}, 1, "missing field 'reason'"),
    ("finish-unknown-kind", {"type": "finish", "reason": {"kind": "length"}}, 1, "'length'"),
    ("finish-bool-kind", {"type": "finish", "reason": {"kind": True}}, 1, "'kind' must be str, got bool"),
    ("finish-reason-str", {"type": "finish", "reason": "stop"}, 1, "'reason' must be Mapping, got str"),
    ("finish-raw-int", {"type": "finish", "reason": {"kind": "stop", "raw": 5}}, 1, "'raw' must be str"),
]


@pytest.mark.parametrize(
    ("bad", "slot", "says"), [(b, i, s) for _, b, i, s in _REPLACED_TAIL], ids=[c[0] for c in _REPLACED_TAIL]
)
def test_p1_malformed_usage_or_finish_still_counts_for_order(bad: Any, slot: int, says: str) -> None:
    """A bad usage/finish is P1 only: it is not also a missing usage (P8/P9) or finish (P11)."""
    tail = list(_STOP_DICTS)
    tail[slot] = bad
    found = check_chunk_sequence([*_TEXT_BLOCK_DICTS, *tail])
    assert pairs(found) == [("P1", 4 + slot)], found
    assert says in found[0].message


def test_p1_malformed_finish_then_more_is_p11() -> None:
    """The bad finish still ends the stream; the usage after it is late (P11) and a second one (P8)."""
    chunks = [*_STOP_DICTS[:1], {"type": "finish", "reason": {"kind": "length"}}, _STOP_DICTS[0]]
    assert pairs(check_chunk_sequence(chunks)) == [("P1", 1), ("P11", 2), ("P8", 2)]


def test_p1_malformed_second_finish_is_p9_too() -> None:
    chunks = [*_STOP_DICTS, {"type": "finish", "reason": {"kind": "length"}}]
    found = check_chunk_sequence(chunks)
    assert pairs(found) == [("P1", 2), ("P11", 2), ("P9", 2)]
    assert "the first came at position 1" in found[2].message


class NotAChunk:
    pass


def test_p1_for_object_that_is_no_chunk() -> None:
    found = check_chunk_sequence([*TEXT0[:2], NotAChunk(), *TEXT0[2:], *STOP])  # type: ignore[list-item]
    assert pairs(found) == [("P1", 2)]
    assert "NotAChunk" in found[0].message


def test_p1_malformed_block_start_cascades_to_its_block() -> None:
    """A block-start that cannot be read opens nothing: its deltas and end are misplaced."""
    chunks = [{"type": "block-start", "index": 0, "blockType": "image"}, *_TEXT_BLOCK_DICTS[1:], *_STOP_DICTS]
    assert pairs(check_chunk_sequence(chunks)) == [("P1", 0), ("P4", 1), ("P4", 2), ("P5", 3)]


def test_p8_negative_count_and_bad_shape_gives_both() -> None:
    bad = {"type": "usage", "usage": {"inputTokens": -3, "outputTokens": "x"}}
    found = check_chunk_sequence([*_TEXT_BLOCK_DICTS, bad, _STOP_DICTS[1]])
    assert pairs(found) == [("P8", 4), ("P1", 4)]


# -- P2 … P12 -------------------------------------------------------------------------


@cases(
    Case(
        "reuse-after-close",
        [*TEXT0, bs(0, "text"), td(0, "b"), te(0, "b"), *STOP],
        [("P2", 4)],
        ("reuses index 0", "not used before"),
    ),
    Case(
        "reuse-with-other-type",
        [*TEXT0, bs(0, "tool-call"), tcd(0, "{}"), tce(0, "{}"), *CALLS],
        [("P2", 4)],
        ("reuses index 0",),
    ),
    Case(
        "reuse-while-open-interleaving",
        [bs(0, "text"), td(0, "a"), bs(0, "text"), td(0, "b"), te(0, "ab"), *STOP],
        [("P2", 2)],
        ("reuses index 0",),
        (("allow_interleaving", True),),
    ),
    Case(
        "reuse-while-open",
        [bs(0, "text"), td(0, "a"), bs(0, "text"), td(0, "b"), te(0, "ab"), *STOP],
        [("P2", 2), ("P3", 2)],
    ),
    Case(
        "reuse-later-index",
        [bs(3, "text"), td(3, "a"), te(3, "a"), bs(1, "text"), td(1, "b"), te(1, "b"), bs(3, "reasoning"), rd(3, "c"), re_(3, "c"), *STOP],
        [("P2", 6)],
        ("reuses index 3",),
    ),
)
def test_p2_unique_index(case: Case) -> None:
    run_case(case)


_INTERLEAVED = [bs(0, "text"), td(0, "a"), bs(1, "text"), td(1, "b"), te(1, "b"), td(0, "c"), te(0, "ac"), *STOP]
_INTERLEAVED_CALL = [
    bs(0, "text"),
    td(0, "a"),
    bs(1, "tool-call"),
    tcd(1, '{"a":'),
    td(0, "b"),
    tcd(1, "1}"),
    tce(1, '{"a":1}'),
    te(0, "ab"),
    *CALLS,
]


@cases(
    Case("text-in-text", _INTERLEAVED, [("P3", 2)], ("block-start 1", "0 (text) is still open", "close it first")),
    Case("call-in-text", _INTERLEAVED_CALL, [("P3", 2)], ("0 (text)",)),
    Case(
        "two-open",
        [bs(0, "text"), bs(1, "reasoning"), bs(2, "text"), td(0, "a"), rd(1, "b"), td(2, "c"), te(0, "a"), re_(1, "b"), te(2, "c"), *STOP],
        [("P3", 1), ("P3", 2)],
        ("0 (text), 1 (reasoning)",),
    ),
    Case("relaxed", _INTERLEAVED, [], opts=(("allow_interleaving", True),)),
    Case("relaxed-call", _INTERLEAVED_CALL, [], opts=(("allow_interleaving", True),)),
    Case(
        "relaxed-p4-holds",
        [bs(0, "text"), bs(1, "reasoning"), td(1, "x"), td(0, "a"), rd(1, "b"), te(0, "a"), re_(1, "b"), *STOP],
        [("P4", 2)],
        ("targets block 1, a reasoning block", "must target a text block"),
        (("allow_interleaving", True),),
    ),
    Case(
        "relaxed-p5-holds",
        [bs(0, "text"), bs(1, "reasoning"), td(0, "a"), rd(1, "b"), re_(0, "a"), re_(1, "b"), *STOP],
        [("P5", 4)],
        ("opened as text",),
        (("allow_interleaving", True),),
    ),
)
def test_p3_no_interleaving(case: Case) -> None:
    run_case(case)


@cases(
    Case(
        "never-opened",
        [bs(0, "text"), td(0, "a"), td(1, "b"), te(0, "a"), *STOP],
        [("P4", 2)],
        ("targets block 1, which is not open (open: 0 (text))", "must target an open text block"),
    ),
    Case("no-block-open", [td(0, "a"), *STOP], [("P4", 0)], ("no block is open",)),
    Case("after-close", [*TEXT0, td(0, "!"), *STOP], [("P4", 4)], ("which is not open",)),
    Case(
        "reasoning-delta-in-text",
        [bs(0, "text"), td(0, "a"), rd(0, "x"), te(0, "a"), *STOP],
        [("P4", 2)],
        ("reasoning-delta at position 2 targets block 0, a text block", "must target a reasoning block"),
    ),
    Case(
        "text-delta-in-reasoning",
        [bs(0, "reasoning"), td(0, "x"), rd(0, "a"), re_(0, "a"), *STOP],
        [("P4", 1)],
        ("must target a text block",),
    ),
    Case(
        "text-delta-in-call",
        [bs(0, "tool-call"), td(0, "x"), tcd(0, "{}"), tce(0, "{}"), *CALLS],
        [("P4", 1)],
        ("a tool-call block",),
    ),
    Case(
        "call-delta-in-text",
        [bs(0, "text"), tcd(0, "{}"), td(0, "a"), te(0, "a"), *STOP],
        [("P4", 1)],
        ("must target a tool-call block",),
    ),
    Case(
        "call-delta-after-close",
        [bs(0, "tool-call"), tcd(0, "{}"), tce(0, "{}"), tcd(0, ""), *CALLS],
        [("P4", 3)],
        ("not open",),
    ),
)
def test_p4_delta_placement(case: Case) -> None:
    run_case(case)


@cases(
    Case(
        "never-opened",
        [*TEXT0, te(1, "b"), *STOP],
        [("P5", 4)],
        ("closes block 1, which was never opened", "must close an open block"),
    ),
    Case("closed-twice", [*TEXT0, te(0, "Hello"), *STOP], [("P5", 4)], ("which was already closed",)),
    Case(
        "text-as-reasoning",
        [bs(0, "text"), td(0, "a"), re_(0, "a"), *STOP],
        [("P5", 2)],
        ("carries a reasoning block", "opened as text, so it must carry a text block"),
    ),
    Case(
        "call-as-text",
        [bs(0, "tool-call"), tcd(0, "{}"), te(0, "{}"), *CALLS],
        [("P5", 2)],
        ("carries a text block", "opened as tool-call"),
    ),
    Case(
        "reasoning-as-call",
        [bs(0, "reasoning"), rd(0, "a"), tce(0, "{}"), *STOP],
        [("P5", 2)],
        ("carries a tool-call block",),
    ),
    Case(
        "wrong-index-leaves-block-open",
        [bs(0, "text"), td(0, "a"), te(1, "a"), *STOP],
        [("P5", 2), ("P8", 3)],
        ("closes block 1, which was never opened (open: 0 (text))",),
    ),
)
def test_p5_block_end(case: Case) -> None:
    run_case(case)


@cases(
    Case(
        "no-delta",
        [bs(0, "text"), te(0, "a"), *STOP],
        [("P6", 1)],
        ("text block 0 closed at position 1 without any delta", "at least one text-delta"),
    ),
    Case("no-delta-empty", [bs(0, "reasoning"), re_(0, ""), *STOP], [("P6", 1)], ("without any delta",)),
    Case(
        "empty-delta",
        [bs(0, "text"), td(0, ""), td(0, "a"), te(0, "a"), *STOP],
        [("P6", 1)],
        ("text-delta at position 1 has empty text",),
    ),
    Case(
        "empty-reasoning-delta",
        [bs(0, "reasoning"), rd(0, "a"), rd(0, ""), re_(0, "a"), *STOP],
        [("P6", 2)],
        ("reasoning-delta at position 2 has empty text",),
    ),
    Case(
        "only-empty-delta",
        [bs(0, "text"), td(0, ""), te(0, ""), *STOP],
        [("P6", 1)],
    ),
    Case(
        "mismatch",
        [bs(0, "text"), td(0, "Hel"), td(0, "lo"), te(0, "Hello!"), *STOP],
        [("P6", 3)],
        ("carries text 'Hello!'", "deltas joined are 'Hello'"),
    ),
    Case(
        "out-of-order",
        [bs(0, "text"), td(0, "lo"), td(0, "Hel"), te(0, "Hello"), *STOP],
        [("P6", 3)],
        ("'loHel'",),
    ),
    Case(
        "reasoning-mismatch",
        [bs(0, "reasoning"), rd(0, "a"), re_(0, "b", signature="s"), *STOP],
        [("P6", 2)],
        ("reasoning block 0",),
    ),
    Case(
        "exact-not-normalized",
        [bs(0, "text"), td(0, "e\u0301"), te(0, "\u00e9"), *STOP],
        [("P6", 2)],
    ),
    Case(
        "long-text-clipped",
        [bs(0, "text"), td(0, "x" * 500), te(0, "y" * 500), *STOP],
        [("P6", 2)],
        ("…",),
    ),
)
def test_p6_text_blocks(case: Case) -> None:
    run_case(case)


def test_p6_long_text_message_stays_one_short_line() -> None:
    found = check([bs(0, "text"), td(0, "x" * 5000), te(0, "y\n" * 5000), *STOP])
    assert len(found[0].message) < 300
    assert "\n" not in found[0].message


@cases(
    Case(
        "args-mismatch",
        [bs(0, "tool-call"), tcd(0, '{"a":'), tcd(0, "1}"), tce(0, '{"a":2}'), *CALLS],
        [("P7", 3)],
        ("""arguments '{"a":2}' differ from the argumentsDelta joined '{"a":1}'""",),
    ),
    Case(
        "args-without-delta",
        [bs(0, "tool-call"), tce(0, '{"a":1}'), *CALLS],
        [("P7", 1)],
        ("no delta carried them",),
    ),
    Case(
        "args-with-only-empty-deltas",
        [bs(0, "tool-call"), tcd(0, ""), tce(0, '{"a":1}'), *CALLS],
        [("P7", 2)],
        ("no delta carried them",),
    ),
    Case(
        "id-mismatch",
        [bs(0, "tool-call"), tcd(0, "{}", id="call-9"), tce(0, "{}", id="call-1"), *CALLS],
        [("P7", 1)],
        ("tool-call-delta at position 1 has id 'call-9'", "ends with id 'call-1'"),
    ),
    Case(
        "id-mismatch-in-the-middle",
        [
            bs(0, "tool-call"),
            tcd(0, "{", id="a"),
            tcd(0, '"k"', id="b"),
            tcd(0, ":1}", id="a"),
            tce(0, '{"k":1}', id="a"),
            *CALLS,
        ],
        [("P7", 2)],
        ("has id 'b'",),
    ),
    Case(
        "name-not-prefix",
        [bs(0, "tool-call"), tcd(0, "{}", name="bash2"), tce(0, "{}", name="bash"), *CALLS],
        [("P7", 1)],
        ("has name 'bash2'", "must equal 'bash' or be a prefix of it"),
    ),
    Case(
        "name-suffix",
        [bs(0, "tool-call"), tcd(0, "{", name="ba"), tcd(0, "}", name="sh"), tce(0, "{}", name="bash"), *CALLS],
        [("P7", 2)],
        ("has name 'sh'",),
    ),
    Case(
        "name-prefixes-ok",
        [
            bs(0, "tool-call"),
            tcd(0, "{", name=""),
            tcd(0, '"a"', name="b"),
            tcd(0, ":", name="ba"),
            tcd(0, "1}", name="bash"),
            tce(0, '{"a":1}', name="bash"),
            *CALLS,
        ],
        [],
    ),
    Case(
        "id-and-name-wrong",
        [bs(0, "tool-call"), tcd(0, "{}", id="x", name="y"), tce(0, "{}"), *CALLS],
        [("P7", 1), ("P7", 1)],
    ),
    Case(
        "empty-id",
        [bs(0, "tool-call"), tcd(0, "{}", id=""), tce(0, "{}", id=""), *CALLS],
        [("P7", 2)],
        ("has an empty id",),
    ),
    Case(
        "empty-name",
        [bs(0, "tool-call"), tcd(0, "{}", name=""), tce(0, "{}", name=""), *CALLS],
        [("P7", 2)],
        ("has an empty name",),
    ),
    Case(
        "empty-arguments",
        [bs(0, "tool-call"), tce(0, ""), *CALLS],
        [("P7", 1)],
        ('has empty arguments; a call without arguments carries "{}"',),
    ),
    Case(
        "empty-arguments-empty-delta",
        [bs(0, "tool-call"), tcd(0, ""), tce(0, ""), *CALLS],
        [("P7", 2)],
        ("has empty arguments",),
    ),
    Case("no-arguments-no-delta", [bs(0, "tool-call"), tce(0, "{}"), *CALLS], []),
    Case("no-arguments-empty-delta", [bs(0, "tool-call"), tcd(0, ""), tce(0, "{}"), *CALLS], []),
    Case("no-arguments-as-delta", [bs(0, "tool-call"), tcd(0, "{"), tcd(0, "}"), tce(0, "{}"), *CALLS], []),
)
def test_p7_tool_call_blocks(case: Case) -> None:
    run_case(case)


def _call(arguments: str) -> list[StreamChunk]:
    return [bs(0, "tool-call"), tcd(0, arguments), tce(0, arguments), *CALLS]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ("{bad", "are not valid JSON"),
        ('{"a":1', "are not valid JSON"),
        ('{"a":1} x', "are not valid JSON"),
        ('{"a": NaN}', "are not valid JSON"),
        ('{"a": Infinity}', "are not valid JSON"),
        ("{'a': 1}", "are not valid JSON"),
        ("[1, 2]", "are JSON but not an object"),
        ('"text"', "are JSON but not an object"),
        ("null", "are JSON but not an object"),
        ("1", "are JSON but not an object"),
    ],
)
def test_p7j_arguments_must_be_a_json_object(arguments: str, says: str) -> None:
    found = check(_call(arguments))
    assert pairs(found) == [("P7j", 2)]
    assert says in found[0].message and "must be a JSON object" in found[0].message
    assert check(_call(arguments), json_arguments=False) == []


@pytest.mark.parametrize(
    "arguments",
    [
        '{"a":1}',
        ' {\n  "a": [1, {"b": null}]\n} ',
        '{"n": 123456789012345678901234567890}',
        '{"x": 1e400}',  # valid JSON that orjson alone refuses
        '{"s": "\\ud83d\\ude42 \\u00e9"}',
        '{"a": 1, "a": 2}',
    ],
)
def test_p7j_accepts_json_objects(arguments: str) -> None:
    assert check(_call(arguments)) == []


def test_p7j_is_not_checked_for_empty_arguments() -> None:
    assert pairs(check([bs(0, "tool-call"), tce(0, ""), *CALLS])) == [("P7", 1)]


@cases(
    Case("twice", [*TEXT0, usage(), usage(), fin()], [("P8", 5)], ("usage must come exactly once",)),
    Case(
        "block-open",
        [bs(0, "text"), td(0, "a"), usage(), fin()],
        [("P8", 2)],
        ("usage at position 2 while block 0 (text) is still open", "after every block is closed"),
    ),
    Case(
        "missing",
        [*TEXT0, fin()],
        [("P9", 4), ("P8", 4)],
        ("no usage came before it", "finish must directly follow usage; it follows a block-end"),
    ),
    Case(
        "only-finish",
        [fin()],
        [("P9", 0), ("P8", 0)],
        ("it is the first chunk",),
    ),
)
def test_p8_usage(case: Case) -> None:
    run_case(case)


def test_p8_negative_count_in_dict() -> None:
    chunks = [*_TEXT_BLOCK_DICTS, {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": -2, "reasoningTokens": -1}}, _STOP_DICTS[1]]
    found = check_chunk_sequence(chunks)
    assert pairs(found) == [("P8", 4)]
    assert "outputTokens, reasoningTokens must be >= 0" in found[0].message


@cases(
    Case(
        "block-start-after-usage",
        [usage(), bs(0, "text"), fin()],
        [("P9", 1)],
        ("block-start at position 1: only finish may follow usage",),
    ),
    Case(
        "block-after-usage",
        [*TEXT0, usage(), bs(1, "text"), td(1, "x"), te(1, "x"), fin()],
        [("P9", 5), ("P9", 6), ("P9", 7)],
        ("only finish may follow usage",),
    ),
    Case(
        "finish-before-usage",
        [*TEXT0, fin(), usage()],
        [("P9", 4), ("P8", 4), ("P11", 5)],
        ("finish must directly follow usage", "nothing may follow finish"),
    ),
)
def test_p9_finish(case: Case) -> None:
    run_case(case)


def test_p9_a_second_finish_is_p9_not_only_p11() -> None:
    """Regression: "exactly one finish" is P9; the second finish used to be reported as P11 only."""
    found = check([*TEXT0, *STOP, fin()])
    assert pairs(found) == [("P11", 6), ("P9", 6)]
    assert found[1].message == (
        "finish at position 6 is a second finish (the first came at position 5); "
        "a stream has exactly one finish, its last chunk"
    )
    validator = SequenceValidator()
    for chunk in [*TEXT0, *STOP]:
        validator.feed(chunk)
    assert pairs(validator.feed(fin())) == [("P11", 6), ("P9", 6)]


# -- once per stream: usage and finish repeated or misplaced (P8, P9, P11) -------------
#
# The order of P9 (finish right after usage) and P11 (nothing after finish) is the
# phase table's; "exactly once" (P8 usage, P9 finish) is counted over the whole
# sequence, after finish too. At one position the step's violation comes first.
# After finish a chunk's content is not judged: it is P11, plus P8/P9 if it repeats.


@cases(
    Case("second-finish", [*TEXT0, *STOP, fin()], [("P11", 6), ("P9", 6)]),
    Case(
        "second-finish-of-another-kind",
        [*TEXT0, *STOP, fin("tool-calls")],
        [("P11", 6), ("P9", 6)],
    ),
    Case(
        "two-finishes-only",
        [fin(), fin()],
        [("P9", 0), ("P8", 0), ("P11", 1), ("P9", 1)],
        ("it is the first chunk", "the first came at position 0"),
    ),
    Case(
        "finish-in-the-middle",
        [*TEXT0, fin(), bs(1, "text"), td(1, "a"), te(1, "a"), usage(), fin()],
        [("P9", 4), ("P8", 4), ("P11", 5), ("P11", 6), ("P11", 7), ("P11", 8), ("P11", 9), ("P9", 9)],
        ("finish must directly follow usage; it follows a block-end", "second finish (the first came at position 4)"),
    ),
    Case(
        "usage-twice",
        [*TEXT0, usage(), usage(), fin()],
        [("P8", 5)],
        ("usage at position 5: usage must come exactly once; the first came at position 4",),
    ),
    Case("usage-three-times", [*TEXT0, usage(), usage(), usage(), fin()], [("P8", 5), ("P8", 6)]),
    Case("usage-after-finish", [*TEXT0, *STOP, usage()], [("P11", 6), ("P8", 6)]),
    Case("first-usage-after-finish", [*TEXT0, fin(), usage()], [("P9", 4), ("P8", 4), ("P11", 5)]),
    Case(
        "usage-and-finish-again",
        [*TEXT0, *STOP, *STOP],
        [("P11", 6), ("P8", 6), ("P11", 7), ("P9", 7)],
    ),
    Case("late-delta-is-only-p11", [*TEXT0, *STOP, td(0, ""), te(5, "x")], [("P11", 6), ("P11", 7)]),
)
def test_once_per_stream(case: Case) -> None:
    run_case(case)


@FAST
@given(valid_sequences())
def test_valid_sequence_with_its_usage_or_finish_repeated(chunks: list[StreamChunk]) -> None:
    n = len(chunks)
    *body, last_usage, last_finish = chunks
    assert pairs(check([*chunks, last_finish])) == [("P11", n), ("P9", n)]
    assert pairs(check([*chunks, last_usage])) == [("P11", n), ("P8", n)]
    assert pairs(check([*body, last_usage, last_usage, last_finish])) == [("P8", n - 1)]
    assert pairs(check([*body, last_finish, last_usage])) == [("P9", n - 2), ("P8", n - 2), ("P11", n - 1)]


@cases(
    Case(
        "text-with-tool-calls",
        [*TEXT0, usage(), fin("tool-calls")],
        [("P10", 5)],
        ("has kind 'tool-calls'", "no tool-call block", "must be 'stop'"),
    ),
    Case(
        "call-with-stop",
        [*_call('{"a":1}')[:3], *STOP],
        [("P10", 4)],
        ("has kind 'stop'", "1 tool-call block(s)", "must be 'tool-calls'"),
    ),
    Case(
        "reasoning-only-with-tool-calls",
        [bs(0, "reasoning"), rd(0, "r"), re_(0, "r"), *CALLS],
        [("P10", 4)],
    ),
)
def test_p10_finish_reason(case: Case) -> None:
    run_case(case)


@cases(
    Case(
        "usage-after-finish",
        [*TEXT0, *STOP, usage()],
        [("P11", 6), ("P8", 6)],
        ("usage at position 6: nothing may follow finish", "usage must come exactly once; the first came at position 4"),
    ),
    Case(
        "finish-twice",
        [*TEXT0, *STOP, fin()],
        [("P11", 6), ("P9", 6)],
        ("finish at position 6: nothing may follow finish", "second finish (the first came at position 5)"),
    ),
    Case("block-after-finish", [*TEXT0, *STOP, bs(1, "text"), td(1, "a"), te(1, "a")], [("P11", 6), ("P11", 7), ("P11", 8)]),
    Case(
        "no-finish-block-open",
        [bs(0, "text"), td(0, "a")],
        [("P11", 2)],
        ("stream ended after 2 chunk(s) without finish; blocks still open: 0 (text)",),
    ),
    Case("no-finish", [*TEXT0, usage()], [("P11", 5)], ("stream ended after 5 chunk(s) without finish",)),
    Case("empty", [], [("P11", 0)], ("without finish",)),
)
def test_p11_termination(case: Case) -> None:
    run_case(case)


def test_p11_message_names_only_open_blocks() -> None:
    found = check([*TEXT0, usage()])
    assert "still open" not in found[0].message


def test_p11_skipped_when_incomplete() -> None:
    assert check_chunk_sequence([bs(0, "text"), td(0, "a")], complete=False) == []
    assert pairs(check_chunk_sequence([td(0, "a")], complete=False)) == [("P4", 0)]


@cases(
    Case(
        "same-id-twice",
        [*_call("{}")[:3], bs(1, "tool-call"), tcd(1, "{}", name="ls"), tce(1, "{}", name="ls"), *CALLS],
        [("P12", 5)],
        ("reuses call id 'call-1'", "unique"),
    ),
    Case(
        "same-id-third-block",
        [
            *_call("{}")[:3],
            bs(1, "tool-call"),
            tcd(1, "{}", id="call-2"),
            tce(1, "{}", id="call-2"),
            bs(2, "tool-call"),
            tcd(2, "{}", id="call-2"),
            tce(2, "{}", id="call-2"),
            *CALLS,
        ],
        [("P12", 8)],
        ("'call-2'",),
    ),
    Case(
        "distinct-ids",
        [*_call("{}")[:3], bs(1, "tool-call"), tcd(1, "{}", id="call-2"), tce(1, "{}", id="call-2"), *CALLS],
        [],
    ),
)
def test_p12_call_ids(case: Case) -> None:
    run_case(case)


def test_every_rule_has_a_case_breaking_only_it() -> None:
    """The table of single-rule sequences above covers every rule id."""
    single = {
        "P1": check_chunk_sequence([*_TEXT_BLOCK_DICTS, {"type": "bogus"}, *_STOP_DICTS]),
        "P2": check([*TEXT0, bs(0, "text"), td(0, "b"), te(0, "b"), *STOP]),
        "P3": check(_INTERLEAVED),
        "P4": check([td(0, "a"), *STOP]),
        "P5": check([*TEXT0, te(0, "Hello"), *STOP]),
        "P6": check([bs(0, "text"), te(0, "a"), *STOP]),
        "P7": check([bs(0, "tool-call"), tce(0, ""), *CALLS]),
        "P7j": check(_call("[]")),
        "P8": check([*TEXT0, usage(), usage(), fin()]),
        "P9": check([usage(), bs(0, "text"), fin()]),
        "P10": check([*SEED, fin("stop")]),
        "P11": check([*TEXT0, usage()]),
        "P12": check([*_call("{}")[:3], bs(1, "tool-call"), tcd(1, "{}"), tce(1, "{}"), *CALLS]),
    }
    assert set(single) == RULES
    for rule, found in single.items():
        assert [v.rule for v in found] == [rule], (rule, found)


# -- results, messages, assert_chunk_sequence ----------------------------------------


def test_violations_are_sorted_by_position() -> None:
    """A delta's P7 is found at block-end, after the block-end's own, yet listed first."""
    found = check([bs(0, "tool-call"), tcd(0, "[", id="x"), tce(0, "[]"), *CALLS])
    assert pairs(found) == [("P7", 1), ("P7", 2), ("P7j", 2)]
    assert "has id 'x'" in found[0].message and "differ" in found[1].message
    validator = SequenceValidator()
    for chunk in [bs(0, "tool-call"), tcd(0, "[", id="x"), tce(0, "[]"), *CALLS]:
        validator.feed(chunk)
    assert pairs(validator.violations) == [("P7", 2), ("P7", 1), ("P7j", 2)]  # in the order found


def test_violation_str_and_fields() -> None:
    (violation,) = check([*SEED, fin("stop")])
    assert violation == Violation("P10", 8, violation.message)
    assert str(violation) == f"P10: {violation.message}"
    assert "position 8" in violation.message


def test_assert_chunk_sequence_passes_valid_sequence() -> None:
    assert_chunk_sequence([*SEED, fin("tool-calls")])  # raises if it finds anything


def test_assert_chunk_sequence_lists_every_violation() -> None:
    chunks = [bs(0, "text"), td(0, ""), te(0, "x"), bs(0, "text"), td(0, "y"), te(0, "y"), *CALLS]
    with pytest.raises(ProtocolViolation) as info:
        assert_chunk_sequence(chunks)
    error = info.value
    assert isinstance(error, DshReplayError)
    assert pairs(error.violations) == [("P6", 1), ("P6", 2), ("P2", 3), ("P10", 7)]
    text = str(error)
    assert text.splitlines()[0] == "4 protocol violation(s):"
    for violation in error.violations:
        assert f"  {violation}" in text.splitlines()


def test_assert_chunk_sequence_passes_options() -> None:
    assert_chunk_sequence(_INTERLEAVED, allow_interleaving=True)
    assert_chunk_sequence(_call("[]"), json_arguments=False)
    with pytest.raises(ProtocolViolation):
        assert_chunk_sequence(_INTERLEAVED)


def test_check_accepts_any_iterable() -> None:
    assert check_chunk_sequence(iter([*SEED, fin("tool-calls")])) == []
    assert check_chunk_sequence(c for c in [*SEED, fin("stop")]) == check_chunk_sequence([*SEED, fin("stop")])


def test_mixed_objects_and_dicts() -> None:
    chunks: list[Any] = [c if i % 2 else chunk_to_json(c) for i, c in enumerate([*SEED, fin("tool-calls")])]
    assert check_chunk_sequence(chunks) == []


def test_block_subclass_does_not_crash() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class MyText(TextBlock):
        pass

    ok = [bs(0, "text"), td(0, "a"), BlockEnd(index=0, block=MyText(text="a")), *STOP]
    assert check_chunk_sequence(ok) == []
    wrong = [bs(0, "reasoning"), rd(0, "a"), BlockEnd(index=0, block=MyText(text="a")), *STOP]
    assert pairs(check_chunk_sequence(wrong)) == [("P5", 2)]


# -- the incremental API ------------------------------------------------------------


def test_feed_reports_each_violation_when_it_happens() -> None:
    validator = SequenceValidator()
    results = [validator.feed(chunk) for chunk in _INTERLEAVED]
    assert [pairs(r) for r in results] == [[], [], [("P3", 2)], [], [], [], [], [], []]
    assert validator.finish() == []
    assert pairs(validator.violations) == [("P3", 2)]


def test_feed_reports_p4_p5_p6_at_their_chunk() -> None:
    chunks = [bs(0, "text"), td(1, "x"), td(0, ""), td(0, "a"), te(0, "b"), te(0, "b"), *STOP]
    validator = SequenceValidator()
    results = [pairs(validator.feed(c)) for c in chunks]
    assert results == [[], [("P4", 1)], [("P6", 2)], [], [("P6", 4)], [("P5", 5)], [], []]


def test_feed_reports_late_delta_identity_at_block_end_with_delta_position() -> None:
    validator = SequenceValidator()
    chunks = [bs(0, "tool-call"), tcd(0, "{}", id="other"), tce(0, "{}"), *CALLS]
    results = [pairs(validator.feed(c)) for c in chunks]
    assert results == [[], [], [("P7", 1)], [], []]


def test_feed_then_finish_reports_open_blocks() -> None:
    validator = SequenceValidator(allow_interleaving=True)
    chunks: list[StreamChunk] = [bs(0, "text"), td(0, "a"), bs(2, "reasoning"), rd(2, "r"), bs(1, "tool-call")]
    for chunk in chunks:
        assert validator.feed(chunk) == []
    (violation,) = validator.finish()
    assert (violation.rule, violation.position) == ("P11", 5)
    assert violation.message.endswith("blocks still open: 0 (text), 1 (tool-call), 2 (reasoning)")
    assert validator.violations == [violation]


def test_feed_accepts_dicts_and_junk() -> None:
    validator = SequenceValidator()
    assert validator.feed(chunk_to_json(bs(0, "text"))) == []
    assert pairs(validator.feed({"type": "text-delta", "index": 0})) == [("P1", 1)]
    assert pairs(validator.feed(42)) == [("P1", 2)]  # type: ignore[arg-type]
    assert validator.feed(td(0, "a")) == []


def test_feed_after_finish_is_p11_and_finish_adds_nothing() -> None:
    validator = SequenceValidator()
    for chunk in [*TEXT0, *STOP]:
        assert validator.feed(chunk) == []
    assert pairs(validator.feed(usage())) == [("P11", 6), ("P8", 6)]
    assert pairs(validator.feed(fin())) == [("P11", 7), ("P9", 7)]
    assert validator.finish() == []


def test_finish_twice_reports_once_and_returns_the_same() -> None:
    validator = SequenceValidator()
    validator.feed(bs(0, "text"))
    first = validator.finish()
    assert pairs(first) == [("P11", 1)]
    assert validator.finish() == first
    assert validator.violations == first


FED_AFTER = "SequenceValidator.feed() after finish(): that stream has ended; use a new SequenceValidator for the next stream"


@pytest.mark.parametrize(
    "late", [td(0, "a"), usage(), fin(), chunk_to_json(bs(1, "text")), {"type": "text-delta"}, 42], ids=repr
)
@pytest.mark.parametrize("stream", [[*TEXT0, *STOP], [*TEXT0]], ids=["complete", "cut"])
def test_feed_after_finish_raises_and_changes_nothing(stream: list[StreamChunk], late: Any) -> None:
    validator = SequenceValidator()
    for chunk in stream:
        validator.feed(chunk)
    ended = validator.finish()
    with pytest.raises(RuntimeError) as info:
        validator.feed(late)
    assert str(info.value) == FED_AFTER
    with pytest.raises(RuntimeError, match="after finish"):
        validator.feed_unreadable("is not JSON")
    assert validator.violations == ended
    assert validator.finish() == ended


def test_feed_returns_a_copy() -> None:
    validator = SequenceValidator()
    got = validator.feed(td(0, "a"))
    got.clear()
    assert pairs(validator.violations) == [("P4", 0)]


def test_feed_and_check_agree_on_p9_message_after_junk() -> None:
    found = check_chunk_sequence([*_TEXT_BLOCK_DICTS, {"type": "nope"}, chunk_to_json(fin())])
    assert pairs(found) == [("P1", 4), ("P9", 5), ("P8", 5)]
    assert "it follows no well-formed chunk" in found[1].message


def test_validator_options_are_attributes() -> None:
    validator = SequenceValidator(allow_interleaving=True, json_arguments=False)
    assert validator.allow_interleaving is True and validator.json_arguments is False
    for chunk in _call("nope"):
        assert validator.feed(chunk) == []


# -- properties ---------------------------------------------------------------------


@FAST
@given(valid_sequences())
def test_valid_sequences_have_no_violation(chunks: list[StreamChunk]) -> None:
    assert check_chunk_sequence(chunks) == []
    assert check_chunk_sequence([chunk_to_json(c) for c in chunks]) == []
    assert check_chunk_sequence(chunks, allow_interleaving=True, json_arguments=False) == []


@FAST
@given(valid_sequences())
def test_valid_sequences_fed_one_by_one(chunks: list[StreamChunk]) -> None:
    validator = SequenceValidator()
    assert all(validator.feed(c) == [] for c in chunks)
    assert validator.finish() == []


@FAST
@given(interleaved_sequences())
def test_interleaved_sequences_are_valid_only_when_allowed(chunks: list[StreamChunk]) -> None:
    assert check_chunk_sequence(chunks, allow_interleaving=True) == []
    found = check_chunk_sequence(chunks)
    assert {v.rule for v in found} <= {"P3"}
    open_blocks: set[int] = set()
    opened_while_open = []
    for position, chunk in enumerate(chunks):
        if isinstance(chunk, BlockStart):
            if open_blocks:
                opened_while_open.append(position)
            open_blocks.add(chunk.index)
        elif isinstance(chunk, BlockEnd):
            open_blocks.discard(chunk.index)
    assert [v.position for v in found] == opened_while_open


def _delta_text(chunk: StreamChunk) -> str | None:
    if isinstance(chunk, (TextDelta, ReasoningDelta)):
        return chunk.text
    if isinstance(chunk, ToolCallDelta):
        return chunk.arguments_delta
    return None


def _mutate(data: st.DataObject, chunks: list[StreamChunk]) -> list[StreamChunk]:
    """One mutation that always makes a valid sequence invalid (equivalent ones are skipped)."""
    kind = data.draw(st.sampled_from(["drop", "swap", "index", "reverse-tail", "duplicate", "finish-kind"]))
    out = list(chunks)
    if kind == "drop":
        i = data.draw(st.integers(0, len(out) - 1))
        dropped = out.pop(i)
        if isinstance(dropped, ToolCallDelta):
            # an empty slice carries nothing, and a call whose slices are all gone
            # is the no-argument call ("{}" with no delta): both are still valid
            end = next(c for c in out[i:] if isinstance(c, BlockEnd) and c.index == dropped.index)
            left = "".join(c.arguments_delta for c in out if isinstance(c, ToolCallDelta) and c.index == dropped.index)
            arguments = end.block.arguments  # type: ignore[union-attr]
            assume(left != arguments and not (left == "" and arguments == "{}"))
    elif kind == "swap":
        i = data.draw(st.integers(0, len(out) - 2))
        a, b = out[i], out[i + 1]
        assume(a != b)
        ta, tb = _delta_text(a), _delta_text(b)
        if ta is not None and tb is not None:
            # two slices of one block: a swap is invisible when they commute ("a"+"aa")
            assume(ta + tb != tb + ta)
        out[i], out[i + 1] = b, a
    elif kind == "index":
        indexed = [i for i, c in enumerate(out) if hasattr(c, "index")]
        assume(indexed)
        i = data.draw(st.sampled_from(indexed))
        old = out[i].index  # type: ignore[union-attr]
        new = data.draw(st.integers(0, 10_001).filter(lambda n: n != old))
        out[i] = dataclasses.replace(out[i], index=new)  # type: ignore[arg-type]
    elif kind == "reverse-tail":
        out[-2], out[-1] = out[-1], out[-2]
    elif kind == "duplicate":
        deltas = [i for i, c in enumerate(out) if _delta_text(c)]
        assume(deltas)
        i = data.draw(st.sampled_from(deltas))
        out.insert(i + 1, out[i])
    else:
        kind_now = out[-1].reason.kind  # type: ignore[union-attr]
        out[-1] = fin("stop" if kind_now == "tool-calls" else "tool-calls")
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(valid_sequences(max_blocks=4), st.data())
def test_single_mutation_is_caught(chunks: list[StreamChunk], data: st.DataObject) -> None:
    mutated = _mutate(data, chunks)
    found = check_chunk_sequence(mutated)
    assert found, mutated
    assert check_chunk_sequence([chunk_to_json(c) for c in mutated]) == found
    assert {v.rule for v in found} <= RULES
    assert all(0 <= v.position <= len(mutated) for v in found)


_NEVER_RAISES = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _is_chunk(value: Any) -> bool:
    try:
        chunk_from_json(value)
    except ValueError:
        return False
    return True


def _assert_sane(values: list[Any], found: list[Violation]) -> None:
    assert {v.rule for v in found} <= RULES
    assert all(0 <= v.position <= len(values) for v in found)
    assert all(v.message and "\n" not in v.message for v in found)
    # every value that is not a chunk is a P1 at its own position
    p1 = {v.position for v in found if v.rule == "P1"}
    p8 = {v.position for v in found if v.rule == "P8"}
    for position, value in enumerate(values):
        if not _is_chunk(value):
            # a negative count is P8 rather than P1 when it is the only thing wrong
            assert position in p1 or (position in p8 and _is_chunk(_zero_negative_counts(value))), (
                position,
                value,
                found,
            )


def _zero_negative_counts(value: Any) -> Any:
    if not (isinstance(value, dict) and isinstance(value.get("usage"), dict)):
        return value
    counts = value["usage"]
    fixed = {k: 0 if type(v) is int and v < 0 else v for k, v in counts.items()}
    return {**value, "usage": fixed}


@_NEVER_RAISES
@given(st.lists(json_values(), max_size=8))
def test_validator_never_raises_on_json_values(values: list[Any]) -> None:
    found = check_chunk_sequence(values)
    _assert_sane(values, found)


@_NEVER_RAISES
@given(st.lists(near_chunks(), min_size=1, max_size=6))
def test_validator_never_raises_on_near_chunks(values: list[Any]) -> None:
    found = check_chunk_sequence(values, allow_interleaving=True)
    _assert_sane(values, found)
    validator = SequenceValidator()
    fed = [v for value in values for v in validator.feed(value)]
    assert sorted(fed + validator.finish(), key=lambda v: v.position) == check_chunk_sequence(values)


@_NEVER_RAISES
@given(valid_sequences(max_blocks=3), st.lists(st.tuples(st.integers(0, 40), near_chunks()), max_size=3))
def test_near_chunks_spliced_into_valid_sequences(chunks: list[StreamChunk], inserts: list[tuple[int, Any]]) -> None:
    values: list[Any] = [chunk_to_json(c) for c in chunks]
    for at, bad in inserts:
        values.insert(min(at, len(values)), bad)
    _assert_sane(values, check_chunk_sequence(values))


def test_an_unreadable_chunk_is_p1_and_keeps_positions_aligned() -> None:
    validator = SequenceValidator()
    assert [(v.rule, v.position) for v in validator.feed_unreadable("is not valid JSON")] == [("P1", 0)]
    validator.feed({"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}})
    validator.feed({"type": "finish", "reason": {"kind": "stop"}})
    validator.feed({"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}})
    validator.finish()
    assert [(v.rule, v.position) for v in validator.violations] == [("P1", 0), ("P11", 3), ("P8", 3)]


@pytest.mark.parametrize("chunks", [{"type": "finish", "reason": {"kind": "stop"}}, "chunks"])
def test_one_chunk_or_a_text_where_the_sequence_goes_is_a_type_error(chunks: object) -> None:
    with pytest.raises(TypeError, match=r"chunks must be a sequence of chunks, got a .*; wrap one chunk in a list"):
        check_chunk_sequence(chunks)  # type: ignore[arg-type]
