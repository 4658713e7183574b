"""A run removes the temp files a killed write left beside its tests' cassettes, and only those."""

from __future__ import annotations

import os
import time

import pytest

from .helpers import IMPORTS, echo_test, ndjson, provider, streaming, summary

XDIST = ("-p", "xdist", "-n", "2")


@pytest.mark.parametrize("xdist", [(), XDIST], ids=["one-process", "xdist"])
def test_stale_temp_files_of_ours_are_removed_and_nothing_else(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    project.makepyfile(test_t=IMPORTS + echo_test("test_a", "a"))
    with provider(monkeypatch, streaming(ndjson("A"), delay=0)):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    folder = project.path / "cassettes" / "test_t"
    stale = folder / ".dsh-replay-0123456789abcdef.tmp"
    live = folder / ".dsh-replay-fedcba9876543210.tmp"  # another run's write in progress
    others = [folder / ".dsh-replay-notours.tmp", folder / "notes.tmp"]
    for path in (stale, live, *others):
        path.write_bytes(b"x" * 1024)
    long_ago = time.time() - 3600
    for path in (stale, *others):
        os.utime(path, (long_ago, long_ago))
    future = time.time() + 3600
    os.utime(live, (future, future))

    result = project.runpytest(*xdist)
    result.assert_outcomes(passed=1)
    assert not stale.exists()
    assert live.exists() and all(path.exists() for path in others)
    assert "temp files of killed writes removed: 1" in summary(result)
