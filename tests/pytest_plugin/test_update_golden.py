"""``--update-golden``: missing and differing goldens are written (atomically) and counted;
unused goldens and orphan cassettes are reported, and deleted only with ``--prune-unused``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .helpers import (
    IMPORTS,
    echo_test,
    golden_lines,
    ndjson,
    provider,
    read_lines,
    streaming,
    summary,
    summary_line,
)

FOUR = IMPORTS + "".join(echo_test(f"test_{name}", name) for name in ("a", "b", "c", "d"))


@pytest.fixture
def recorded(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four recorded tests (texts A, B, C, D); returns their cassette folder."""
    project.makepyfile(test_up=FOUR)
    responses = [streaming(ndjson(t.upper())) for t in "abcd"]
    with provider(monkeypatch, *responses):
        project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=4)
    return project.path / "cassettes" / "test_up"


def test_missing_and_differing_goldens_fail_without_the_flag(project: pytest.Pytester, recorded: Path) -> None:
    (recorded / "test_a.chunks.jsonl").unlink()
    changed = recorded / "test_b.chunks.jsonl"
    changed.write_text(changed.read_text().replace('"B"', '"b"'))
    result = project.runpytest()
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*golden *test_a.chunks.jsonl is missing; write it with --update-golden*"])
    result.stdout.fnmatch_lines(["*golden *test_b.chunks.jsonl differs*"])
    assert summary_line(result, "goldens:") == "goldens: 2 matched, 0 written, 0 updated, 1 differing, 1 missing"
    assert not (recorded / "test_a.chunks.jsonl").exists()


def test_a_golden_that_cannot_be_read_fails_its_test_with_the_reason(project: pytest.Pytester, recorded: Path) -> None:
    golden = recorded / "test_a.chunks.jsonl"
    golden.unlink()
    golden.mkdir()
    for flags in ((), ("--update-golden",)):
        result = project.runpytest(*flags)
        result.assert_outcomes(passed=3, failed=1)
        result.stdout.fnmatch_lines(["*golden *test_a.chunks.jsonl cannot be read (Is a directory); make it a readable file"])
        result.stdout.no_fnmatch_line("*Traceback*")
        assert summary_line(result, "goldens:").endswith(", 1 unreadable")
    assert golden.is_dir()


def test_update_writes_missing_and_differing_goldens_and_counts_them(project: pytest.Pytester, recorded: Path) -> None:
    (recorded / "test_a.chunks.jsonl").unlink()
    (recorded / "test_b.chunks.jsonl").write_text('{"type":"finish","reason":{"kind":"stop"}}\n')
    (recorded / "test_c.chunks.jsonl").write_bytes(b"")
    untouched = (recorded / "test_d.chunks.jsonl").stat().st_mtime_ns

    replaced: list[tuple[Path, Path]] = []
    real_replace = os.replace

    def spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        replaced.append((Path(src), Path(dst)))
        real_replace(src, dst)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "replace", spy)  # the inner run is in-process: this sees its writes
        result = project.runpytest("--update-golden")

    result.assert_outcomes(passed=4)
    for name in "abc":
        assert read_lines(recorded / f"test_{name}.chunks.jsonl") == golden_lines(name.upper())
    assert (recorded / "test_d.chunks.jsonl").stat().st_mtime_ns == untouched  # a matching golden is not rewritten
    assert summary_line(result, "goldens:") == "goldens: 1 matched, 1 written, 2 updated"
    # atomic: each golden was moved into place from a temporary file in its own folder
    goldens = {dst.name: src for src, dst in replaced if dst.name.endswith(".chunks.jsonl")}
    assert sorted(goldens) == ["test_a.chunks.jsonl", "test_b.chunks.jsonl", "test_c.chunks.jsonl"]
    assert all(src.parent == recorded and src.name.endswith(".tmp") for src in goldens.values())
    assert [p.name for p in recorded.iterdir() if p.name.endswith(".tmp")] == []
    project.runpytest().assert_outcomes(passed=4)


