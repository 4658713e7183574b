"""How a recorded body is served again: piece plans, early stops and pacing (sans-I/O)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import sniffio
import trio
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, Fault, Fragmentation
from dsh_replay.cassette.pacing import CLOCK, Clock, Pacing, Stop, clip, piece_plan, stop_for
from dsh_replay.cassette.store import Interaction, RecordedError

BODY = b"data: one\n\ndata: two\n\ndata: three\n\n"
# Three recorded fragments: 11, 11 and 13 bytes, arriving at 0, 40 and 100 ms.
FRAGMENTS = [(0.0, 11), (40.0, 11), (100.0, 13)]


def _interaction(
    *, fragments: list[tuple[float, int]] | None = FRAGMENTS, complete: bool = True, error: RecordedError | None = None
) -> Interaction:
    return Interaction(
        request=VcrRequest("POST", "http://127.0.0.1/v1/chat", b"{}", {}),
        status=200,
        reason="OK",
        headers=[],
        body=BODY,
        fragments=fragments,
        complete=complete,
        error=error,
    )


class FakeClock(Clock):
    """A clock whose time moves only when told (the steps do not sleep themselves)."""

    def __init__(self) -> None:
        self.now_value = 1000.0

    def now(self) -> float:
        return self.now_value


def _pieces(plan: list[tuple[int, float]]) -> list[bytes]:
    starts = [0] + [end for end, _ in plan[:-1]]
    return [BODY[start:end] for start, (end, _) in zip(starts, plan, strict=True)]


# -- piece_plan ------------------------------------------------------------------


def test_recorded_fragmentation_serves_the_recorded_fragments_at_their_times() -> None:
    plan = piece_plan(_interaction(), Fragmentation.parse("recorded"))
    assert plan == [(11, 0.0), (22, 40.0), (35, 100.0)]
    assert _pieces(plan) == [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]


def test_single_serves_the_body_at_the_time_of_its_last_byte() -> None:
    assert piece_plan(_interaction(), Fragmentation.parse("single")) == [(35, 100.0)]


def test_bytes_cuts_every_byte_and_times_it_by_the_fragment_that_held_it() -> None:
    plan = piece_plan(_interaction(), Fragmentation.parse("bytes"))
    assert [end for end, _ in plan] == list(range(1, len(BODY) + 1))
    assert plan[10] == (11, 0.0)  # the last byte of the first fragment
    assert plan[11] == (12, 40.0)  # the first byte of the second
    assert plan[-1] == (35, 100.0)


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_random_cuts_cover_the_body_and_repeat_for_a_seed(seed: int) -> None:
    fragmentation = Fragmentation.parse(f"random:{seed}")
    plan = piece_plan(_interaction(), fragmentation)
    ends = [end for end, _ in plan]
    assert ends == sorted(set(ends)) and ends[-1] == len(BODY)
    assert b"".join(_pieces(plan)) == BODY
    assert piece_plan(_interaction(), fragmentation) == plan


def test_a_body_recorded_without_fragments_is_one_piece_at_time_zero() -> None:
    assert piece_plan(_interaction(fragments=None), Fragmentation.parse("recorded")) == [(35, 0.0)]


@pytest.mark.parametrize("value", ["chunks", "random:x", "random:", "single:3", "recorded:", ""])
def test_an_unknown_fragmentation_is_refused_with_the_valid_ones(value: str) -> None:
    with pytest.raises(CassetteError, match="valid: recorded, single, bytes, random"):
        Fragmentation.parse(value)


# -- stop_for and clip -----------------------------------------------------------


def test_a_complete_recording_does_not_stop_early() -> None:
    assert stop_for(_interaction(), None) is None


def test_an_injected_fault_wins_over_a_recorded_error_and_is_clamped_to_the_body() -> None:
    recorded = RecordedError("ReadError", "reset", 5, 12.0)
    stop = stop_for(_interaction(error=recorded), Fault("reset", 1000))
    assert stop is not None
    assert (stop.at, stop.kind, stop.error) == (len(BODY), "raise", "ReadError")


@pytest.mark.parametrize(
    ("kind", "expected"), [("truncate", "truncate"), ("reset", "raise"), ("stall", "stall")]
)
def test_each_fault_kind_maps_to_its_stop(kind: str, expected: str) -> None:
    stop = stop_for(_interaction(), Fault(kind, 15))  # type: ignore[arg-type]
    assert stop is not None and (stop.at, stop.kind) == (15, expected)


@pytest.mark.parametrize(("error", "kind"), [("ReadTimeout", "stall"), ("RemoteProtocolError", "raise")])
def test_a_recorded_error_stops_where_and_when_it_struck(error: str, kind: str) -> None:
    stop = stop_for(_interaction(error=RecordedError(error, "boom", 17, 55.0)), None)
    assert stop == Stop(17, kind, error, "boom", 55.0)  # type: ignore[arg-type]


def test_an_abandoned_recording_stops_after_its_last_byte() -> None:
    stop = stop_for(_interaction(complete=False), None)
    assert stop is not None and (stop.at, stop.kind) == (len(BODY), "abandoned")


def test_clip_cuts_the_piece_that_holds_the_stop_short() -> None:
    plan = [(11, 0.0), (22, 40.0), (35, 100.0)]
    assert clip(plan, 15) == [(11, 0.0), (15, 40.0)]
    assert clip(plan, 22) == [(11, 0.0), (22, 40.0)]
    assert clip(plan, 0) == []
    assert clip(plan, 99) == plan


# -- Pacing ------------------------------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _pacing(
    clock: Clock,
    *,
    speed: float,
    stop: Stop | None = None,
    read_timeout: float | None = None,
    injected: bool = False,
) -> Pacing:
    plan = piece_plan(_interaction(), Fragmentation.parse("recorded"))
    if stop is not None:
        plan = clip(plan, stop.at)
    return Pacing(BODY, plan, speed, stop, read_timeout, injected, clock)


def _drive(steps: Iterator[tuple[float, bytes | None]], clock: FakeClock, spend: float = 0.0) -> list[tuple[float, bytes | None]]:
    """Consume the steps as a stream does: wait, take the piece, spend time on it."""
    out = []
    for wait, piece in steps:
        out.append((round(wait, 6), piece))
        clock.now_value += wait + spend
    return out


def test_speed_zero_serves_every_piece_without_waiting(clock: FakeClock) -> None:
    steps = _drive(_pacing(clock, speed=0).steps(), clock)
    assert [wait for wait, _ in steps] == [0.0, 0.0, 0.0]
    assert b"".join(piece for _, piece in steps if piece) == BODY


def test_speed_one_waits_for_each_recorded_arrival(clock: FakeClock) -> None:
    assert [wait for wait, _ in _drive(_pacing(clock, speed=1).steps(), clock)] == [0.0, 0.04, 0.06]


def test_speed_half_waits_half_as_long(clock: FakeClock) -> None:
    assert [wait for wait, _ in _drive(_pacing(clock, speed=0.5).steps(), clock)] == [0.0, 0.02, 0.03]


def test_time_the_consumer_spends_counts_against_the_next_gap(clock: FakeClock) -> None:
    # 30 ms of work after each piece leaves 10 ms of the 40 ms gap, then 30 ms of the 60 ms one.
    waits = [wait for wait, _ in _drive(_pacing(clock, speed=1).steps(), clock, spend=0.03)]
    assert waits == [0.0, 0.01, 0.03]


def test_a_truncated_body_just_ends(clock: FakeClock) -> None:
    steps = _drive(_pacing(clock, speed=1, stop=Stop(15, "truncate")).steps(), clock)
    assert [piece for _, piece in steps] == [b"data: one\n\n", b"data"]


def test_a_recorded_failure_strikes_at_its_recorded_time(clock: FakeClock) -> None:
    stop = Stop(15, "raise", "ReadError", "reset", 70.0)
    steps = _drive(_pacing(clock, speed=1, stop=stop).steps(), clock)
    assert steps[-1] == (0.03, None)  # the last piece came at 40 ms; the failure at 70 ms


def test_a_recorded_failure_strikes_at_once_at_speed_zero(clock: FakeClock) -> None:
    stop = Stop(15, "raise", "ReadError", "reset", 70.0)
    assert _drive(_pacing(clock, speed=0, stop=stop).steps(), clock)[-1] == (0.0, None)


def test_an_injected_stall_lasts_the_clients_read_timeout(clock: FakeClock) -> None:
    stop = Stop(15, "stall", "ReadTimeout", "stalled")
    steps = _drive(_pacing(clock, speed=0, stop=stop, read_timeout=2.5, injected=True).steps(), clock)
    assert steps[-1] == (2.5, None)


def test_a_recorded_stall_replayed_at_speed_zero_fails_at_once(clock: FakeClock) -> None:
    stop = Stop(15, "stall", "ReadTimeout", "stalled", 5000.0)
    assert _drive(_pacing(clock, speed=0, stop=stop, read_timeout=2.5).steps(), clock)[-1] == (0.0, None)


def test_a_stall_with_no_read_timeout_fails_at_once(clock: FakeClock) -> None:
    stop = Stop(15, "stall", "ReadTimeout", "stalled")
    assert _drive(_pacing(clock, speed=1, stop=stop, injected=True).steps(), clock)[-1] == (0.0, None)


def test_pacing_reads_the_module_clock_as_it_is_when_the_response_is_made(
    monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    plan = piece_plan(_interaction(), Fragmentation.parse("recorded"))
    assert Pacing(BODY, plan, 1.0, None, None, False).clock is CLOCK
    monkeypatch.setattr("dsh_replay.cassette.pacing.CLOCK", clock)
    assert Pacing(BODY, plan, 1.0, None, None, False).clock is clock


# -- Clock: the real sleeps --------------------------------------------------------


def test_the_clock_sleeps_a_sync_client_with_time_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setattr(time, "sleep", calls.append)
    Clock().sleep(0.25)
    assert calls == [0.25]


async def _timed_async_sleep(seconds: float) -> tuple[str, float]:
    """The running async library and how long ``Clock().async_sleep`` took in it."""
    started = time.monotonic()
    await Clock().async_sleep(seconds)
    return sniffio.current_async_library(), time.monotonic() - started


@pytest.mark.parametrize("library", ["asyncio", "trio"])
def test_the_clock_sleeps_through_the_running_async_library(library: str) -> None:
    if library == "trio":
        ran_in, elapsed = trio.run(_timed_async_sleep, 0.05)
    else:
        ran_in, elapsed = asyncio.run(_timed_async_sleep(0.05))
    assert ran_in == library
    assert elapsed >= 0.045  # it did wait (timers never fire early; 5 ms for clock granularity)
    assert elapsed < 5.0  # hang guard only
