"""``dsh-replay diff``: two chunk files compared block by block, then line by line."""

from __future__ import annotations

from pathlib import Path

from .conftest import SEED_GOLDEN, run

SEED = SEED_GOLDEN.read_text(encoding="utf-8")


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_identical_files(tmp_path: Path) -> None:
    copy = write(tmp_path, "copy.chunks.jsonl", SEED)
    result = run("diff", str(SEED_GOLDEN), copy)
    assert (result.code, result.out, result.err) == (0, "identical\n", "")


def test_changed_text_and_arguments_are_shown_by_block(tmp_path: Path) -> None:
    a = write(tmp_path, "a.chunks.jsonl", SEED)
    b = write(tmp_path, "b.chunks.jsonl", SEED.replace("教程", "tutorial").replace("echo runoob", "echo hi"))
    result = run("diff", a, b)
    assert result.code == 1
    by_block, line_diff = result.out.split("\n\n", 1)
    assert by_block.splitlines() == [
        "block 0 (text): text differs",
        "  - 'runoob [教程]'",
        "  + 'runoob [tutorial]'",
        "block 1 (tool-call bash): arguments differs",
        """  - '{"command":"echo [runoob]"}'""",
        """  + '{"command":"echo [hi]"}'""",
    ]
    lines = line_diff.splitlines()
    assert lines[:3] == [f"--- {a} (9 line(s))", f"+++ {b} (9 line(s))", "@@ line 1 @@"]
    assert '- {"type":"text-delta","index":0,"text":" 教程"}' in lines
    assert '+ {"type":"text-delta","index":0,"text":" tutorial"}' in lines
    assert "update-golden" not in result.out  # not a golden comparison: no pytest advice


def test_missing_block_usage_and_finish(tmp_path: Path) -> None:
    lines = SEED.splitlines()
    text_only = [*lines[:4], '{"type":"usage","usage":{"inputTokens":100,"outputTokens":7}}',
                 '{"type":"finish","reason":{"kind":"stop","raw":"end_turn"}}']
    a = str(SEED_GOLDEN)
    b = write(tmp_path, "b.chunks.jsonl", "\n".join(text_only) + "\n")
    result = run("diff", a, b)
    assert result.code == 1
    assert result.out.split("\n\n", 1)[0].splitlines() == [
        f"block 1 (tool-call bash): only in {a}",
        "usage differs:",
        '  - {"inputTokens":100,"outputTokens":50}',
        '  + {"inputTokens":100,"outputTokens":7}',
        "finish differs:",
        '  - {"kind":"tool-calls"}',
        '  + {"kind":"stop","raw":"end_turn"}',
    ]


def test_an_error_path_against_a_finished_stream(tmp_path: Path) -> None:
    lines = SEED.splitlines()
    a = write(tmp_path, "a.chunks.jsonl", "\n".join([*lines[:4], '{"type":"raised","error":"OverloadedError","message":"busy"}']) + "\n")
    result = run("diff", a, str(SEED_GOLDEN))
    assert result.code == 1
    summary = result.out.split("\n\n", 1)[0]
    assert f"block 1 (tool-call bash): only in {SEED_GOLDEN}" in summary
    assert "usage differs:\n  - (none)\n" in summary
    assert 'raised differs:\n  - {"type":"raised","error":"OverloadedError","message":"busy"}\n  + (none)' in summary


def test_same_blocks_chunked_differently(tmp_path: Path) -> None:
    lines = SEED.splitlines()
    merged = [lines[0], '{"type":"text-delta","index":0,"text":"runoob 教程"}', *lines[3:]]
    b = write(tmp_path, "merged.chunks.jsonl", "\n".join(merged) + "\n")
    result = run("diff", str(SEED_GOLDEN), b)
    assert result.code == 1
    assert result.out.startswith("the blocks are the same; the chunking differs\n\n")
    assert '+ {"type":"text-delta","index":0,"text":"runoob 教程"}' in result.out


def test_missing_and_corrupt_files_are_named(tmp_path: Path) -> None:
    result = run("diff", str(SEED_GOLDEN), str(tmp_path / "absent.jsonl"))
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"dsh-replay: error: cannot read {tmp_path / 'absent.jsonl'}")
    corrupt = write(tmp_path, "corrupt.jsonl", SEED.replace('"type":"usage"', '"type":"usage', 1))
    result = run("diff", corrupt, str(SEED_GOLDEN))
    assert result.code == 2
    assert result.err.startswith(f"dsh-replay: error: {corrupt}:8: not valid JSON")


def test_line_separators_inside_text_do_not_split_chunks(tmp_path: Path) -> None:
    a = write(tmp_path, "a.chunks.jsonl", SEED.replace("runoob 教程", "runoob\u2028教程").replace(" 教程", "\u2028教程"))
    b = write(tmp_path, "b.chunks.jsonl", SEED.replace("runoob 教程", "runoob\u2028教程!").replace(" 教程", "\u2028教程!"))
    result = run("diff", a, b)
    assert result.code == 1
    assert f"--- {a} (9 line(s))" in result.out
    assert '+ {"type":"text-delta","index":0,"text":"\u2028教程!"}' in result.out
