"""``dsh-replay golden check``: chunks over a chunk file's limits are refused, not read to the end (exit 2).

The limits are lowered for these tests, so that the inputs stay small.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from dsh_replay.protocol import bounds

from .conftest import ROOT, run

GOLDEN = ROOT / "cassettes" / "openai" / "text.chunks.jsonl"


def test_chunks_on_stdin_with_more_lines_than_a_chunk_file_may_have(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINES", 10)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(GOLDEN.read_bytes())))  # 13 chunks
    result = run("golden", "check", "-", "--golden", str(GOLDEN))
    assert (result.code, result.out) == (2, "")
    assert result.err == ("dsh-replay: error: <stdin>: more than 10 lines, the most a chunk file may have "
                          "(one JSON chunk per line)\n")


def test_a_chunk_file_with_a_line_too_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINE_BYTES", 100)
    out = tmp_path / "out.jsonl"
    out.write_bytes(GOLDEN.read_bytes().replace(b"Hello", b"Hello" * 30))  # the text block's end line
    result = run("golden", "check", str(out), "--golden", str(GOLDEN))
    assert result.code == 2
    assert result.err.startswith(f"dsh-replay: error: {out}: line ")
    assert " is longer than 100 bytes, the most a chunk line may have" in result.err
