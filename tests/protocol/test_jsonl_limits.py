"""Chunk files are read within limits: a line too long, too many lines or bytes is refused, naming where.

The limits are lowered here (they are read at each piece), so nothing large is
ever built: a stream that breaks one is refused within a piece of it.
"""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_replay import CassetteError, load_golden
from dsh_replay.protocol import bounds
from dsh_replay.protocol.bounds import BoundedJsonl, read_bounded

LINE = b'{"type":"block-start","index":0,"blockType":"text"}\n'


def _starts(message: str) -> str:
    return "^" + re.escape(message)


def _gathered(pieces: list[bytes]) -> bytes:
    gathered = BoundedJsonl("chunks.jsonl")
    for piece in pieces:
        gathered.add(piece)
    return gathered.getvalue()


def _first_too_long(data: bytes, longest: int) -> int | None:
    """The 1-based number of the first line longer than ``longest`` bytes, its newline aside."""
    return next((n for n, line in enumerate(data.split(b"\n"), start=1) if len(line) > longest), None)


@given(lines=st.lists(st.integers(0, 40), max_size=30), cuts=st.lists(st.integers(0, 1300), max_size=8),
       longest=st.integers(1, 30))
def test_a_line_too_long_is_found_wherever_the_pieces_are_cut(
        lines: list[int], cuts: list[int], longest: int) -> None:
    data = b"".join(b"x" * length + b"\n" for length in lines) + b"y" * (lines[-1] if lines else 0)
    ends = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(ends)]
    expected = _first_too_long(data, longest)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "MAX_JSONL_LINE_BYTES", longest)
        if expected is None:
            assert _gathered(pieces) == data
        else:
            with pytest.raises(CassetteError, match=_starts(f"chunks.jsonl: line {expected} is longer than {longest:,} bytes")):
                _gathered(pieces)


def test_a_line_of_exactly_the_limit_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINE_BYTES", len(LINE) - 1)
    assert _gathered([LINE * 3]) == LINE * 3
    monkeypatch.setattr(bounds, "MAX_JSONL_LINE_BYTES", len(LINE) - 2)
    with pytest.raises(CassetteError, match=_starts(f"chunks.jsonl: line 1 is longer than {len(LINE) - 2} bytes, the most a chunk line")):
        _gathered([LINE * 3])


def test_more_lines_than_a_chunk_file_may_have_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINES", 10)
    assert _gathered([LINE * 4, LINE * 6]) == LINE * 10
    with pytest.raises(CassetteError, match=_starts("chunks.jsonl: more than 10 lines, the most a chunk file may have")):
        _gathered([LINE * 4, LINE * 6, LINE])


def test_more_bytes_than_a_chunk_file_may_have_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_BYTES", 5 * len(LINE))
    assert _gathered([LINE * 5]) == LINE * 5
    with pytest.raises(CassetteError, match=_starts(f"chunks.jsonl: more than {5 * len(LINE)} bytes")):
        _gathered([LINE * 5, b"\n"])


class _Endless(io.RawIOBase):
    """A stream that never ends (a device, an adapter in a loop); it counts what was read of it."""

    def __init__(self, pattern: bytes) -> None:
        self.pattern, self.given = pattern, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        size = len(buffer)
        buffer[:size] = (self.pattern * (size // len(self.pattern) + 1))[:size]
        self.given += size
        return size


@pytest.mark.parametrize(("pattern", "limit", "message"), [
    (b"\0", ("MAX_JSONL_LINE_BYTES", 1000), "<endless>: line 1 is longer than 1,000 bytes"),
    (LINE, ("MAX_JSONL_LINES", 1000), "<endless>: more than 1,000 lines"),
    (b"\n", ("MAX_JSONL_BYTES", 1 << 20), "<endless>: more than 1,048,576 bytes"),
])
def test_an_endless_stream_is_refused_within_a_piece_of_the_limit(
        monkeypatch: pytest.MonkeyPatch, pattern: bytes, limit: tuple[str, int], message: str) -> None:
    monkeypatch.setattr(bounds, *limit)
    source = _Endless(pattern)
    with pytest.raises(CassetteError, match=_starts(message)):
        read_bounded(io.BufferedReader(source), "<endless>")
    assert source.given <= limit[1] * len(pattern) + 2 * bounds._PIECE


def test_a_golden_file_over_a_limit_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    golden = tmp_path / "text.chunks.jsonl"
    golden.write_bytes(LINE * 3)
    monkeypatch.setattr(bounds, "MAX_JSONL_LINES", 2)
    with pytest.raises(CassetteError, match=_starts(f"{golden}: more than 2 lines, the most a chunk file may have")):
        load_golden(golden)
    with pytest.raises(CassetteError, match=_starts("cannot read")):  # the other errors of a read are as they were
        load_golden(tmp_path / "missing.chunks.jsonl")
