"""``dsh-replay report``: a wire coverage table per cassette (event kind, count, first line, status)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from .conftest import run

CUSTOM = Path(__file__).resolve().parents[2] / "cassettes" / "openai-responses" / "custom-tool-call.yaml"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copy(CUSTOM, tmp_path / "custom-tool-call.yaml")
    shutil.copy(CUSTOM.with_name("custom-tool-call.chunks.jsonl"), tmp_path / "custom-tool-call.chunks.jsonl")
    # the same stream, its input deltas under a name no translator knows (same length: the fragments stay right)
    text = CUSTOM.read_text(encoding="utf-8").replace("custom_tool_call_input.delta", "custom_tool_call_input.dolta")
    (tmp_path / "renamed.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def _rows(page: str, case: str) -> dict[str, tuple[str, str, str]]:
    """kind -> (count, first line, status) in the coverage table of ``case``'s section."""
    section = page[page.index(f'<section class="case" id="{case}"') :]
    table = section[section.index('<table class="coverage">') : section.index("</table>")]
    cells = re.findall(r'<tr><td>([^<]*)</td><td class="number">(\d+)</td><td class="number">(\d*)</td>'
                       r'<td class="(\w+)">', table)
    return {kind: (count, line, status) for kind, count, line, status in cells}


def test_each_cassette_has_a_coverage_table(folder: Path) -> None:
    result = run("report", "custom-tool-call.yaml", "renamed.yaml", "-o", "report.html")
    assert result.code == 0
    page = (folder / "report.html").read_text(encoding="utf-8")
    covered = _rows(page, "case-1")
    assert covered["response.custom_tool_call_input.delta"] == ("47", "10", "mapped")
    assert covered["response.created"][2] == "ignored"
    assert "wire coverage: 7 kind(s) in 53 event(s), none unmapped" in page
    renamed = _rows(page, "case-2")
    assert renamed["response.custom_tool_call_input.dolta"] == ("47", "10", "unmapped")
    # a table with an unmapped kind is open on the page
    assert '<details class="coverage" open><summary>wire coverage: 7 kind(s) in 53 event(s), 1 unmapped' in page
