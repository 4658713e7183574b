"""Paced replays through real httpx clients: sync, under asyncio and under trio.

A paced replay sleeps through ``dsh_replay.cassette.pacing.CLOCK``. Here that clock is
a fake whose time moves only when the replay asks it to sleep, so the tests
assert on the sleeps asked for (and in which async library), never on wall
time: the same numbers come out on an idle laptop and on a loaded CI runner.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from vcr.request import Request as VcrRequest

from dsh_replay import Fault, use_cassette
from dsh_replay.cassette.store import Cassette, Interaction, RecordedError
from tests.clocks import RecordingClock

URL = "http://127.0.0.1:9/v1/chat/completions"  # nothing listens: a replay must not need it
PIECES = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n", b"data: [DONE]\n\n"]
BODY = b"".join(PIECES)
TIMES = [0.0, 100.0, 250.0, 300.0]  # arrival of each piece, ms since the response started
GAPS = [0.1, 0.15, 0.05]  # seconds between arrivals (none before the first, at 0 ms)
RUNNERS = ["sync", "asyncio", "trio"]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> RecordingClock:
    fake = RecordingClock()
    monkeypatch.setattr("dsh_replay.cassette.pacing.CLOCK", fake)
    return fake


def _save(path: Path, *, error: RecordedError | None = None) -> Path:
    interaction = Interaction(
        request=VcrRequest("GET", URL, b"", {}),
        status=200,
        reason="OK",
        headers=[("content-type", "text/event-stream")],
        body=BODY,
        fragments=[(ms, len(piece)) for ms, piece in zip(TIMES, PIECES, strict=True)],
        error=error,
    )
    Cassette(path=path, interactions=[interaction]).save()
    return path


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    return _save(tmp_path / "paced.yaml")


Outcome = tuple[list[bytes], BaseException | None]


def _sync_replay(path: Path, timeout: float, **kwargs: Any) -> Outcome:
    pieces: list[bytes] = []
    try:
        with (
            use_cassette(path, **kwargs),
            httpx.Client(timeout=timeout) as client,
            client.stream("GET", URL) as response,
        ):
            pieces.extend(response.iter_raw())
    except httpx.TransportError as exc:
        return pieces, exc
    return pieces, None


async def _async_replay(path: Path, timeout: float, **kwargs: Any) -> Outcome:
    pieces: list[bytes] = []
    try:
        async with (
            use_cassette(path, **kwargs),
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("GET", URL) as response,
        ):
            async for piece in response.aiter_raw():
                pieces.append(piece)
    except httpx.TransportError as exc:
        return pieces, exc
    return pieces, None


def _run(runner: str, main: Callable[[], Coroutine[Any, Any, Outcome]]) -> Outcome:
    if runner == "trio":
        return trio.run(main)
    return asyncio.run(main())


def replay(runner: str, path: Path, *, timeout: float = 30.0, **kwargs: Any) -> Outcome:
    """The pieces a client of ``runner`` ("sync", "asyncio", "trio") read, and what it raised."""
    if runner == "sync":
        return _sync_replay(path, timeout, **kwargs)
    return _run(runner, lambda: _async_replay(path, timeout, **kwargs))


@pytest.mark.parametrize("runner", RUNNERS)
def test_speed_zero_asks_for_no_sleep(runner: str, cassette: Path, clock: RecordingClock) -> None:
    assert replay(runner, cassette, speed=0) == (PIECES, None)
    assert clock.sleeps == []


@pytest.mark.parametrize("speed", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("runner", RUNNERS)
def test_the_sleeps_are_the_recorded_gaps_times_the_speed(
    runner: str, speed: float, cassette: Path, clock: RecordingClock
) -> None:
    assert replay(runner, cassette, speed=speed) == (PIECES, None)
    assert clock.waits == pytest.approx([gap * speed for gap in GAPS])
    assert sum(clock.waits) == pytest.approx(TIMES[-1] / 1000.0 * speed)
    # an async client sleeps in its own library, a sync one with time.sleep
    assert clock.libraries == {runner}


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_recut_body_still_takes_the_recorded_time(runner: str, cassette: Path, clock: RecordingClock) -> None:
    pieces, error = replay(runner, cassette, speed=1, fragmentation="bytes")
    assert (b"".join(pieces), error) == (BODY, None)
    assert len(pieces) == len(BODY)
    assert sum(clock.waits) == pytest.approx(TIMES[-1] / 1000.0)


@pytest.mark.parametrize("runner", RUNNERS)
def test_an_injected_stall_sleeps_for_the_clients_read_timeout(
    runner: str, cassette: Path, clock: RecordingClock
) -> None:
    pieces, error = replay(runner, cassette, timeout=2.5, fault=Fault("stall", at=20))
    assert b"".join(pieces) == BODY[:20]
    assert type(error) is httpx.ReadTimeout
    assert clock.waits == [2.5]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_recorded_failure_strikes_at_its_recorded_time(
    runner: str, tmp_path: Path, clock: RecordingClock
) -> None:
    path = _save(tmp_path / "reset.yaml", error=RecordedError("ReadError", "reset by peer", 22, 200.0))
    pieces, error = replay(runner, path, speed=1)
    assert pieces == PIECES[:2]
    assert type(error) is httpx.ReadError
    assert clock.waits == pytest.approx([0.1, 0.1])  # the second piece at 100 ms, the reset at 200 ms


def test_a_sync_client_inside_a_trio_program_sleeps_with_time_sleep(
    cassette: Path, clock: RecordingClock
) -> None:
    async def main() -> Outcome:
        return _sync_replay(cassette, 30.0, speed=1)

    assert trio.run(main) == (PIECES, None)
    assert clock.waits == pytest.approx([gap for gap in GAPS])
    assert clock.libraries == {"sync"}


@pytest.mark.parametrize("runner", ["asyncio", "trio"])
def test_a_real_paced_replay_gives_the_recorded_pieces(runner: str, cassette: Path) -> None:
    # the real clock, at a speed small enough to cost ~15 ms
    started = time.monotonic()
    assert replay(runner, cassette, speed=0.05) == (PIECES, None)
    assert time.monotonic() - started >= 0.9 * 0.05 * TIMES[-1] / 1000.0  # it did pace (timers never fire early)
