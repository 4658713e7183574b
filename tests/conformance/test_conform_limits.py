"""``conform --command``: an adapter whose stdout breaks a chunk file's limit is killed, and its case fails naming it.

The limits are lowered for these tests; the adapter then sleeps far longer than
the case's time limit, so that only the kill ends its case with the limit's
message (a run that waited for it would end as a hang instead).
"""

from __future__ import annotations

import shlex
import sys

import pytest

from dsh_replay.protocol import bounds

from .test_conform_command import conform, rows


def _prints_then_sleeps(text: str) -> str:
    script = f"import sys, time; sys.stdout.write({text}); sys.stdout.flush(); time.sleep(600)"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"


def _detail(command: str) -> str:
    result = conform("--command", command, "--route", "openai", "-k", "text[recorded]", "--case-timeout", "60")
    assert result.returncode == 1, result.stdout + result.stderr
    verdict, detail = rows(result.stdout)["text[recorded]"]
    assert verdict == "FAIL"
    return detail


def test_an_adapter_printing_more_lines_than_a_chunk_file_may_have_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINES", 1000)
    line = '{"type":"block-start","index":0,"blockType":"text"}\n'
    detail = _detail(_prints_then_sleeps(f"{line!r} * 5000"))
    assert detail.startswith("stdout: more than 1,000 lines, the most a chunk file may have"), detail


def test_an_adapter_printing_an_endless_line_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_LINE_BYTES", 1000)
    detail = _detail(_prints_then_sleeps("'x' * 5000"))
    assert detail.startswith("stdout: line 1 is longer than 1,000 bytes, the most a chunk line may have"), detail


def test_an_adapter_printing_more_bytes_than_a_chunk_file_may_have_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_JSONL_BYTES", 10_000)
    detail = _detail(_prints_then_sleeps("'{}\\n' * 5000"))
    assert detail.startswith("stdout: more than 10,000 bytes, the most a chunk file may have"), detail
