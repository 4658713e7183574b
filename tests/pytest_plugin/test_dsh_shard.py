"""``--dsh-shard K/N`` (ini ``dsh_replay_shard``): N jobs together run every cassette case exactly once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .helpers import ini

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
ROUTES = ("openai", "gemini")  # a few real cases (goldens included), enough for 4 shards
PLAIN = "test_plain.py::test_not_a_case"


@pytest.fixture
def cases(pytester: pytest.Pytester) -> list[str]:
    """A project of collected cassette cases and one plain test; the node ids of the cases."""
    for route in ROUTES:
        shutil.copytree(CASSETTES / route, pytester.path / "cassettes" / route)
    pytester.makeini(ini("dsh_replay_collect = true"))
    pytester.makepyfile(test_plain="def test_not_a_case():\n    pass\n")
    ids = sorted(f"cassettes/{path.relative_to(pytester.path / 'cassettes').as_posix()}::{path.stem}"
                 for path in (pytester.path / "cassettes").rglob("*.yaml"))
    assert len(ids) >= 8
    return ids


def _passed(result: pytest.RunResult) -> list[str]:
    return [report.nodeid for report in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
            if report.when == "call" and report.passed]


@pytest.mark.parametrize("total", [1, 3, 4])
def test_the_shards_together_run_every_case_once(pytester: pytest.Pytester, cases: list[str], total: int) -> None:
    ran = []
    for index in range(1, total + 1):
        result = pytester.runpytest("--dsh-shard", f"{index}/{total}", "-p", "no:randomly")
        assert result.ret == pytest.ExitCode.OK
        passed = _passed(result)
        assert PLAIN in passed  # test functions are not split: every job runs them
        shard = [nodeid for nodeid in passed if nodeid != PLAIN]
        result.assert_outcomes(passed=len(shard) + 1, deselected=len(cases) - len(shard))
        assert f"dsh-replay: shard {index}/{total}: {len(shard)} of {len(cases)} cassette cases" in result.outlines
        ran.append(shard)
    assert sorted(nodeid for shard in ran for nodeid in shard) == cases  # all of them, none twice
    sizes = [len(shard) for shard in ran]
    assert max(sizes) - min(sizes) <= 1


def test_the_ini_twin_splits_the_same_way_and_the_option_wins(pytester: pytest.Pytester, cases: list[str]) -> None:
    by_option = _passed(pytester.runpytest("--dsh-shard", "2/3"))
    by_ini = _passed(pytester.runpytest("-o", "dsh_replay_shard=2/3"))
    assert sorted(by_ini) == sorted(by_option)
    over = _passed(pytester.runpytest("-o", "dsh_replay_shard=2/3", "--dsh-shard", "1/3"))
    assert not set(over) - {PLAIN} & set(by_option)


def test_the_shards_split_what_is_left_after_k(pytester: pytest.Pytester, cases: list[str]) -> None:
    openai = [nodeid for nodeid in cases if nodeid.startswith("cassettes/openai/")]
    ran = [_passed(pytester.runpytest("-k", "openai", "--dsh-shard", f"{index}/2")) for index in (1, 2)]
    assert sorted(ran[0] + ran[1]) == openai
    assert abs(len(ran[0]) - len(ran[1])) <= 1


def test_a_shard_under_xdist_runs_the_same_cases(pytester: pytest.Pytester, cases: list[str]) -> None:
    alone = pytester.runpytest("--dsh-shard", "3/4")
    spread = pytester.runpytest("--dsh-shard", "3/4", "-p", "xdist", "-n", "2")
    count = len(_passed(alone)) - 1
    spread.assert_outcomes(passed=count + 1)
    spread.stdout.fnmatch_lines([f"dsh-replay: shard 3/4: {count} of {len(cases)} cassette cases"])


@pytest.mark.parametrize(("argv", "message"), [
    (("--dsh-shard", "0/4"), "--dsh-shard: there is no shard 0/4; valid: 1/4, 2/4, 3/4, 4/4"),
    (("--dsh-shard", "5/4"), "--dsh-shard: there is no shard 5/4; valid: 1/4, 2/4, 3/4, 4/4"),
    (("--dsh-shard", "x/y"), "--dsh-shard: expected K/N, the K-th of N shards with 1 <= K <= N (e.g. 2/4); got 'x/y'"),
    (("-o", "dsh_replay_shard=5/4"), "ini dsh_replay_shard: there is no shard 5/4; valid: 1/4, 2/4, 3/4, 4/4"),
])
def test_a_bad_shard_is_a_usage_error(pytester: pytest.Pytester, cases: list[str], argv: tuple[str, ...],
                                      message: str) -> None:
    result = pytester.runpytest(*argv)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()] == [f"ERROR: dsh-replay: {message}"]
