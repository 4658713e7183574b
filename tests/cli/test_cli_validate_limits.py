"""``dsh-replay validate``: a file over a chunk file's limits is named on stderr, exit 2, not read to its end.

The limits are lowered for these tests, so that the files stay small.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dsh_replay.cli.main import main
from dsh_replay.protocol import bounds

SEED = Path(__file__).resolve().parents[2] / "cassettes" / "seed" / "example.chunks.jsonl"


def _validate(*files: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["validate", *map(str, files)], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_line_too_long_is_named_and_the_other_files_still_validated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINE_BYTES", 200)
    endless = tmp_path / "endless.jsonl"
    endless.write_bytes(SEED.read_bytes().rstrip(b"\n") + b"0" * 1000)  # the last line never ends, as /dev/zero's
    code, out, err = _validate(endless, SEED)
    assert (code, out) == (2, "")
    lines = len(SEED.read_bytes().splitlines())
    assert err == (f"dsh-replay: error: {endless}: line {lines} is longer than 200 bytes, the most a chunk line may "
                   "have (one JSON chunk per line)\n")


def test_more_lines_than_a_chunk_file_may_have(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINES", 100)
    many = tmp_path / "many.jsonl"
    many.write_bytes(SEED.read_bytes() * 20)
    code, out, err = _validate(many)
    assert (code, out) == (2, "")
    assert err == f"dsh-replay: error: {many}: more than 100 lines, the most a chunk file may have (one JSON chunk per line)\n"
