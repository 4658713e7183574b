"""SSE decoding speed: bytes -> events, fed in 4 KiB fragments (SPEC section 10).

Every contender decodes the same bytes, cut the same way, in one process; each is
timed five times (interleaved, so that drift in the machine hits all alike) and
the median is reported:

- ``dsh_replay`` - our ``SSEDecoder.feed`` per fragment, then ``flush``.
- ``httpx-sse`` - what ``EventSource.iter_sse`` does with a response's bytes:
  httpx's incremental ``TextDecoder``, then httpx-sse's ``SSELineDecoder`` and
  ``SSEDecoder`` line by line. The HTTP machinery around them is left out, as it
  is for us.
- ``openai`` - the openai package's ``SSEDecoder.iter_bytes`` over the fragments.
- ``bytes.split`` - no decoder at all: split on ``b"\\n\\n"``, carrying the
  leftover between fragments. It builds no event, so it is the ceiling.

The body is many OpenAI chat-completions streams back to back (role chunk, text
deltas with some non-ASCII text, some tool calls streamed as argument fragments,
the finish chunk, the ``include_usage`` chunk and ``data: [DONE]``).

Run ``python benchmarks/bench_sse.py [--quick]``; ``run()`` returns the rows for
``benchmarks/run.py``. ``--processes N`` runs it in N fresh processes, one after
another, and prints the median and the range of each ratio over them: on a
shared machine one run's ratios can move by 10% and more.

``--stages`` prices the work any decoder of this body must do, one stage at a time
and with no decoder state at all: cut the body into payloads, prove every block is
one ``data:`` line, decode UTF-8, build ``SSEEvent`` values. The last stage is the
floor for a decoder whose events carry ``str`` data; the table shows how far the
``openai`` decoder's time divided by that floor is from the targets.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from typing import Any

FRAGMENT = 4096
RUNS = 5

_WORDS = (
    *("the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "on"),
    *("stream", "adapter", "token", "chunk", "event", "provider", "replay", "golden"),
    # Non-ASCII text, which OpenAI sends as raw UTF-8.
    *("na\u00efve", "caf\u00e9", "\u6771\u4eac", "\U0001f600", "\u2014", "\u201cquoted\u201d"),
)


def build_body(target_bytes: int, seed: int = 7) -> bytes:
    """Return about ``target_bytes`` of OpenAI chat-completions SSE traffic."""
    rng = random.Random(seed)
    parts: list[bytes] = []
    size = 0
    turn = 0
    while size < target_bytes:
        for payload in _one_completion(rng, turn):
            line = b"data: " + payload + b"\n\n"
            parts.append(line)
            size += len(line)
        turn += 1
    return b"".join(parts)


def _one_completion(rng: random.Random, turn: int) -> Iterator[bytes]:
    head = {
        "id": f"chatcmpl-{turn:08d}Qx7bR2kP9sLmT4vW",
        "object": "chat.completion.chunk",
        "created": 1_770_933_892 + turn,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_de604bd877",
    }

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return json.dumps(
            {**head, "choices": [choice]}, ensure_ascii=False, separators=(",", ":")
        ).encode()

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for _ in range(rng.randint(40, 400)):
        yield chunk({"content": " " + rng.choice(_WORDS)})
    calls = rng.choice((0, 0, 0, 1, 2))
    for index in range(calls):
        first = {
            "index": index,
            "id": f"call_{turn}_{index}abcdef",
            "type": "function",
            "function": {"name": "get_weather", "arguments": ""},
        }
        yield chunk({"tool_calls": [first]})
        arguments = json.dumps({"city": "Tokyo", "unit": "celsius", "days": rng.randint(1, 9)})
        for start in range(0, len(arguments), 7):
            piece = {"index": index, "function": {"arguments": arguments[start : start + 7]}}
            yield chunk({"tool_calls": [piece]})
    yield chunk({}, "tool_calls" if calls else "stop")
    usage = {"prompt_tokens": 57, "completion_tokens": 213, "total_tokens": 270}
    yield json.dumps({**head, "choices": [], "usage": usage}, separators=(",", ":")).encode()
    yield b"[DONE]"


def fragments(body: bytes, size: int = FRAGMENT) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def count_ours(frags: list[bytes]) -> int:
    from dsh_replay.wire.sse import SSEDecoder

    decoder = SSEDecoder()
    count = 0
    for frag in frags:
        count += len(decoder.feed(frag))
    return count + len(decoder.flush())


def count_httpx_sse(frags: list[bytes]) -> int:
    from httpx._decoders import TextDecoder
    from httpx_sse._decoders import SSEDecoder, SSELineDecoder

    # Mirrors httpx_sse._api: Response.iter_text() -> SSELineDecoder -> SSEDecoder.
    text_decoder = TextDecoder(encoding="utf-8")
    line_decoder = SSELineDecoder()
    decoder = SSEDecoder()

    def events(lines: list[str]) -> int:
        return sum(decoder.decode(line.rstrip("\n")) is not None for line in lines)

    count = 0
    for frag in frags:
        count += events(line_decoder.decode(text_decoder.decode(frag)))
    text = text_decoder.flush()
    if text:
        count += events(line_decoder.decode(text))
    return count + events(line_decoder.flush())


def count_openai(frags: list[bytes]) -> int:
    from openai._streaming import SSEDecoder

    return sum(1 for _ in SSEDecoder().iter_bytes(iter(frags)))


def count_split(frags: list[bytes]) -> int:
    leftover = b""
    count = 0
    for frag in frags:
        parts = (leftover + frag).split(b"\n\n")
        leftover = parts.pop()
        count += len(parts)
    return count + (1 if leftover.strip() else 0)


def _stage(check: bool, decode: bool, build: bool) -> Callable[[list[bytes]], int]:
    """The decoder's hot path cut down to its unavoidable steps (see ``--stages``)."""
    from dsh_replay.wire.sse import _DecodedEvent

    message, nothing = repeat("message"), repeat(None)

    def count(frags: list[bytes]) -> int:
        leftover = b""
        total = 0
        for frag in frags:
            data = leftover + frag
            cut = data.rfind(b"\n\n")
            leftover = data[cut + 2 :]
            block = data[6:cut]
            payloads = block.split(b"\n\ndata: ")
            if check and 0x0A in b"".join(payloads):
                raise AssertionError("every block of the benchmark body is one data: line")
            values: Iterable[Any] = payloads
            if decode:
                values = map(bytes.decode, values)
            if build:
                values = map(_DecodedEvent, zip(message, values, nothing, nothing))  # noqa: B905
            total += len(list(values))
        return total + (1 if leftover.strip() else 0)

    return count


