"""Validator speed: chunks/s over one stream of 1M chunk objects.

The stream is what a long agent turn produces (``_bodies.chunk_sequence``): text
blocks of 20-200 deltas, reasoning blocks, tool-call blocks whose JSON
arguments come in small fragments, then ``usage`` and ``finish``; it is valid,
so every rule runs in full (P6/P7 join and compare every block's text, P7j
parses every call's arguments) and no time goes to reporting violations.

- ``SequenceValidator.feed`` - incremental, one call per chunk, then
  ``finish``: how the fixture checks a live stream.
- ``check_chunk_sequence`` - batch, the whole list at once.

The chunks are built once, before timing; each mode runs five times,
interleaved, and the median is reported. Target: >= 1M chunks/s.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bodies import chunk_sequence

RUNS = 5


def incremental(chunks: list[object]) -> int:
    from dsh_replay import SequenceValidator

    validator = SequenceValidator()
    feed = validator.feed
    for chunk in chunks:
        feed(chunk)  # type: ignore[arg-type]
    validator.finish()
    return len(validator.violations)


def batch(chunks: list[object]) -> int:
    from dsh_replay import check_chunk_sequence

    return len(check_chunk_sequence(chunks))  # type: ignore[arg-type]


CONTENDERS: dict[str, Callable[[list[object]], int]] = {
    "SequenceValidator.feed": incremental,
    "check_chunk_sequence": batch,
}


def run(quick: bool = False) -> list[dict[str, object]]:
    count = 200_000 if quick else 1_000_000
    chunks = chunk_sequence(count)
    for name, fn in CONTENDERS.items():  # warm-up, and the stream must be valid
        if fn(chunks):
            raise AssertionError(f"{name}: the generated stream is not valid")
    times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for _ in range(RUNS):
        for name, fn in CONTENDERS.items():
            start = time.perf_counter()
            fn(chunks)
            times[name].append(time.perf_counter() - start)
    return [
        {
            "benchmark": "validator",
            "name": name,
            "chunks": len(chunks),
            "runs": RUNS,
            "samples_s": samples,
            "median_s": statistics.median(samples),
            "chunks_per_s": len(chunks) / statistics.median(samples),
        }
        for name, samples in times.items()
    ]


def render(rows: list[dict[str, object]]) -> str:
    lines = [f"{'mode':<26}{'chunks':>11}{'chunks/s':>14}"]
    for row in rows:
        lines.append(f"{row['name']!s:<26}{row['chunks']:>11,}{row['chunks_per_s']:>14,.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run(quick="--quick" in sys.argv[1:])))
