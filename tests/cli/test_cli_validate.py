from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_replay.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "cassettes" / "seed" / "example.chunks.jsonl"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_valid_file_prints_nothing_and_exits_0() -> None:
    assert run("validate", str(SEED)) == (0, "")


def test_violations_are_reported_as_file_line_rule(tmp_path: Path) -> None:
    lines = SEED.read_text(encoding="utf-8").splitlines()
    # finish kind stop with a tool-call block: P10 on the last line (9)
    lines[-1] = '{"type":"finish","reason":{"kind":"stop"}}'
    # a blank line in the middle shifts line numbers: LINE counts file lines, not chunks
    lines.insert(2, "")
    path = tmp_path / "bad.chunks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, output = run("validate", str(path))
    assert code == 1
    assert output.splitlines() == [
        f"{path}:10: P10 finish at position 8 has kind 'stop'; the stream has 1 tool-call block(s), so it must be 'tool-calls'"
    ]


def test_a_line_that_is_not_a_chunk_is_p1_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b'{"type":"usage","usage":{"inputTokens":1,"outputTokens":2}}\nnot json at all\n{"type":"finish","reason":{"kind":"stop"}}\n')
    code, output = run("validate", str(path))
    assert code == 1
    reported = [line.split(": ", 1)[0].rsplit(":", 1)[1] + " " + line.split(": ", 1)[1].split()[0] for line in output.splitlines()]
    assert reported[0] == "2 P1"
    assert ": P1 chunk at position 1 is not valid JSON" in output


def test_several_files_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("validate", str(SEED), str(tmp_path / "absent.jsonl"))
    assert code == 2
    assert "absent.jsonl: cannot read" in capsys.readouterr().err


def test_unterminated_stream_names_open_blocks(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    lines = SEED.read_bytes().splitlines(keepends=True)[:6]
    path.write_bytes(b"".join(lines))
    code, output = run("validate", str(path))
    assert code == 1
    assert output == f"{path}:6: P11 stream ended after 6 chunk(s) without finish; blocks still open: 1 (tool-call)\n"


def test_check_prints_a_table_and_fails_on_a_bad_golden(tmp_path: Path) -> None:
    good = tmp_path / "route-a" / "good.chunks.jsonl"
    bad = tmp_path / "route-b" / "bad.chunks.jsonl"
    good.parent.mkdir()
    bad.parent.mkdir()
    good.write_bytes(SEED.read_bytes())
    bad.write_bytes(b"".join(SEED.read_bytes().splitlines(keepends=True)[:-1]))
    code, output = run("check", str(tmp_path))
    assert code == 1
    assert re.sub(r"\d+ ms", "N ms", output).splitlines()[:7] == [
        # goldens alone: the rules were run, no route was, whatever the folder is called
        "case  route  fragments  chunks  blocks  verdict                                    time",
        "----  -----  ---------  ------  ------  -----------------------------------------  ----",
        "good  -      0          9       2       golden only: rules hold, nothing replayed  N ms",
        "bad   -      0          8       2       FAIL P11 (line 8)                          N ms",
        "",
        "2 case(s), 17 chunks: 0 passed, 1 failed, 1 golden(s) only (rules checked, nothing replayed)",
        "",
    ]
    assert f"{bad}:8: P11 stream ended after 8 chunk(s) without finish\n" in output


def test_python_dash_m_and_console_script_work() -> None:
    result = subprocess.run([sys.executable, "-m", "dsh_replay", "validate", str(SEED)], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    result = subprocess.run([sys.executable, "-m", "dsh_replay", "check", str(ROOT / "cassettes")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^example +- +0 +9 +2 +golden only: rules hold, nothing replayed", result.stdout, re.M)
