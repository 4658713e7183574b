"""``dsh-replay check --shard K/N``: N jobs together check every case exactly once."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from dsh_replay.cli.check_shard import _key

from .conftest import run


def _many(project: Path, copies: int) -> list[str]:
    """``copies`` copies of the recorded cases (2 cassettes each) and a golden without its cassette."""
    source = project / "cassettes" / "my-provider"
    for n in range(copies):
        shutil.copytree(source, project / "cassettes" / f"copy-{n:02d}")
    alone = project / "cassettes" / "lone"
    alone.mkdir()
    shutil.copy(source / "greeting.chunks.jsonl", alone / "only-golden.chunks.jsonl")
    return _cases(run("check", "--json", "cassettes"))


def _cases(result: object) -> list[str]:
    assert result.code == 0, result.out + result.err  # type: ignore[attr-defined]
    return [case["path"] for case in json.loads(result.out)["cases"]]  # type: ignore[attr-defined]


@pytest.mark.parametrize("total", [1, 3, 4])
def test_the_shards_together_check_every_case_once(project: Path, total: int) -> None:
    everything = _many(project, 6)  # 6 x 2 cassettes + their goldens, and a golden alone: 15 cases
    assert len(everything) == 15
    shards = [_cases(run("check", "--json", "--shard", f"{index}/{total}", "cassettes"))
              for index in range(1, total + 1)]
    together = [case for shard in shards for case in shard]
    assert sorted(together) == sorted(everything)  # all of them, none twice
    sizes = [len(shard) for shard in shards]
    assert max(sizes) - min(sizes) <= 1
    for shard in shards:  # each in the order of the whole run
        assert shard == [case for case in everything if case in shard]


def test_the_summary_line_names_the_shard(project: Path) -> None:
    _many(project, 6)
    result = run("check", "--shard", "2/4", "cassettes")
    assert result.code == 0, result.out
    summary = result.out.splitlines()[-1]
    assert re.fullmatch(r"shard 2/4: 4 of 15 cases, \d+ chunks: \d passed, 0 failed.*", summary), summary
    data = json.loads(run("check", "--json", "--shard", "2/4", "cassettes").out)
    assert data["shard"] == {"index": 2, "total": 4, "cases": 4, "all_cases": 15}


def test_the_split_is_by_path_under_the_argument_wherever_the_checkout_is(project: Path, tmp_path: Path) -> None:
    _many(project, 3)
    elsewhere = tmp_path / "another" / "checkout"
    shutil.copytree(project / "cassettes", elsewhere)

    def names(*argv: str) -> list[str]:
        cases = _cases(run("check", "--json", "--shard", "2/3", *argv))
        return [Path(case).as_posix().split("/", len(Path(argv[0]).parts))[-1] for case in cases]

    here = names("cassettes")
    assert here
    assert names("./cassettes/") == here
    assert names(str(elsewhere)) == here


@pytest.mark.parametrize(("case", "argument", "key"), [
    ("cassettes/openai/text.yaml", "cassettes", "openai/text.yaml"),
    ("cassettes/openai/text.yaml", "./cassettes/", "openai/text.yaml"),
    ("/ci/work/repo/cassettes/openai/text.yaml", "/ci/work/repo/cassettes", "openai/text.yaml"),
    ("cassettes/openai/text.yaml", "cassettes/openai/text.yaml", "text.yaml"),  # a file named: its name
])
def test_a_case_is_known_by_its_path_under_its_argument(case: str, argument: str, key: str) -> None:
    assert _key(Path(case), ["elsewhere", argument]) == key


def test_more_shards_than_cases_is_an_empty_shard_that_passes(project: Path) -> None:
    result = run("check", "--shard", "4/4", "cassettes")  # 2 cassettes
    assert result.code == 0, result.out
    assert result.out.splitlines()[-1] == "shard 4/4: 0 of 2 cases, 0 chunks: 0 passed, 0 failed"


def test_a_shard_of_goldens_only_passes_when_other_shards_replay(project: Path) -> None:
    alone = project / "cassettes" / "lone"
    alone.mkdir()
    shutil.copy(project / "cassettes" / "my-provider" / "greeting.chunks.jsonl", alone / "a.chunks.jsonl")
    # sorted: lone/a.chunks.jsonl, my-provider/greeting.yaml, my-provider/umlauts.yaml
    result = run("check", "--shard", "1/3", "cassettes")
    assert result.code == 0, result.out
    assert "shard 1/3: 1 of 3 cases" in result.out
    assert "1 golden(s) only" in result.out


def test_a_failing_case_fails_only_its_shard(project: Path) -> None:
    golden = project / "cassettes" / "my-provider" / "umlauts.chunks.jsonl"
    golden.write_bytes(golden.read_bytes().replace(" aus K\u00f6ln".encode(), b" aus Bonn"))
    codes = {index: run("check", "-q", "--shard", f"{index}/2", "cassettes").code for index in (1, 2)}
    assert codes == {1: 0, 2: 1}  # greeting.yaml, umlauts.yaml


@pytest.mark.parametrize(("value", "message"), [
    ("0/4", "--shard: there is no shard 0/4; valid: 1/4, 2/4, 3/4, 4/4"),
    ("5/4", "--shard: there is no shard 5/4; valid: 1/4, 2/4, 3/4, 4/4"),
    ("x/y", "--shard: expected K/N, the K-th of N shards with 1 <= K <= N (e.g. 2/4); got 'x/y'"),
])
def test_a_bad_shard_is_a_one_line_usage_error(project: Path, value: str, message: str) -> None:
    result = run("check", "--shard", value, "cassettes")
    assert result.code == 2
    assert result.err == f"dsh-replay: error: {message}\n"
    assert result.out == ""
