"""How a recorded body is served again: cut into pieces, paced, stopped.

The plans are sans-I/O: nothing here touches a socket or a client library, and
only :class:`Clock` meets the time or an event loop. The interception layer
(``_intercept``) turns these plans into httpx responses:

- :func:`piece_plan` cuts the body as :class:`Fragmentation` asks and gives each
  piece the recorded arrival time of its last byte;
- :func:`stop_for` says where the body ends early (a recorded failure, an
  injected :class:`Fault`, an abandoned recording) and :func:`clip` cuts the
  plan there;
- :class:`Pacing` turns the plan and a speed factor into ``(wait, piece)`` steps,
  which the sync and async streams both drive, sleeping through its
  :class:`Clock`: ``time.sleep`` for a sync client, the running async
  library's own sleep (asyncio or trio) for an async one. Tests put a fake
  clock in :data:`CLOCK` and assert on the sleeps asked for, not on wall time.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from ..errors import CassetteError
from ..protocol.fields import is_int
from .store import Interaction

__all__ = [
    "CLOCK",
    "MAX_SPEED",
    "Clock",
    "Fault",
    "Fragmentation",
    "Pacing",
    "Stop",
    "clip",
    "parse_speed",
    "piece_plan",
    "stop_for",
]


@dataclass(frozen=True, slots=True)
class Fragmentation:
    """How a replayed body is cut: ``recorded``, ``single``, ``bytes`` or ``random[:SEED]``."""

    kind: Literal["recorded", "single", "bytes", "random"] = "recorded"
    seed: int = 0

    @classmethod
    def parse(cls, value: str | Fragmentation) -> Fragmentation:
        if isinstance(value, Fragmentation):
            return value
        name, colon, seed = str(value).partition(":")
        if name in ("recorded", "single", "bytes", "random") and not colon:
            return cls(name)  # type: ignore[arg-type]
        if name == "random" and colon:
            try:
                return cls("random", int(seed))
            except ValueError:
                pass
        raise CassetteError(
            f"unknown fragmentation {value!r}; valid: recorded, single, bytes, random, random:SEED (an integer)"
        )

    def __str__(self) -> str:
        return f"random:{self.seed}" if self.kind == "random" else self.kind


# Replay speed multiplies recorded gaps: 1 is the recorded pace, 0.5 twice as
# fast, 0 no waiting at all. Beyond a hundredfold slow motion a typo is likelier
# than a wish, and a factor like 1e308 would sleep for ever.
MAX_SPEED = 100.0


def parse_speed(value: object) -> float:
    """``value`` (a number, or its text) as a replay speed factor; :class:`CassetteError` if it is none."""
    speed = value
    if isinstance(value, str):
        try:
            speed = float(value)
        except ValueError:
            speed = math.nan
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0 <= speed <= MAX_SPEED:
        raise CassetteError(
            f"replay speed must be a number from 0 to {MAX_SPEED:g} (0 replays instantly, 1 at the recorded "
            f"pace, 0.5 twice as fast); got {value!r}"
        )
    return float(speed)


@dataclass(frozen=True, slots=True)
class Fault:
    """A failure injected into replayed responses after ``at`` bytes of the body.

    ``truncate`` ends the body cleanly, ``reset`` raises the library's
    ``ReadError``, ``stall`` waits for the client's read timeout and raises
    ``ReadTimeout``. ``interaction`` limits it to one interaction (0-based).
    """

    kind: Literal["truncate", "reset", "stall"]
    at: int
    interaction: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("truncate", "reset", "stall"):
            raise CassetteError(f"unknown fault {self.kind!r}; valid: truncate, reset, stall")
        if not is_int(self.at, 0):
            raise CassetteError(f"a fault's byte offset (at) must be an integer >= 0, got {self.at!r}")
        if self.interaction is not None and not is_int(self.interaction, 0):
            raise CassetteError(
                f"a fault's interaction must be an interaction number (from 0) or None, got {self.interaction!r}"
            )


def piece_plan(interaction: Interaction, fragmentation: Fragmentation) -> list[tuple[int, float]]:
    """(end offset, recorded arrival ms) of each piece to serve, for the whole body."""
    size = len(interaction.body)
    recorded = interaction.fragments or ([(0.0, size)] if size else [])
    # arrival time of each recorded fragment's last byte, to time re-cut pieces
    ends, at = [], 0
    for ms, length in recorded:
        at += length
        ends.append((at, ms))
    if fragmentation.kind == "recorded":
        return ends
    if fragmentation.kind == "single":
        cuts = [size] if size else []
    elif fragmentation.kind == "bytes":
        cuts = list(range(1, size + 1))
    else:
        rng = random.Random(fragmentation.seed)
        cuts, at = [], 0
        while at < size:
            at = min(size, at + rng.choice((1, 1, 2, 3, 5, 8, 13, 64, 500)))
            cuts.append(at)
    plan, cursor = [], 0
    for cut in cuts:
        while cursor < len(ends) - 1 and ends[cursor][0] < cut:
            cursor += 1
        plan.append((cut, ends[cursor][1] if ends else 0.0))
    return plan


@dataclass(frozen=True, slots=True)
class Stop:
    """Where a replayed body stops early, and how."""

    at: int
    kind: Literal["truncate", "raise", "stall", "abandoned"]
    error: str = ""
    message: str = ""
    at_ms: float = 0.0


def stop_for(interaction: Interaction, fault: Fault | None) -> Stop | None:
    """Where ``interaction``'s replay ends early: an injected fault wins over a
    recorded failure; a recording the caller abandoned stops at its last byte."""
    if fault is not None:
        at = min(fault.at, len(interaction.body))
        if fault.kind == "reset":
            return Stop(at, "raise", "ReadError", f"connection reset by peer after {at} bytes (injected fault)")
        if fault.kind == "stall":
            return Stop(at, "stall", "ReadTimeout", f"no bytes after {at} bytes: read timed out (injected fault)")
        return Stop(at, "truncate")
    if interaction.error is not None:
        e = interaction.error
        if e.kind in ("ReadTimeout", "TimeoutException"):
            return Stop(e.offset, "stall", e.kind, e.message, e.at_ms)
        return Stop(e.offset, "raise", e.kind, e.message, e.at_ms)
    if not interaction.complete:
        return Stop(len(interaction.body), "abandoned")
    return None


def clip(plan: list[tuple[int, float]], at: int) -> list[tuple[int, float]]:
    """The pieces of ``plan`` up to byte ``at``, the last one cut short."""
    out: list[tuple[int, float]] = []
    for end, ms in plan:
        if end >= at:
            if at > (out[-1][0] if out else 0):
                out.append((at, ms))
            return out
        out.append((end, ms))
    return out


class Clock:
    """The time a paced replay reads and the sleeps it takes."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        """Wait in a sync client's thread."""
        time.sleep(seconds)

    async def async_sleep(self, seconds: float) -> None:
        """Wait in whichever async library runs the client: anyio asks sniffio which one.

        ``asyncio.sleep`` would fail under trio ("no running event loop").
        """
        # imported on first use: a replay at speed 0 never needs it (~20 ms at start-up)
        import anyio

        await anyio.sleep(seconds)


