"""``dsh-replay check -n``: the same rows, in the same order, from worker processes."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_replay.cli.check import jobs_type

from .conftest import run

#: a route whose adapter kills the process that builds it: a worker that dies mid-case
CRASHING = '''
import os


def build(**kwargs):
    os._exit(7)
'''


def _rows(output: str) -> list[str]:
    return [re.sub(r"  +(time|-+|\d+ ms)$", "", line) for line in output.splitlines()]


def _many(project: Path, copies: int) -> None:
    source = project / "cassettes" / "my-provider"
    for n in range(copies):
        shutil.copytree(source, project / "cassettes" / f"copy-{n:02d}")


def _route_case(project: Path, route: str, module: str, source: str, factory: str, case: str) -> None:
    """A route of the project's pyproject, served by ``module``, and a cassette ``case`` replayed through it."""
    (project / f"{module}.py").write_text(source, encoding="utf-8")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + f'"{route}" = "{module}:{factory}"\n',
                         encoding="utf-8")
    cassettes = project / "cassettes" / "my-provider"
    greeting = (cassettes / "greeting.yaml").read_text(encoding="utf-8")
    (cassettes / f"{case}.yaml").write_text(greeting.replace("route: my-provider", f"route: {route}"),
                                            encoding="utf-8")


def test_workers_give_the_rows_of_one_process_in_input_order(project: Path) -> None:
    _many(project, 12)  # 26 cases: several batches per worker
    golden = project / "cassettes" / "copy-05" / "umlauts.chunks.jsonl"
    golden.write_bytes(golden.read_bytes().replace(b" aus K\xc3\xb6ln", b" aus Bonn"))
    alone = run("check", "-n", "1", "cassettes")
    spread = run("check", "-n", "2", "cassettes")
    assert (alone.code, spread.code) == (1, 1)
    assert _rows(spread.out) == _rows(alone.out)
    assert "26 case(s), 156 chunks: 25 passed, 1 failed" in spread.out


def test_update_in_workers_writes_each_missing_golden(project: Path) -> None:
    _many(project, 3)
    goldens = sorted((project / "cassettes").rglob("*.chunks.jsonl"))
    expected = {path: path.read_bytes() for path in goldens}
    for path in goldens:
        path.unlink()
    result = run("check", "-n", "2", "--update", "cassettes")
    assert result.code == 0, result.out
    assert result.out.count("ok, golden written") == len(goldens) == 8
    assert {path: path.read_bytes() for path in goldens} == expected
    assert run("check", "-n", "2", "cassettes").code == 0


def test_a_worker_that_dies_fails_its_case_only(project: Path) -> None:
    _many(project, 2)
    # sorted after the first case, which the parent replays once before the workers start
    _route_case(project, "crashing", "crashing_route", CRASHING, "build", "zz-crash")
    result = run("check", "-n", "2", "cassettes")
    assert result.code == 1
    assert re.search(r"^zz-crash +- +0 +0 +0 +FAIL worker crashed", result.out, re.M), result.out
    assert "died (exit code 7) before it finished the case" in result.out
    assert "7 case(s), 36 chunks: 6 passed, 1 failed" in result.out


def test_a_worker_that_dies_early_leaves_every_other_case_to_the_others(project: Path) -> None:
    _many(project, 12)  # 26 cases: each worker has a second batch in flight when the crash comes
    _route_case(project, "crashing", "crashing_route", CRASHING, "build", "zz-crash")
    crash = project / "cassettes" / "copy-00" / "h-crash.yaml"  # the second case: the first is the warm-up's
    (project / "cassettes" / "my-provider" / "zz-crash.yaml").rename(crash)
    result = run("check", "-n", "2", "cassettes")
    assert result.code == 1
    rows = [line.split()[0] for line in result.out.splitlines()[2:result.out.splitlines().index("")]]
    assert rows[:3] == ["greeting", "h-crash", "umlauts"], result.out  # input order, the crash in its place
    assert re.search(r"^h-crash +- +0 +0 +0 +FAIL worker crashed", result.out, re.M), result.out
    assert "27 case(s), 156 chunks: 26 passed, 1 failed" in result.out


def test_jobs_are_auto_or_a_positive_count() -> None:
    assert jobs_type("3") == 3
    assert jobs_type("auto") >= 1
    with pytest.raises(Exception, match=r"-n wants auto or a number of processes \(1 or more\), got '0'"):
        jobs_type("0")


def test_a_bad_job_count_is_a_usage_error(project: Path) -> None:
    result = run("check", "-n", "many", "cassettes")
    assert result.code == 2
    assert "-n wants auto or a number of processes (1 or more), got 'many'" in result.err


#: a route whose adapter never comes back: a worker stuck mid-case
HANGING = '''
import time


def build(**kwargs):
    time.sleep(3600)
'''