def test_unused_goldens_and_orphan_cassettes_are_reported_not_deleted(project: pytest.Pytester, recorded: Path) -> None:
    (recorded / "test_gone.yaml").write_bytes((recorded / "test_a.yaml").read_bytes())
    (recorded / "test_gone.chunks.jsonl").write_bytes((recorded / "test_a.chunks.jsonl").read_bytes())
    (recorded / "test_a.2.chunks.jsonl").write_bytes((recorded / "test_a.chunks.jsonl").read_bytes())
    result = project.runpytest("--update-golden")
    result.assert_outcomes(passed=4)
    lines = summary(result)
    assert "unused goldens: 2 (cassettes/test_up/test_a.2.chunks.jsonl, cassettes/test_up/test_gone.chunks.jsonl)" in lines
    assert "orphan cassettes: 1 (cassettes/test_up/test_gone.yaml)" in lines
    for name in ("test_gone.yaml", "test_gone.chunks.jsonl", "test_a.2.chunks.jsonl"):
        assert (recorded / name).is_file()


def test_prune_unused_deletes_what_the_summary_lists_and_nothing_else(project: pytest.Pytester, recorded: Path) -> None:
    (recorded / "test_gone.yaml").write_bytes((recorded / "test_a.yaml").read_bytes())
    (recorded / "test_gone.chunks.jsonl").write_bytes((recorded / "test_a.chunks.jsonl").read_bytes())
    # a partial run cannot tell what is unused: it deletes nothing
    result = project.runpytest("--prune-unused", "-k", "test_a")
    result.assert_outcomes(passed=1)
    assert (recorded / "test_gone.yaml").is_file()
    assert "pruned: nothing (only a run of every test can tell what is unused)" in summary(result)
    result = project.runpytest("--prune-unused")
    result.assert_outcomes(passed=4)
    assert "unused goldens: 1, deleted (cassettes/test_up/test_gone.chunks.jsonl)" in summary(result)
    assert "orphan cassettes: 1, deleted (cassettes/test_up/test_gone.yaml)" in summary(result)
    assert sorted(p.name for p in recorded.iterdir()) == sorted(
        f"test_{n}{suffix}" for n in "abcd" for suffix in (".yaml", ".chunks.jsonl")
    )


def test_prune_unused_is_refused_in_ci(project: pytest.Pytester, recorded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    result = project.runpytest("--prune-unused")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prune-unused is refused because CI is set*"])


def test_a_skipped_test_leaves_no_orphan_and_a_partial_run_reports_none(project: pytest.Pytester, recorded: Path) -> None:
    source = (project.path / "test_up.py").read_text()
    (project.path / "test_up.py").write_text(source.replace("async def test_d", "@pytest.mark.skip\nasync def test_d"))
    result = project.runpytest()
    result.assert_outcomes(passed=3, skipped=1)
    assert "unused goldens: 0" in summary(result)
    assert "orphan cassettes: 0" in summary(result)
    # a run of part of the module cannot tell what is unused: it does not say
    for args in (["-k", "test_a"], ["test_up.py::test_a"]):
        result = project.runpytest(*args)
        result.assert_outcomes(passed=1)
        assert summary_line(result, "cassettes:") == "cassettes: 1 replayed, 0 recorded"
        assert not [line for line in summary(result) if line.startswith(("unused", "orphan"))]


def test_a_golden_switched_off_is_unused(project: pytest.Pytester, recorded: Path) -> None:
    source = (project.path / "test_up.py").read_text()
    (project.path / "test_up.py").write_text(source.replace("async def test_b", "@pytest.mark.dsh_replay(golden=False)\nasync def test_b"))
    result = project.runpytest()
    result.assert_outcomes(passed=4)
    assert "unused goldens: 1 (cassettes/test_up/test_b.chunks.jsonl)" in summary(result)


def test_a_golden_with_other_line_ends_is_explained(project: pytest.Pytester, recorded: Path) -> None:
    golden = recorded / "test_a.chunks.jsonl"
    canonical = golden.read_bytes()
    golden.write_bytes(canonical.replace(b"\n", b"\r\n"))
    result = project.runpytest()
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        ["*golden *test_a.chunks.jsonl holds the adapter's chunks but not in the canonical bytes (it differs only in line ends*"]
    )
    project.runpytest("--update-golden").assert_outcomes(passed=4)
    assert golden.read_bytes() == canonical


