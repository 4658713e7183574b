"""The project's own cassettes replayed cut into 1-byte pieces give their goldens, byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsh_replay.cassette.files import has_metadata

from .helpers import ini, summary_line

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
CASES = sorted(p for p in CASSETTES.glob("**/*.yaml") if has_metadata(p))


@pytest.mark.skipif(not CASES, reason="the project has no recorded cassettes yet")
def test_bytes_fragmentation_gives_identical_goldens(pytester: pytest.Pytester) -> None:
    shutil.copytree(CASSETTES, pytester.path / "cassettes")  # a copy: nothing here may touch the project's files
    pytester.makeini(ini("dsh_replay_collect = true"))
    goldens = {p: p.read_bytes() for p in (pytester.path / "cassettes").rglob("*.chunks.jsonl")}
    result = pytester.runpytest("--replay-fragmentation=bytes")
    result.assert_outcomes(passed=len(CASES))
    assert summary_line(result, "goldens:") == f"goldens: {len(CASES)} matched, 0 written, 0 updated"
    assert {p: p.read_bytes() for p in goldens} == goldens
