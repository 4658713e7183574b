"""``dsh-replay validate``: the rules on chunk files, one ``FILE:LINE: RULE message`` per violation.

``tests/test_cli_validate.py`` covers a valid file, P10, a line that is not JSON,
an unterminated stream and a missing file; these are the rest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import SEED_GOLDEN, run

SEED = SEED_GOLDEN.read_text(encoding="utf-8").splitlines()
RAISED = '{"type":"raised","error":"OverloadedError","message":"busy"}'


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_golden_of_an_error_path_is_valid(tmp_path: Path) -> None:
    golden = write(tmp_path / "error.chunks.jsonl", *SEED[:2], RAISED)
    assert (run("validate", str(golden)).code, run("validate", str(golden)).out) == (0, "")


def test_nothing_may_follow_the_raised_line(tmp_path: Path) -> None:
    golden = write(tmp_path / "after.chunks.jsonl", *SEED[:2], RAISED, SEED[-1])
    result = run("validate", str(golden))
    assert result.code == 1
    assert result.out == f"{golden}:4: P11 nothing may follow the 'raised' line\n"


@pytest.mark.parametrize("line", ['{"type":"raised"}', '{"type":"raised","error":["x"],"message":"m"}'])
def test_a_raised_line_without_its_string_fields_is_p1(tmp_path: Path, line: str) -> None:
    golden = write(tmp_path / "bad.chunks.jsonl", *SEED[:2], line)
    result = run("validate", str(golden))
    assert result.code == 1
    assert f"{golden}:3: P1 a 'raised' line needs string fields 'error' and 'message'\n" in result.out


def test_only_the_broken_files_are_reported_in_order(tmp_path: Path) -> None:
    good = write(tmp_path / "good.chunks.jsonl", *SEED)
    swapped = write(tmp_path / "swapped.chunks.jsonl", *SEED[:-2], SEED[-1], SEED[-2])
    reused = write(tmp_path / "reused.chunks.jsonl", *[line.replace('"index":1', '"index":0') for line in SEED])
    result = run("validate", str(good), str(swapped), str(reused))
    assert result.code == 1
    reported = [line.split(" ", 2)[:2] for line in result.out.splitlines()]
    assert next(where for where, _ in reported) == f"{swapped}:8:"
    assert {rule for where, rule in reported if where.startswith(str(swapped))} >= {"P8", "P9"}
    assert next(rule for where, rule in reported if where.startswith(str(reused))) == "P2"
    assert str(good) not in result.out


def test_a_malformed_chunk_is_p1_with_its_line(tmp_path: Path) -> None:
    golden = write(tmp_path / "shape.chunks.jsonl", SEED[0], '{"type":"text-delta","index":"0","text":"x"}', *SEED[2:])
    result = run("validate", str(golden))
    assert result.code == 1
    assert result.out.startswith(f"{golden}:2: P1 ")


def test_bytes_that_are_not_utf8_are_p1_not_a_crash(tmp_path: Path) -> None:
    golden = tmp_path / "binary.chunks.jsonl"
    golden.write_bytes(SEED_GOLDEN.read_bytes().replace(b"runoob", b"run\xff\xfe", 1))
    result = run("validate", str(golden))
    assert result.code == 1
    assert f"{golden}:2: P1 chunk at position 1 is not UTF-8 text (byte 0xff at column " in result.out


def test_an_empty_file_never_finished(tmp_path: Path) -> None:
    golden = write(tmp_path / "empty.chunks.jsonl")
    result = run("validate", str(golden))
    assert result.code == 1
    assert result.out == f"{golden}:1: P11 stream ended after 0 chunk(s) without finish\n"


def test_a_folder_is_not_a_chunk_file(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path))
    assert result.code == 2
    assert result.err == f"dsh-replay: error: {tmp_path}: cannot read (Is a directory)\n"


def test_a_file_is_required() -> None:
    result = run("validate")
    assert result.code == 2
    assert "the following arguments are required: FILE" in result.err
