"""``JsonlWriter``: golden JSONL written chunk by chunk, the same bytes as ``dump_jsonl``."""

from __future__ import annotations

import pytest
from hypothesis import given

from dsh_replay import BlockStart, Raised, TextDelta, dump_jsonl
from dsh_replay.protocol.jsonl import JsonlWriter

from .test_jsonl import SEED, SEED_GOLDEN

try:
    from tests.strategies import valid_sequences
except ImportError:  # tests/ is not a package: pytest put it on sys.path itself
    from strategies import valid_sequences  # type: ignore[no-redef, import-not-found]


def written(chunks: list) -> JsonlWriter:  # type: ignore[type-arg]
    writer = JsonlWriter()
    for chunk in chunks:
        writer.add(chunk)
    return writer


def test_the_seed_golden_chunk_by_chunk() -> None:
    writer = written(SEED)
    assert (writer.getvalue(), writer.count) == (SEED_GOLDEN, len(SEED))
    assert writer.getvalue() == SEED_GOLDEN  # reading does not use it up


@given(valid_sequences())
def test_the_bytes_of_dump_jsonl(chunks: list) -> None:  # type: ignore[type-arg]
    assert written(chunks).getvalue() == dump_jsonl(chunks)
    assert written(chunks).getvalue(Raised(error="E", message="m")) == dump_jsonl(chunks, Raised(error="E", message="m"))


def test_a_raised_line_ends_the_value_without_joining_the_writer() -> None:
    writer = written(SEED[:2])
    ending = writer.getvalue(ValueError("boom"))
    assert ending == dump_jsonl(SEED[:2], ValueError("boom"))
    assert ending.endswith(b'{"type":"raised","error":"ValueError","message":"boom"}\n')
    writer.add(SEED[2])
    assert writer.getvalue() == dump_jsonl(SEED[:3])


def test_a_chunk_that_is_not_utf8_is_refused_by_position_and_left_out() -> None:
    writer = written([BlockStart(index=0, block_type="text"), TextDelta(index=0, text="ok")])
    with pytest.raises(ValueError, match=r"^the chunk at position 2 cannot be written as JSON: "):
        writer.add(TextDelta(index=0, text="\ud800"))
    assert writer.count == 2
    assert writer.getvalue() == dump_jsonl([BlockStart(index=0, block_type="text"), TextDelta(index=0, text="ok")])
