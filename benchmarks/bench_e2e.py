"""Adapter translation end to end: bytes -> validated StreamChunks (SPEC section 10).

A long OpenAI chat stream (one generation of >= 100k events: a token-by-token
answer, then parallel tool calls whose JSON arguments stream in small pieces,
the finish chunk, the usage chunk and ``data: [DONE]``) is served from memory,
in 4 KiB pieces, through a mock transport:

- ``dsh_replay OpenAIChatAdapter`` - ``httpx.MockTransport`` -> our adapter
  (SSE decoding, translation, block sequencing) -> every chunk checked as it
  arrives by ``SequenceValidator.feed``, then ``finish`` (this is
  ``dsh_replay.cassette.replay.run_adapter``, what the fixture runs).
- ``openai package`` - the same bytes, cut the same way, through
  ``httpx2.MockTransport`` (the SDK is built on httpx2) -> ``AsyncOpenAI`` with
  ``max_retries=0`` -> ``chat.completions.create(stream=True)``, iterated into
  its typed ``ChatCompletionChunk`` objects. It does less than we do (no
  sequencing, no validation), so the comparison is, if anything, kind to it.

Both keep every object they produce in a list, as a caller would. Each
contender runs five times, interleaved, and the median is reported; events/s
counts the SSE events of the body (``[DONE]`` included) over the wall time of
the whole call, request included.

Our Anthropic and Gemini adapters are timed the same way on comparable
streams (their own wire formats, about as many events); they have no peer here.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bodies import (
    anthropic_stream,
    count_sse_events,
    fragments,
    gemini_stream,
    openai_chat_stream,
)

RUNS = 5
BASE = "http://bench.invalid"


def _byte_stream(lib: Any, pieces: list[bytes]) -> Any:
    """An async body of ``lib`` (httpx or httpx2) that yields ``pieces`` one by one."""

    class Pieces(lib.AsyncByteStream):  # type: ignore[misc]
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

    return Pieces()


def _transport(lib: Any, pieces: list[bytes]) -> Any:
    def handler(request: Any) -> Any:
        return lib.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_byte_stream(lib, pieces)
        )

    return lib.MockTransport(handler)


async def ours(adapter_cls: Any, base_url: str, pieces: list[bytes]) -> int:
    """Run one of our adapters over ``pieces``, validating incrementally; return the chunk count."""
    import httpx

    from dsh_replay import GenerateOptions, Message
    from dsh_replay.cassette.replay import run_adapter

    options = GenerateOptions(
        model="bench-model", messages=[Message(role="user", content="Write the notes.")]
    )
    async with httpx.AsyncClient(transport=_transport(httpx, pieces)) as client:
        adapter = adapter_cls(api_key="sk-bench", base_url=base_url, client=client)
        outcome = await run_adapter(adapter, options, capture=())
    if outcome.violations:
        raise AssertionError(f"{adapter_cls.__name__} broke the rules: {outcome.violations[:3]}")
    return len(outcome.chunks)


async def openai_sdk(pieces: list[bytes]) -> int:
    """The openai package over the same pieces; return the ChatCompletionChunk count."""
    import httpx2
    import openai

    async with httpx2.AsyncClient(transport=_transport(httpx2, pieces)) as http_client:
        client = openai.AsyncOpenAI(
            api_key="sk-bench", base_url=f"{BASE}/v1", http_client=http_client, max_retries=0
        )
        stream = await client.chat.completions.create(
            model="bench-model",
            messages=[{"role": "user", "content": "Write the notes."}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    if chunks[-1].usage is None:
        raise AssertionError("the openai package lost the usage chunk")
    return len(chunks)


def _timed(make: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    start = time.perf_counter()
    produced = asyncio.run(make())  # type: ignore[arg-type]
    return time.perf_counter() - start, produced


def run(quick: bool = False) -> list[dict[str, object]]:
    """Time every contender; one row each: OpenAI ours, OpenAI peer, then Anthropic and Gemini."""
    from dsh_replay.adapters import AnthropicAdapter, GeminiAdapter, OpenAIChatAdapter

    events = 10_000 if quick else 100_000
    runs = 3 if quick else RUNS
    streams = {
        "openai": openai_chat_stream(events),
        "anthropic": anthropic_stream(events),
        "gemini": gemini_stream(events),
    }
    pieces = {name: fragments(body) for name, body in streams.items()}
    contenders: dict[str, tuple[str, Callable[[], Awaitable[int]]]] = {
        "dsh_replay OpenAIChatAdapter": (
            "openai",
            lambda: ours(OpenAIChatAdapter, f"{BASE}/v1", pieces["openai"]),
        ),
        "openai package (typed chunks)": ("openai", lambda: openai_sdk(pieces["openai"])),
        "dsh_replay AnthropicAdapter": (
            "anthropic",
            lambda: ours(AnthropicAdapter, BASE, pieces["anthropic"]),
        ),
        "dsh_replay GeminiAdapter": (
            "gemini",
            lambda: ours(GeminiAdapter, f"{BASE}/v1beta", pieces["gemini"]),
        ),
    }
    # warm-up on a small body: imports, first-call caches
    small = fragments(openai_chat_stream(2_000, seed=9))
    asyncio.run(ours(OpenAIChatAdapter, f"{BASE}/v1", small))
    asyncio.run(openai_sdk(small))
    times: dict[str, list[float]] = {name: [] for name in contenders}
    produced: dict[str, int] = {}
    for _ in range(runs):
        for name, (_, make) in contenders.items():
            seconds, produced[name] = _timed(make)
            times[name].append(seconds)
    rows: list[dict[str, object]] = []
    for name, (stream, _) in contenders.items():
        seconds = statistics.median(times[name])
        count = count_sse_events(streams[stream])
        rows.append(
            {
                "benchmark": "e2e",
                "name": name,
                "provider": stream,
                "events": count,
                "bytes": len(streams[stream]),
                "produced": produced[name],
                "runs": runs,
                "samples_s": times[name],
                "median_s": seconds,
                "events_per_s": count / seconds,
            }
        )
    ours_rate, peer_rate = rows[0]["events_per_s"], rows[1]["events_per_s"]
    assert isinstance(ours_rate, float) and isinstance(peer_rate, float)
    rows[0]["vs_openai"] = ours_rate / peer_rate
    rows[1]["vs_openai"] = 1.0
    return rows


def render(rows: list[dict[str, object]]) -> str:
    lines = [f"{'contender':<32}{'events':>9}{'events/s':>12}{'vs openai':>11}"]
    for row in rows:
        ratio = f"{row['vs_openai']:.2f}x" if "vs_openai" in row else ""
        lines.append(
            f"{row['name']!s:<32}{row['events']:>9,}{row['events_per_s']:>12,.0f}{ratio:>11}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run(quick="--quick" in sys.argv[1:])))
