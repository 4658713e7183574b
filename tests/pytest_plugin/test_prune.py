"""``--prune-unused`` deletes only after a complete, passing run, with or without pytest-xdist.

A run of part of the suite (``--deselect``, ``--lf``, node ids, ``-x``, named
paths) cannot tell what is unused: the files of the tests that did not run
would look unused.
A test that did not pass may have stopped before its later calls, so its files
are never unused, and a run with a failure deletes nothing at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import IMPORTS, echo_test, ini, ndjson, provider, streaming, summary

XDIST = ("-p", "xdist", "-n", "2")
#: the xdist half of a [serial, xdist] matrix whose judgement is the controller's reading of its own
#: options, as in one process: its workers' start-up is left to make test-exhaustive
XDIST_EXHAUSTIVE = pytest.param(XDIST, marks=pytest.mark.exhaustive, id="xdist")
SUBSET = "pruned: nothing (only a run of every test can tell what is unused)"
PATHS = "pruned: nothing (paths were named or pytest started in a subfolder; only a run of the whole suite prunes)"
FAILED = "pruned: nothing (1 test failed or errored; only a run where every test passes prunes)"

AB = IMPORTS + "import os\n" + echo_test("test_a", "a", body='assert not os.environ.get("FAIL_A")') + echo_test("test_b", "b")

TWO_CALLS = IMPORTS + '''
import os


@pytest.mark.asyncio
async def test_two(dsh_replay):
    await dsh_replay.stream(make_adapter(), make_options("first"))
    if os.environ.get("BETWEEN") == "fail":
        raise AssertionError("something unrelated broke between the calls")
    if os.environ.get("BETWEEN") == "skip":
        pytest.skip("cannot go on today")
    await dsh_replay.stream(make_adapter(), make_options("second"))
'''

#: every file the recorded project holds, by folder under ``cassettes/``
RECORDED = {
    "test_ab": ["test_a.chunks.jsonl", "test_a.yaml", "test_b.chunks.jsonl", "test_b.yaml"],
    "test_two": ["test_two.2.chunks.jsonl", "test_two.chunks.jsonl", "test_two.yaml"],
}


@pytest.fixture
def cassettes(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``test_a``, ``test_b`` and the two-call ``test_two`` recorded; returns the cassette folder."""
    project.makepyfile(test_ab=AB, test_two=TWO_CALLS)
    with provider(monkeypatch, *(streaming(ndjson(text), delay=0) for text in ("A", "B", "one", "two"))):
        project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=3)
    folder = project.path / "cassettes"
    assert files(folder) == RECORDED
    return folder


def files(folder: Path) -> dict[str, list[str]]:
    return {sub.name: sorted(p.name for p in sub.iterdir()) for sub in sorted(folder.iterdir())}


def stale(folder: Path) -> Path:
    """A golden no test owns, in a folder the run touches: a complete passing run prunes it."""
    path = folder / "test_ab" / "test_gone.chunks.jsonl"
    path.write_bytes((folder / "test_ab" / "test_a.chunks.jsonl").read_bytes())
    return path


def test_a_complete_passing_run_under_xdist_prunes(project: pytest.Pytester, cassettes: Path) -> None:
    gone = stale(cassettes)
    result = project.runpytest(*XDIST, "--prune-unused")
    result.assert_outcomes(passed=3)
    assert "unused goldens: 1, deleted (cassettes/test_ab/test_gone.chunks.jsonl)" in summary(result)
    assert not gone.exists()
    assert files(cassettes) == RECORDED


def test_deselecting_under_xdist_prunes_nothing(project: pytest.Pytester, cassettes: Path) -> None:
    # the workers deselect; the controller only learns it from their tallies
    gone = stale(cassettes)
    for args in ((*XDIST, "--deselect", "test_ab.py::test_b"), ("--deselect", "test_ab.py::test_b")):
        result = project.runpytest(*args, "--prune-unused")
        result.assert_outcomes(passed=2)
        assert summary(result)[3:] == [SUBSET]
        assert gone.exists()
        assert files(cassettes)["test_ab"] == sorted([*RECORDED["test_ab"], gone.name])


