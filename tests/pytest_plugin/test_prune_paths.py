"""``--prune-unused`` after a run of some files, or from a subfolder: nothing is listed or deleted.

With one cassette dir, modules of the same name share a folder, and a marker's
``cassette=`` may point into any folder, so a run of part of the suite cannot
tell which files are unused.
"""

from __future__ import annotations

import pytest

from .helpers import IMPORTS, echo_test, ini, provider, summary
from .test_prune import PATHS, XDIST_EXHAUSTIVE


@pytest.mark.parametrize("xdist", [pytest.param((), id="serial"), XDIST_EXHAUSTIVE])  # 5 runs: 10 workers
def test_a_run_of_some_files_prunes_nothing(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    # with one cassette dir, modules of the same name share a folder: unit/ alone cannot judge it
    project.makeini(ini("dsh_replay_cassette_dir = cassettes"))
    for package, test in (("unit", "test_one"), ("e2e", "test_two")):
        project.mkpydir(package)
        project.makepyfile(**{f"{package}/test_api": IMPORTS + echo_test(test)})
    with provider(monkeypatch):
        project.runpytest("--record-mode=once").assert_outcomes(passed=2)
    folder = project.path / "cassettes" / "test_api"
    recorded = sorted(p.name for p in folder.iterdir())
    assert recorded == ["test_one.chunks.jsonl", "test_one.yaml", "test_two.chunks.jsonl", "test_two.yaml"]
    for args in (["unit"], ["unit/test_api.py"], ["--ignore=e2e"]):
        result = project.runpytest(*xdist, *args, "--prune-unused")
        result.assert_outcomes(passed=1)
        assert summary(result)[3:] == [PATHS]  # e2e's test_two files are not even listed
        assert sorted(p.name for p in folder.iterdir()) == recorded
    # started in a folder below the rootdir, pytest runs that folder only
    monkeypatch.chdir(project.path / "unit")
    result = project.runpytest(*xdist, "--prune-unused")
    result.assert_outcomes(passed=1)
    assert summary(result)[3:] == [PATHS]
    assert sorted(p.name for p in folder.iterdir()) == recorded
    # from the rootdir, without paths, it is the whole suite
    monkeypatch.chdir(project.path)
    result = project.runpytest(*xdist, "--prune-unused")
    result.assert_outcomes(passed=2)
    assert summary(result)[3:] == ["unused goldens: 0", "orphan cassettes: 0"]