STAGES: dict[str, Callable[[list[bytes]], int]] = {
    "cut into payloads": _stage(check=False, decode=False, build=False),
    "+ one-line check": _stage(check=True, decode=False, build=False),
    "+ UTF-8 decode": _stage(check=True, decode=True, build=False),
    "+ SSEEvent (floor)": _stage(check=True, decode=True, build=True),
}

CONTENDERS: dict[str, Callable[[list[bytes]], int]] = {
    "dsh_replay SSEDecoder": count_ours,
    "httpx-sse": count_httpx_sse,
    "openai SSEDecoder": count_openai,
    "bytes.split (ceiling)": count_split,
}


def run(
    quick: bool = False, contenders: dict[str, Callable[[list[bytes]], int]] = CONTENDERS
) -> list[dict[str, object]]:
    """Time every contender; return one row per contender, ours first."""
    body = build_body(3_000_000 if quick else 30_000_000)
    frags = fragments(body)
    counts = {name: fn(frags) for name, fn in contenders.items()}  # also warms up
    if len(set(counts.values())) != 1:
        raise AssertionError(f"contenders disagree on the event count: {counts}")
    events = counts["dsh_replay SSEDecoder"]
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(RUNS):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn(frags)
            times[name].append(time.perf_counter() - start)
    ours = events / statistics.median(times["dsh_replay SSEDecoder"])
    rows: list[dict[str, object]] = []
    for name, samples in times.items():
        seconds = statistics.median(samples)
        rate = events / seconds
        rows.append(
            {
                "benchmark": "sse",
                "name": name,
                "events": events,
                "bytes": len(body),
                "fragment": FRAGMENT,
                "median_s": seconds,
                "events_per_s": rate,
                "mb_per_s": len(body) / seconds / 1e6,
                "ratio_vs_ours": rate / ours,
                "ours_speedup": ours / rate,
            }
        )
    return rows


