"""``dsh-replay validate``: the rules on chunk files, one ``FILE:LINE: RULE message`` per violation.

``tests/test_cli_validate.py`` covers a valid file, P10, a line that is not JSON,
an unterminated stream and a missing file; these are the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import SEED_GOLDEN, ndjson, run

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


# -- files that are not chunk files ------------------------------------------------------


def test_a_cassette_is_named_in_one_line_with_the_command_to_use(project: Path) -> None:
    cassette = Path("cassettes/my-provider/greeting.yaml")
    result = run("validate", str(cassette))
    assert (result.code, result.out) == (2, "")  # not one P1 line per YAML line
    assert result.err == (f"dsh-replay: error: {cassette}: this is a cassette (YAML), not a chunk file; "
                          f"use 'dsh-replay check {cassette}'\n")


def test_a_plain_vcrpy_cassette_points_at_show(project: Path) -> None:
    text = (project / "cassettes" / "my-provider" / "greeting.yaml").read_text(encoding="utf-8")
    plain = project / "plain cassette.yaml"
    plain.write_text(text[text.index("interactions:"):], encoding="utf-8")
    result = run("validate", str(plain))
    assert result.code == 2
    assert result.err == (f"dsh-replay: error: {plain}: this is a plain vcrpy cassette (YAML), not a chunk file; "
                          f"use \"dsh-replay show '{plain}'\" for its timeline\n")


def test_a_json_cassette_is_a_cassette_too(tmp_path: Path) -> None:
    cassette = tmp_path / "c.json"
    cassette.write_text(json.dumps({"version": 1, "interactions": [], "dsh_replay": {"route": "openai"}}, indent=4),
                        encoding="utf-8")
    result = run("validate", str(cassette))
    assert result.code == 2
    assert f"{cassette}: this is a cassette (JSON), not a chunk file; use 'dsh-replay check {cassette}'" in result.err


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b'event: message_start\ndata: {"type":"message_start"}\n\ndata: [DONE]\n\n', "this is a raw SSE body"),
        (ndjson("Hello", ", world"), 'this looks like a raw NDJSON provider body (no line has a chunk "type")'),
    ],
    ids=["sse", "ndjson"],
)
def test_a_raw_provider_body_points_at_trace(tmp_path: Path, body: bytes, what: str) -> None:
    path = tmp_path / "body.txt"
    path.write_bytes(body)
    result = run("validate", str(path))
    assert (result.code, result.out) == (2, "")
    assert result.err == (f"dsh-replay: error: {path}: {what}, not a chunk file; "
                          f"turn it into chunks with 'dsh-replay trace --route ROUTE {path}'\n")


def test_a_text_file_is_one_line_not_one_p1_per_line(tmp_path: Path) -> None:
    notes = write(tmp_path / "notes.jsonl", "# notes", "", "the stream looked fine", *SEED[:1])
    result = run("validate", str(notes))
    assert (result.code, result.out) == (2, "")
    assert result.err == (f"dsh-replay: error: {notes}: this is not a JSONL chunk file: 2 of 3 line(s) are not "
                          "JSON objects (the first is line 1); validate reads one chunk per line, as in a golden\n")


@pytest.mark.parametrize("broken", [0, 4, len(SEED) - 1], ids=["first", "middle", "last"])
def test_a_golden_with_one_broken_line_still_gets_its_rule_report(tmp_path: Path, broken: int) -> None:
    lines = list(SEED)
    lines[broken] = "not json at all"
    golden = write(tmp_path / "one-bad.chunks.jsonl", *lines)
    result = run("validate", str(golden))
    assert (result.code, result.err) == (1, "")
    assert f"{golden}:{broken + 1}: P1 chunk at position {broken} is not valid JSON" in result.out


def test_the_other_files_are_still_validated(project: Path, tmp_path: Path) -> None:
    cassette = Path("cassettes/my-provider/greeting.yaml")
    cut = write(tmp_path / "cut.chunks.jsonl", *SEED[:-1])
    result = run("validate", str(cassette), str(cut), str(SEED_GOLDEN))
    assert result.code == 2  # a file it could not validate outranks a failed check
    assert result.out == f"{cut}:8: P11 stream ended after 8 chunk(s) without finish\n"
    assert result.err.count("\n") == 1 and "this is a cassette (YAML)" in result.err
