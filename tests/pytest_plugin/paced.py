"""Timing the inner runs of the plugin tests without a stopwatch.

:data:`CLOCK_CONFTEST` is a ``conftest.py`` for the inner project: it replaces
the pacing clock with one that stands still until the replay asks to sleep,
and after each test writes the sleeps asked for to ``$SLEEPS_OUT`` (JSON, a list
of ``[library, seconds]``). The outer test compares them with the fragment
times in the cassette, which a loaded machine cannot stretch.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml

CLOCK_CONFTEST = '''
import json
import os

import pytest
import sniffio

from dsh_replay.cassette import pacing as _pacing


class RecordingClock(_pacing.Clock):
    def __init__(self):
        self.time = 0.0
        self.sleeps = []

    def now(self):
        return self.time

    def sleep(self, seconds):
        self.sleeps.append(["sync", seconds])
        self.time += seconds

    async def async_sleep(self, seconds):
        self.sleeps.append([sniffio.current_async_library(), seconds])
        self.time += seconds
        await _pacing.Clock().async_sleep(0)


@pytest.fixture(autouse=True)
def _recording_clock(monkeypatch):
    clock = RecordingClock()
    monkeypatch.setattr(_pacing, "CLOCK", clock)
    yield
    with open(os.environ["SLEEPS_OUT"], "w") as fh:
        json.dump(clock.sleeps, fh)
'''


def use_recording_clock(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Install :data:`CLOCK_CONFTEST` in the inner project."""
    pytester.makeconftest(CLOCK_CONFTEST)
    monkeypatch.setenv("SLEEPS_OUT", str(pytester.path / "sleeps.json"))


def requested_sleeps(pytester: pytest.Pytester, *args: str, library: str = "asyncio") -> list[float]:
    """Run the inner tests (one must pass); the seconds of every sleep the replay asked for.

    Every sleep must have been asked in ``library``.
    """
    out = pytester.path / "sleeps.json"
    out.unlink(missing_ok=True)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    sleeps = json.loads(out.read_text())
    assert {lib for lib, _ in sleeps} <= {library}, sleeps
    return [seconds for _, seconds in sleeps]


def recorded_gaps(cassette: Path, speed: float = 1.0) -> list[float]:
    """The pauses (s) between the recorded fragments of the cassette's one response, times ``speed``.

    The first counts from the start of the response; a zero pause asks for no sleep.
    """
    data = yaml.safe_load(cassette.read_text())
    times = [0.0] + [float(ms) for ms, _ in data["interactions"][0]["response"]["dsh_replay"]["fragments"]]
    return [(b - a) / 1000.0 * speed for a, b in itertools.pairwise(times) if b > a]
