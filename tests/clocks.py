"""A fake pacing clock for tests: time stands still until a replay asks to sleep.

Install it with ``monkeypatch.setattr("dsh_replay.cassette.pacing.CLOCK", RecordingClock())``
and assert on :attr:`RecordingClock.waits`, the sleeps the replay asked for,
instead of measuring wall time (which a loaded machine stretches at will).
"""

from __future__ import annotations

import sniffio

from dsh_replay.cassette.pacing import Clock


class RecordingClock(Clock):
    """Notes every sleep with the library it was asked in: ``"sync"``, ``"asyncio"``, ``"trio"``."""

    def __init__(self) -> None:
        self.time = 0.0
        self.sleeps: list[tuple[str, float]] = []

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(("sync", seconds))
        self.time += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleeps.append((sniffio.current_async_library(), seconds))
        self.time += seconds
        await Clock().async_sleep(0)  # still a real checkpoint of the running library

    @property
    def waits(self) -> list[float]:
        """The seconds of every sleep asked for, in order."""
        return [seconds for _, seconds in self.sleeps]

    @property
    def libraries(self) -> set[str]:
        """Where the sleeps were asked: ``"sync"`` (time.sleep) or the async library's name."""
        return {library for library, _ in self.sleeps}