#: The clock every paced replay uses; a test may replace it (``monkeypatch.setattr``).
CLOCK = Clock()


def _current_clock() -> Clock:
    return CLOCK


@dataclass(frozen=True, slots=True)
class Pacing:
    """When each piece of a replayed body is due, and how the body ends.

    ``clock`` is what the streams sleep through; it defaults to :data:`CLOCK`
    as it is when the response is made.
    """

    body: bytes
    plan: list[tuple[int, float]]
    speed: float
    stop: Stop | None
    read_timeout: float | None
    injected: bool
    clock: Clock = field(default_factory=_current_clock)

    def steps(self) -> Iterator[tuple[float, bytes | None]]:
        """``(seconds to wait, piece)`` pairs; a ``None`` piece means: now fail as ``stop`` says.

        The clock is read when the next step is asked for, so time the consumer
        spends between pieces counts against the recorded gaps.
        """
        now = self.clock.now
        started, start = now(), 0
        for end, ms in self.plan:
            delay = ms * self.speed / 1000.0 - (now() - started) if self.speed > 0 else 0.0
            yield max(delay, 0.0), self.body[start:end]
            start = end
        if self.stop is not None and self.stop.kind != "truncate":
            yield self._final_wait(self.stop, now() - started), None

    def _final_wait(self, stop: Stop, elapsed: float) -> float:
        """Seconds to wait after the last piece before the stream fails."""
        if stop.kind == "stall":
            # a stalled stream ends the way the client's read timeout would end it
            if self.read_timeout is not None and (self.injected or self.speed > 0):
                return self.read_timeout
            return 0.0
        if not self.injected and self.speed > 0:
            # a recorded failure strikes when it struck, at the replay's pace
            return max(0.0, stop.at_ms * self.speed / 1000.0 - elapsed)
        return 0.0
