"""Under pytest-xdist: the same results, one summary with the right totals, intact goldens."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import IMPORTS, echo_test, ndjson, provider, streaming, summary

N = 20
XDIST = ("-p", "xdist", "-n", "2")


@pytest.fixture
def recorded(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """20 tests recorded in one process, each with its own answer; returns the cassette folder."""
    project.makepyfile(test_many=IMPORTS + "".join(echo_test(f"test_{i:02d}", f"q{i}") for i in range(N)))
    with provider(monkeypatch, *(streaming(ndjson(f"answer {i}"), delay=0) for i in range(N))):
        project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=N)
    folder = project.path / "cassettes" / "test_many"
    assert len(list(folder.glob("*.yaml"))) == N
    return folder


def goldens(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.chunks.jsonl"))}


def test_replay_under_xdist_matches_one_process(project: pytest.Pytester, recorded: Path) -> None:
    (recorded / "stale.chunks.jsonl").write_text("{}\n")  # to see the listing merged once
    single = project.runpytest()
    single.assert_outcomes(passed=N)
    parallel = project.runpytest(*XDIST)
    parallel.assert_outcomes(passed=N)
    parallel.stdout.fnmatch_lines(["*2 workers [[]20 items[]]*"])
    assert summary(parallel) == summary(single) == [
        f"cassettes: {N} replayed, 0 recorded",
        f"goldens: {N} matched, 0 written, 0 updated",
        "secrets scrubbed: 0",
        "unused goldens: 1 (cassettes/test_many/stale.chunks.jsonl)",
        "orphan cassettes: 0",
    ]
    assert len([line for line in parallel.outlines if line.endswith(" dsh-replay " + "-" * 10) or " dsh-replay -" in line]) == 1


def test_update_golden_under_xdist_leaves_every_golden_intact(project: pytest.Pytester, recorded: Path) -> None:
    expected = goldens(recorded)
    for i in range(0, N, 4):
        (recorded / f"test_{i:02d}.chunks.jsonl").write_text('{"type":"finish","reason":{"kind":"stop"}}\n')
    for i in (1, 2, 3):
        (recorded / f"test_{i:02d}.chunks.jsonl").unlink()
    result = project.runpytest(*XDIST, "--update-golden")
    result.assert_outcomes(passed=N)
    assert summary(result)[1] == f"goldens: {N - 8} matched, 3 written, 5 updated"
    assert goldens(recorded) == expected
    assert [p.name for p in recorded.iterdir() if p.name.endswith(".tmp")] == []


def test_recording_under_xdist_writes_every_file_whole(project: pytest.Pytester, recorded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_process = goldens(recorded)
    for path in recorded.iterdir():
        path.unlink()
    with provider(monkeypatch, *(streaming(ndjson(f"answer {i}"), delay=0) for i in range(N))) as emu:
        result = project.runpytest(*XDIST, "--record-mode=once")
        result.assert_outcomes(passed=N)
        assert len(emu.requests) == N
    assert summary(result)[:2] == [f"cassettes: 0 replayed, {N} recorded", f"goldens: 0 matched, {N} written, 0 updated"]
    assert len(list(recorded.glob("*.yaml"))) == N
    # two workers asked in their own order, so answer i may now belong to another test;
    # every golden is still whole: the same set of files as one process wrote
    again = goldens(recorded)
    assert sorted(again) == sorted(one_process)
    assert sorted(again.values()) == sorted(one_process.values())
    project.runpytest().assert_outcomes(passed=N)


def test_without_xdist_loaded_pytest_still_starts(project: pytest.Pytester, recorded: Path) -> None:
    # the controller hook exists only under xdist; pluggy refuses unknown hooks at start-up
    result = project.runpytest("-p", "no:xdist")
    result.assert_outcomes(passed=N)
    assert summary(result)[0] == f"cassettes: {N} replayed, 0 recorded"
