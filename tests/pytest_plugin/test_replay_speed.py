"""``--replay-speed`` and its ini twin ``dsh_replay_speed``: 0 replays instantly, 1 at the recorded pace."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import IMPORTS, echo_test, ini, ndjson, provider, streaming
from .paced import recorded_gaps, requested_sleeps, use_recording_clock

TRIO_TEST = """
import trio


def test_echo(dsh_replay):
    # a sync test driving the fixture under trio: a paced replay must sleep in trio, not asyncio
    assert trio.run(dsh_replay.stream, make_adapter(), make_options())
"""


@pytest.fixture
def cassette(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Record four fragments 100 ms apart; the inner runs then note the sleeps their replay asks for."""
    project.makepyfile(test_speed=IMPORTS + echo_test())
    use_recording_clock(project, monkeypatch)
    with provider(monkeypatch, streaming(ndjson("a", "b", "c"), delay=0.1)):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    path = project.path / "cassettes" / "test_speed" / "test_echo.yaml"
    # The server paused 3 x 100 ms. The recorder's clock starts when the headers are in,
    # which a loaded machine delays, so only a part of that is sure to be on record.
    assert sum(recorded_gaps(path)) >= 0.1
    return path


def test_speed_1_replays_at_the_recorded_pace_and_0_instantly(project: pytest.Pytester, cassette: Path) -> None:
    sleeps = requested_sleeps(project, "--replay-speed=1")
    assert sleeps == pytest.approx(recorded_gaps(cassette))
    assert requested_sleeps(project, "--replay-speed=0") == []
    assert requested_sleeps(project) == []  # 0 is the default


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_the_factor_scales_every_recorded_pause(project: pytest.Pytester, cassette: Path, factor: float) -> None:
    # 0.5 replays twice as fast, 2 twice as slow
    sleeps = requested_sleeps(project, f"--replay-speed={factor}")
    assert sleeps == pytest.approx(recorded_gaps(cassette, factor))
    assert sum(sleeps) == pytest.approx(factor * sum(recorded_gaps(cassette)))


def test_the_ini_twin_is_used_and_the_command_line_wins(project: pytest.Pytester, cassette: Path) -> None:
    project.makeini(ini("dsh_replay_speed = 1"))
    assert requested_sleeps(project) == pytest.approx(recorded_gaps(cassette))
    assert requested_sleeps(project, "--replay-speed=0") == []


def test_a_paced_replay_under_trio_sleeps_in_trio(project: pytest.Pytester, cassette: Path) -> None:
    project.makepyfile(test_speed=IMPORTS + TRIO_TEST)
    sleeps = requested_sleeps(project, "--replay-speed=1", library="trio")
    assert sleeps == pytest.approx(recorded_gaps(cassette))


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
