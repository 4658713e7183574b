"""What wire coverage costs end to end: bytes -> validated StreamChunks, with and without it.

The same bodies and the same path as ``bench_e2e.py`` (a mock transport serving
4 KiB pieces into our adapter, every chunk validated as it arrives), run plain
and inside ``collect_coverage()`` — what ``dsh-replay check``, ``trace`` and the
plugin's summary pay to count each provider event by kind, keep the body for
line numbers and name the first line of each kind. Plain and covered runs of
one adapter alternate, seven times each (three with ``--quick``); each covered
run is compared with the plain run before it and the median of those ratios is
the figure; the target is less than 10% added. Field tracking
(``collect_coverage(fields=True)``, for ``trace --coverage`` and drift) is timed
too, on the OpenAI stream, without a target: it is a diagnosis, not a default.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bodies import anthropic_stream, count_sse_events, fragments, gemini_stream, openai_chat_stream
from bench_e2e import BASE, ours

RUNS = 7
TARGET = 0.10


def _timed(run: Callable[[], Any], coverage: str) -> float:
    """CPU seconds of one run: on a shared machine, wall time mostly measures the neighbours."""
    from dsh_replay.wire.coverage import collect_coverage

    start = time.process_time()
    if coverage == "off":
        run()
    else:
        with collect_coverage(fields=coverage == "fields") as seen:
            run()
        if len(seen.streams) != 1 or seen.streams[0].status != "complete":
            raise AssertionError(f"coverage did not see one complete stream: {seen.streams}")
    return time.process_time() - start


def run(quick: bool = False) -> list[dict[str, object]]:
    from dsh_replay.adapters import AnthropicAdapter, GeminiAdapter, OpenAIChatAdapter

    events = 10_000 if quick else 100_000
    runs = 3 if quick else RUNS
    cases = {
        "OpenAIChatAdapter": (OpenAIChatAdapter, f"{BASE}/v1", openai_chat_stream(events)),
        "AnthropicAdapter": (AnthropicAdapter, BASE, anthropic_stream(events)),
        "GeminiAdapter": (GeminiAdapter, f"{BASE}/v1beta", gemini_stream(events)),
    }
    small = fragments(openai_chat_stream(2_000, seed=9))
    _timed(lambda: asyncio.run(ours(OpenAIChatAdapter, f"{BASE}/v1", small)), "counts")  # warm-up
    rows: list[dict[str, object]] = []
    for name, (cls, base, body) in cases.items():
        pieces = fragments(body)
        modes = ("off", "counts", "fields") if name == "OpenAIChatAdapter" else ("off", "counts")
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        def once(cls: Any = cls, base: str = base, pieces: list[bytes] = pieces) -> None:
            asyncio.run(ours(cls, base, pieces))

        for _ in range(runs):
            for mode in modes:
                times[mode].append(_timed(once, mode))
        for mode in modes:
            # each covered run against the plain run just before it, so that a slow spell of the
            # machine weighs on both sides of a ratio; the median of those ratios
            added = statistics.median(t / p - 1.0 for t, p in zip(times[mode], times["off"], strict=True))
            rows.append({"benchmark": "coverage", "name": name, "mode": mode, "events": count_sse_events(body),
                         "runs": runs, "samples_s": times[mode], "median_s": statistics.median(times[mode]),
                         "added": added})
    return rows


def rows(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table rows of ``benchmarks/run.py``: one per adapter and mode, the added time against plain."""
    out = []
    for row in raw:
        section = f"coverage ({row['events']:,} ev)"
        mode = {"off": "plain", "counts": "collect_coverage()", "fields": "collect_coverage(fields=True)"}[row["mode"]]
        counted = row["mode"] == "counts"
        out.append({
            "section": section, "contender": f"{row['name']} {mode}",
            "figure": f"{row['events'] / row['median_s']:,.0f} events/s",
            "ratio": "" if row["mode"] == "off" else f"{row['added'] * 100:+.1f}%",
            "target": f"< +{TARGET:.0%}" if counted else "", "met": row["added"] < TARGET if counted else None,
        })
    return out


def render(raw: list[dict[str, Any]]) -> str:
    lines = [f"{'contender':<52}{'events/s':>12}{'added':>9}"]
    for row in rows(raw):
        lines.append(f"{row['contender']:<52}{row['figure'].split()[0]:>12}{row['ratio']:>9}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run(quick="--quick" in sys.argv[1:])))