def test_the_first_difference_counts_chunks_not_unicode_line_breaks(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # JSON keeps U+2028 raw; a diff that split lines on it would put the difference one chunk late
    project.makepyfile(test_u=IMPORTS + echo_test("test_sep"))
    with provider(monkeypatch, streaming(ndjson("a\u2028b", "c"))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    golden = project.path / "cassettes" / "test_u" / "test_sep.chunks.jsonl"
    golden.write_text(golden.read_text(encoding="utf-8").replace('"text":"c"}', '"text":"C"}'), encoding="utf-8")
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*differs from the adapter's chunks; first difference at chunk 2 (line 3)"])


# -- a golden the run had to write, left unwritten because its test did not pass ----------------

#: test_a fails after its stream when FAIL_A is set; test_b is an xfail that fails after its stream
AFTER = IMPORTS + """
import os
""" + echo_test("test_a", "A", body='assert chunks\n    assert not os.environ.get("FAIL_A"), "broke after the stream"') + echo_test(
    "test_b", "B", marker="@pytest.mark.xfail(reason='known')", body='assert os.environ.get("PASS_B"), "still broken"'
)


@pytest.mark.parametrize("xdist", [(), ("-p", "xdist", "-n", "2")], ids=["serial", "xdist"])
def test_update_golden_says_which_goldens_a_failing_test_left_unwritten(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    project.makepyfile(test_after=AFTER)
    monkeypatch.setenv("PASS_B", "1")
    with provider(monkeypatch, streaming(ndjson("A")), streaming(ndjson("B"))):
        result = project.runpytest("--record-mode=once", "-p", "no:randomly")
    result.assert_outcomes(passed=1, xpassed=1)
    monkeypatch.delenv("PASS_B")
    folder = project.path / "cassettes" / "test_after"
    stale = '{"type":"finish","reason":{"kind":"stop"}}\n'
    for name in ("test_a", "test_b"):
        (folder / f"{name}.chunks.jsonl").write_text(stale)

    monkeypatch.setenv("FAIL_A", "1")
    result = project.runpytest(*xdist, "--update-golden", "-p", "no:randomly")
    result.assert_outcomes(failed=1, xfailed=1)
    lines = summary(result)
    assert lines[1:4] == [
        "goldens: 0 matched, 0 written, 0 updated",
        "goldens: 1 not written (test failed): cassettes/test_after/test_a.chunks.jsonl",
        "goldens: 1 not written (test xfailed): cassettes/test_after/test_b.chunks.jsonl",
    ]
    assert (folder / "test_a.chunks.jsonl").read_text() == stale
    assert (folder / "test_b.chunks.jsonl").read_text() == stale

    # once the test passes, the golden is written and the line is gone
    monkeypatch.delenv("FAIL_A")
    result = project.runpytest(*xdist, "--update-golden", "-p", "no:randomly")
    result.assert_outcomes(passed=1, xfailed=1)
    assert [line for line in summary(result) if "not written" in line] == [
        "goldens: 1 not written (test xfailed): cassettes/test_after/test_b.chunks.jsonl"
    ]
    assert summary_line(result, "goldens: 0 matched") == "goldens: 0 matched, 0 written, 1 updated"
    assert read_lines(folder / "test_a.chunks.jsonl") == golden_lines("A")


def test_a_recording_whose_test_fails_names_the_golden_it_did_not_write(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(test_after=AFTER)
    monkeypatch.setenv("FAIL_A", "1")
    monkeypatch.setenv("PASS_B", "1")
    with provider(monkeypatch, streaming(ndjson("A")), streaming(ndjson("B"))):
        result = project.runpytest("--record-mode=once", "test_after.py::test_a")
    result.assert_outcomes(failed=1)
    assert summary(result)[:3] == [
        "cassettes: 0 replayed, 0 recorded",
        "goldens: 0 matched, 0 written, 0 updated",
        "goldens: 1 not written (test failed): cassettes/test_after/test_a.chunks.jsonl",
    ]
    assert not (project.path / "cassettes" / "test_after").exists()  # neither the cassette nor its golden
