"""``dsh-replay check``: the unmapped event kinds of each case, and ``--strict-coverage`` failing on them."""

# ruff: noqa: RUF001 - the multiplication sign between a kind and its count is what the commands print

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import run

BUNDLED = Path(__file__).resolve().parents[2] / "cassettes" / "openai-responses"


@pytest.fixture
def cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``custom-tool-call`` as bundled, and ``renamed``: the same stream whose ``response.in_progress``
    events carry a type no translator knows (same length, so its fragments stay right; same chunks)."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "cassettes"
    folder.mkdir()
    for name in ("custom-tool-call.yaml", "custom-tool-call.chunks.jsonl"):
        shutil.copy(BUNDLED / name, folder / name)
    text = (BUNDLED / "custom-tool-call.yaml").read_text(encoding="utf-8")
    (folder / "renamed.yaml").write_text(text.replace("response.in_progress", "response.in_prigress"), encoding="utf-8")
    shutil.copy(BUNDLED / "custom-tool-call.chunks.jsonl", folder / "renamed.chunks.jsonl")
    return folder


def test_unmapped_kinds_are_listed_per_case_after_the_table(cases: Path) -> None:
    result = run("check", "cassettes")
    assert result.code == 0  # the chunks match their goldens: nothing fails without --strict-coverage
    lines = result.out.splitlines()
    start = lines.index("unmapped event kinds (sent by the provider, neither mapped nor ignored by the adapter):")
    assert lines[start + 1:] == ["  renamed (openai-responses): response.in_prigress ×1 (first at body line 4)"]


def test_json_rows_carry_the_unmapped_kinds_only_where_there_are_some(cases: Path) -> None:
    data = json.loads(run("check", "--json", "cassettes").out)
    rows = {row["case"]: row for row in data["cases"]}
    assert "unmapped" not in rows["custom-tool-call"]
    assert rows["renamed"]["unmapped"] == [{"kind": "response.in_prigress", "count": 1, "first_line": 4}]


def test_strict_coverage_fails_a_case_with_unmapped_kinds(cases: Path) -> None:
    result = run("check", "--strict-coverage", "cassettes")
    assert result.code == 1
    rows = {line.split()[0]: line for line in result.out.splitlines() if line.startswith(("custom", "renamed"))}
    assert "FAIL unmapped kinds" in rows["renamed"]
    assert " ok " in rows["custom-tool-call"]
    assert "unmapped event kinds (--strict-coverage): response.in_prigress ×1 (first at body line 4)" in result.out
