"""``--replay-speed`` and its ini twin ``dsh_replay_speed``: 0 replays instantly, 1 at the recorded pace."""

from __future__ import annotations

import pytest
import yaml

from .helpers import IMPORTS, ini, ndjson, provider, streaming

TIMED = IMPORTS + '''
import os
import time

@pytest.mark.asyncio
async def test_echo(dsh_replay):
    started = time.perf_counter()
    await dsh_replay.stream(make_adapter(), make_options())
    with open(os.environ["ELAPSED_OUT"], "w") as fh:
        fh.write(str(time.perf_counter() - started))
'''


@pytest.fixture
def recorded_ms(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> float:
    """Record four fragments 100 ms apart; the recorded duration in ms (arrival of the last fragment)."""
    project.makepyfile(test_speed=TIMED)
    monkeypatch.setenv("ELAPSED_OUT", str(project.path / "elapsed.txt"))
    with provider(monkeypatch, streaming(ndjson("a", "b", "c"), delay=0.1)):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    data = yaml.safe_load((project.path / "cassettes" / "test_speed" / "test_echo.yaml").read_text())
    fragments = data["interactions"][0]["response"]["dsh_replay"]["fragments"]
    assert len(fragments) == 4
    duration = float(fragments[-1][0])
    assert duration >= 250  # three pauses of 100 ms
    return duration


def elapsed_ms(pytester: pytest.Pytester, *args: str) -> float:
    pytester.runpytest(*args).assert_outcomes(passed=1)
    return float((pytester.path / "elapsed.txt").read_text()) * 1000


def test_speed_1_replays_at_the_recorded_pace_and_0_instantly(project: pytest.Pytester, recorded_ms: float) -> None:
    assert elapsed_ms(project, "--replay-speed=1") >= 0.7 * recorded_ms
    assert elapsed_ms(project, "--replay-speed=0") < 0.5 * recorded_ms
    assert elapsed_ms(project) < 0.5 * recorded_ms  # 0 is the default


def test_speed_0_5_replays_twice_as_fast(project: pytest.Pytester, recorded_ms: float) -> None:
    # the factor scales the recorded pauses: 0.5 replays twice as fast, 2 twice as slow
    assert 0.35 * recorded_ms <= elapsed_ms(project, "--replay-speed=0.5") < 0.85 * recorded_ms


def test_the_ini_twin_is_used_and_the_command_line_wins(project: pytest.Pytester, recorded_ms: float) -> None:
    project.makeini(ini("dsh_replay_speed = 1"))
    assert elapsed_ms(project) >= 0.7 * recorded_ms
    assert elapsed_ms(project, "--replay-speed=0") < 0.5 * recorded_ms


@pytest.mark.parametrize("bad", ["-1", "fast", "nan", "inf", "", "1e308", "100.5"])
def test_a_bad_value_is_a_usage_error(project: pytest.Pytester, bad: str) -> None:
    result = project.runpytest(f"--replay-speed={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*dsh-replay: --replay-speed: replay speed must be a number from 0 to 100 (0 replays instantly,"
            f" 1 at the recorded pace, 0.5 twice as fast); got {bad!r}"
        ]
    )


def test_a_bad_ini_value_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makeini(ini("dsh_replay_speed = slow"))
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*dsh-replay: ini dsh_replay_speed: replay speed must be a number from 0 to 100*got 'slow'"])