def test_a_worker_that_hangs_fails_its_case_and_the_run_ends(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_replay.cli import check_parallel

    monkeypatch.setattr(check_parallel, "HANG_SECONDS", 2.0)  # the guard under test; a replay takes milliseconds
    _many(project, 2)
    _route_case(project, "hanging", "hanging_route", HANGING, "build", "zz-hang")
    result = run("check", "-n", "2", "cassettes")
    assert result.code == 1
    assert re.search(r"^zz-hang +- +0 +0 +0 +FAIL worker hung", result.out, re.M), result.out
    assert "gave no result for 2 s and was stopped" in result.out
    assert "7 case(s), 36 chunks: 6 passed, 1 failed" in result.out


#: a route whose adapter awaits what a replay never sends
AWAITING = '''
import anyio

from my_llm_adapter import _MyAdapter


class Waits(_MyAdapter):
    async def stream(self, options):
        await anyio.sleep_forever()
        yield None
'''


def test_an_adapter_that_awaits_for_ever_fails_its_case_in_one_process(
    project: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dsh_replay.cli import check

    monkeypatch.setattr(check, "CASE_SECONDS", 1.0)  # the guard under test
    _route_case(project, "awaiting", "awaiting_route", AWAITING, "Waits", "zz-wait")
    result = run("check", "-n", "1", "cassettes")
    assert result.code == 1
    assert re.search(r"^zz-wait +- +0 +0 +0 +FAIL hung", result.out, re.M), result.out
    assert "no result after 1 s" in result.out


class _Scripted:
    """A batch runner whose rows are made up: ``problem`` of each case's row is ``problems[name]`` (or "")."""

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = problems

    async def __call__(self, batch: list[Path], report: Callable[[Path, dict[str, Any]], None]) -> None:
        for path in batch:
            report(path, {"case": path.name, "path": str(path), "ok": True, "problem": self.problems.get(path.name, "")})

    async def aclose(self) -> None:
        pass


def _spread(names: list[str], runner: _Scripted, jobs: int = 2) -> list[dict[str, Any]]:
    from dsh_replay.cli.check_parallel import check_in_workers

    seen: list[int] = []
    rows = check_in_workers([Path(name) for name in names], jobs, runner, lambda path: path.name,
                            lambda done, row: seen.append(done))
    assert seen == list(range(1, len(names) + 1))  # one progress step per row, as each came
    return rows


def test_rows_longer_than_a_pipe_holds_arrive_whole() -> None:
    names = [f"case-{n:02d}" for n in range(40)]
    # a pipe holds 64 KiB: these rows are written in several pieces, and read in several
    problems = {"case-03": "é" * 300_000, "case-17": "line\n" * 50_000, "case-39": "x" * 70_000}
    rows = _spread(names, _Scripted(problems))
    assert [row["case"] for row in rows] == names
    assert [row["problem"] for row in rows] == [problems.get(name, "") for name in names]


def test_a_worker_that_dies_between_batches_is_replaced_and_the_next_batch_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from dsh_replay.cli import check_parallel

    whole = check_parallel._write_all
    ended: list[int] = []

    def dies_after_its_first_batch(fd: int, data: bytes) -> None:
        whole(fd, data)
        if data == b"\n":  # a batch's end: the parent sends the next batch to a worker that is gone
            ended.append(1)
            os._exit(0)

    monkeypatch.setattr(check_parallel, "_write_all", dies_after_its_first_batch)
    # the parent takes rows this long after they come: each worker has long exited when its end is read
    monkeypatch.setattr(check_parallel, "_PAUSE", 0.2)
    names = [f"case-{n:02d}" for n in range(40)]
    rows = _spread(names, _Scripted({}))
    assert [row["case"] for row in rows] == names  # every case once, in order: none lost to the dead worker
    crashed = [row["case"] for row in rows if not row["ok"]]
    # each worker's second batch, sent at the start, was never begun: its first case is the one charged
    assert all(row["verdict"] == "FAIL worker crashed" for row in rows if not row["ok"])
    assert len(crashed) < len(names) // 2


def test_a_worker_that_dies_while_writing_a_row_fails_that_case_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from dsh_replay.cli import check_parallel

    whole = check_parallel._write_all

    def dies_halfway(fd: int, data: bytes) -> None:
        if b'"case-07"' in data:  # half the row gets out, then the worker is gone
            whole(fd, data[: len(data) // 2])
            os._exit(9)
        whole(fd, data)

    monkeypatch.setattr(check_parallel, "_write_all", dies_halfway)  # the forked workers inherit it
    names = [f"case-{n:02d}" for n in range(30)]
    rows = _spread(names, _Scripted({"case-07": "y" * 100_000}))
    assert [row["case"] for row in rows] == names
    crashed = [row for row in rows if not row["ok"]]
    assert [(row["case"], row["verdict"]) for row in crashed] == [("case-07", "FAIL worker crashed")]
    assert "died (exit code 9)" in crashed[0]["problem"]