def render(rows: list[dict[str, object]]) -> str:
    first = rows[0]
    lines = [
        f"SSE decoding: {first['bytes']:,} bytes, {first['events']:,} events, "
        f"{first['fragment']} B fragments, median of {RUNS}",
        f"{'decoder':<24}{'events/s':>14}{'MB/s':>9}{'vs ours':>9}{'ours is':>9}",
    ]
    for row in rows:
        lines.append(
            f"{row['name']!s:<24}{row['events_per_s']:>14,.0f}{row['mb_per_s']:>9.1f}"
            f"{row['ratio_vs_ours']:>8.2f}x{row['ours_speedup']:>8.2f}x"
        )
    return "\n".join(lines)


def render_stages(rows: list[dict[str, object]]) -> str:
    """Each row's time per event, and its speed against the openai decoder and the bare split."""
    rates = {str(row["name"]): float(row["events_per_s"]) for row in rows}
    openai, split = rates["openai SSEDecoder"], rates["bytes.split (ceiling)"]
    lines = [
        f"SSE hot path stage by stage: {rows[0]['events']:,} events, median of {RUNS}",
        f"{'contender':<24}{'ns/event':>10}{'x openai':>10}{'x split':>9}",
    ]
    for name, rate in rates.items():
        lines.append(f"{name:<24}{1e9 / rate:>10.0f}{rate / openai:>9.2f}x{rate / split:>8.2f}x")
    return "\n".join(lines)


def spread(processes: int, quick: bool) -> str:
    """Run the benchmark in ``processes`` fresh processes, one after another.

    Each process reports its own medians; the table gives, for each peer, the
    median and the range of "ours is N x" over the processes. The machine's speed
    drifts between and within runs by more than the margins of the targets, so
    one run alone can land on either side of a target.
    """
    command = [sys.executable, __file__, "--json", *(["--quick"] if quick else [])]
    speedups: dict[str, list[float]] = {}
    for _ in range(processes):
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        for row in json.loads(output)[1:]:
            speedups.setdefault(str(row["name"]), []).append(float(row["ours_speedup"]))
    lines = [
        f"SSE decoding in {processes} processes: ours is N x each peer",
        f"{'peer':<24}{'median':>9}{'min':>9}{'max':>9}",
    ]
    for name, values in speedups.items():
        lines.append(
            f"{name:<24}{statistics.median(values):>8.2f}x{min(values):>8.2f}x{max(values):>8.2f}x"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 MB instead of 30 MB")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--stages", action="store_true", help="price each stage of the hot path")
    mode.add_argument("--processes", type=int, metavar="N", help="the spread over N processes")
    mode.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    if args.processes:
        print(spread(args.processes, args.quick))
    elif args.json:
        print(json.dumps(run(args.quick)))
    elif args.stages:
        ours = {"dsh_replay SSEDecoder": count_ours}
        peers = {name: CONTENDERS[name] for name in ("openai SSEDecoder", "bytes.split (ceiling)")}
        print(render_stages(run(args.quick, {**ours, **STAGES, **peers})))
    else:
        print(render(run(args.quick)))


if __name__ == "__main__":
    main()