@pytest.mark.parametrize("xdist", [pytest.param((), id="serial"), XDIST_EXHAUSTIVE])
def test_last_failed_prunes_nothing(
    project: pytest.Pytester, cassettes: Path, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    gone = stale(cassettes)
    monkeypatch.setenv("FAIL_A", "1")
    project.runpytest(*xdist).assert_outcomes(passed=2, failed=1)
    monkeypatch.delenv("FAIL_A")
    result = project.runpytest(*xdist, "--lf", "--prune-unused")
    result.assert_outcomes(passed=1)  # test_a only: test_b and test_two.py are left out
    assert summary(result)[3:] == [SUBSET]
    assert gone.exists()
    assert files(cassettes)["test_ab"] == sorted([*RECORDED["test_ab"], gone.name])


@pytest.mark.parametrize("xdist", [pytest.param((), id="serial"), XDIST_EXHAUSTIVE])
def test_node_ids_prune_nothing(project: pytest.Pytester, cassettes: Path, xdist: tuple[str, ...]) -> None:
    gone = stale(cassettes)
    result = project.runpytest(*xdist, "test_ab.py::test_a", "test_two.py::test_two", "--prune-unused")
    result.assert_outcomes(passed=2)
    assert summary(result)[3:] == [SUBSET]
    assert gone.exists()
    assert files(cassettes)["test_ab"] == sorted([*RECORDED["test_ab"], gone.name])


@pytest.mark.parametrize("xdist", [(), XDIST], ids=["serial", "xdist"])
def test_a_test_failing_between_its_calls_keeps_its_later_golden(
    project: pytest.Pytester, cassettes: Path, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    gone = stale(cassettes)
    monkeypatch.setenv("BETWEEN", "fail")
    # a failing run deletes nothing, not even what is unused
    result = project.runpytest(*xdist, "--prune-unused")
    result.assert_outcomes(passed=2, failed=1)
    assert summary(result)[3:] == ["unused goldens: 1 (cassettes/test_ab/test_gone.chunks.jsonl)", "orphan cassettes: 0", FAILED]
    assert gone.exists()
    assert files(cassettes)["test_two"] == RECORDED["test_two"]
    # nor is test_two.2.chunks.jsonl listed: the test never reached the call it is for
    result = project.runpytest(*xdist)
    assert summary(result)[3:] == ["unused goldens: 1 (cassettes/test_ab/test_gone.chunks.jsonl)", "orphan cassettes: 0"]
    # -x stops at the failure, maybe before other tests ran (under xdist, that depends on timing)
    result = project.runpytest(*xdist, "-x", "-p", "no:randomly", "--prune-unused", "test_two.py", "test_ab.py")
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    assert summary(result)[-1] in ((SUBSET, FAILED) if xdist else (SUBSET,))
    assert gone.exists()
    assert files(cassettes)["test_two"] == RECORDED["test_two"]


def test_a_test_skipped_between_its_calls_keeps_its_later_golden(
    project: pytest.Pytester, cassettes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a skip is no failure, so the run prunes: but not the golden of the call the test skipped
    gone = stale(cassettes)
    monkeypatch.setenv("BETWEEN", "skip")
    result = project.runpytest("--prune-unused")
    result.assert_outcomes(passed=2, skipped=1)
    assert "unused goldens: 1, deleted (cassettes/test_ab/test_gone.chunks.jsonl)" in summary(result)
    assert not gone.exists()
    assert files(cassettes) == RECORDED


SKIPPED_MODULE = "import pytest\npytest.skip('an optional dependency is missing', allow_module_level=True)\n"


@pytest.mark.parametrize("xdist", [(), XDIST], ids=["one-process", "xdist"])
def test_a_module_skipped_at_collection_keeps_every_file(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    # two modules of one name share a cassette folder under dsh_replay_cassette_dir: the files
    # of the one skipped at module level would look like orphans of the other's folder
    project.makeini(ini("dsh_replay_cassette_dir = cassettes"))
    for name in ("unit", "e2e"):
        project.mkpydir(name)
    (project.path / "unit" / "test_api.py").write_text(IMPORTS + echo_test("test_a", "a"))
    (project.path / "e2e" / "test_api.py").write_text(IMPORTS + echo_test("test_e2e", "e"))
    with provider(monkeypatch, *(streaming(ndjson(text), delay=0) for text in ("A", "E"))):
        project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=2)
    recorded = files(project.path / "cassettes")
    assert recorded == {"test_api": ["test_a.chunks.jsonl", "test_a.yaml", "test_e2e.chunks.jsonl", "test_e2e.yaml"]}

    (project.path / "e2e" / "test_api.py").write_text(SKIPPED_MODULE + IMPORTS + echo_test("test_e2e", "e"))
    result = project.runpytest("--prune-unused", "-p", "no:randomly", *xdist)
    result.assert_outcomes(passed=1, skipped=1)
    assert files(project.path / "cassettes") == recorded
    assert "pruned: nothing (1 module skipped at collection (e2e/test_api.py): the files of its tests " \
           "cannot be told from unused ones)" in summary(result)
    assert not [line for line in summary(result) if line.startswith(("unused goldens", "orphan cassettes"))]
