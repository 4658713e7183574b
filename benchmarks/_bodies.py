"""Provider bodies and chunk sequences shared by the benchmarks.

Everything here is deterministic (seeded), built once before any timing starts,
and shaped after the recordings in ``../shared/real-traffic`` (see its
``FORMAT-NOTES.md``):

- OpenAI chat: ``chat.completion.chunk`` payloads with the fields the API sends
  today (``service_tier``, ``system_fingerprint``, ``usage: null``,
  ``obfuscation``), text deltas that are one token each (some non-ASCII), tool
  calls whose ``id``/``name`` come only on the first fragment and whose JSON
  arguments follow in small pieces, a ``finish_reason`` chunk, the
  ``include_usage`` chunk with ``choices: []`` and ``data: [DONE]``.
- Anthropic: ``event:``/``data:`` blocks, ``message_start`` … per-index
  ``content_block_start/delta/stop`` (text and ``tool_use`` with
  ``input_json_delta``), ``ping`` between blocks, ``message_delta`` with the
  stop reason and cumulative usage, ``message_stop``.
- Gemini: every event a whole ``GenerateContentResponse`` (text parts, whole
  ``functionCall`` parts, ``usageMetadata`` on every chunk), separated by
  ``\\r\\n\\r\\n``; the last one carries ``finishReason``.

The long streams are *one* generation each (one response, one ``finish``), so an
adapter has to keep its state for the whole of it, as it would for a long answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

__all__ = [
    "FRAGMENT",
    "anthropic_stream",
    "chunk_sequence",
    "count_sse_events",
    "fragments",
    "gemini_stream",
    "openai_chat_stream",
    "short_openai_stream",
]

#: Bodies are handed to the clients in pieces of this size, as a socket would.
FRAGMENT = 4096

WORDS = (
    *("the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "on"),
    *("stream", "adapter", "token", "chunk", "event", "provider", "replay", "golden"),
    *(".", ",", "\n\n", "**", "`", "-"),
    # non-ASCII text, which the providers send as raw UTF-8
    *("na\u00efve", "caf\u00e9", "\u6771\u4eac", "\U0001f600", "\u2014", "\u201cquoted\u201d"),
)

_CITIES = ("Tokyo", "Paris", "S\u00e3o Paulo", "Z\u00fcrich", "Lagos", "Montr\u00e9al", "Pune")
_TOOLS = ("get_weather", "search_docs", "run_sql", "read_file")


def _dumps(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _arguments(rng: random.Random, tool: str) -> str:
    """A realistic JSON arguments object, as the model would write it."""
    if tool == "get_weather":
        args: dict[str, object] = {
            "city": rng.choice(_CITIES),
            "unit": "celsius",
            "days": rng.randint(1, 9),
        }
    elif tool == "search_docs":
        args = {
            "query": " ".join(rng.choice(WORDS[:20]) for _ in range(8)),
            "top_k": rng.randint(3, 20),
            "filters": {"lang": "en", "since": "2024-01-01"},
        }
    elif tool == "run_sql":
        args = {
            "sql": f"SELECT id, name FROM users WHERE age > {rng.randint(18, 70)} ORDER BY name LIMIT 50",
            "timeout_ms": 5000,
        }
    elif tool == "write_file":
        lines = (
            " ".join(rng.choice(WORDS[:20]) for _ in range(rng.randint(3, 12))) for _ in range(150)
        )
        args = {
            "path": f"docs/notes_{rng.randint(0, 999)}.md",
            "content": "\n".join(lines),
            "mode": "overwrite",
        }
    else:
        args = {
            "path": f"src/pkg/module_{rng.randint(0, 999)}.py",
            "start_line": 1,
            "end_line": rng.randint(20, 400),
        }
    return json.dumps(args, ensure_ascii=False)


def _pieces(text: str, rng: random.Random, low: int = 2, high: int = 9) -> Iterator[str]:
    """``text`` cut into small pieces, as tool arguments stream."""
    start = 0
    while start < len(text):
        end = start + rng.randint(low, high)
        yield text[start:end]
        start = end


def _obfuscation(rng: random.Random) -> str:
    return "".join(
        rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        for _ in range(8)
    )


# -- OpenAI chat ------------------------------------------------------------------


def openai_chat_stream(events: int, *, seed: int = 1, tool_share: float = 0.15) -> bytes:
    """One Chat Completions generation of at least ``events`` SSE events.

    The shape of a long agent turn: an answer streamed token by token, then
    parallel tool calls (``write_file`` with a long ``content``, smaller calls
    beside it) whose JSON arguments stream in small fragments; about
    ``tool_share`` of the events are argument fragments.
    """
    rng = random.Random(seed)
    head = {
        "id": f"chatcmpl-D8Z5oo6uDh67AD85p73k{seed:05d}",
        "object": "chat.completion.chunk",
        "created": 1_770_933_892,
        "model": "gpt-4.1-mini-2025-04-14",
        "service_tier": "default",
        "system_fingerprint": "fp_de604bd877",
    }

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _dumps(
            {**head, "choices": [choice], "usage": None, "obfuscation": _obfuscation(rng)}
        )

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    text_events = int(events * (1 - tool_share))
    while len(out) < text_events:
        out.append(
            chunk({"content": rng.choice(WORDS) if rng.random() < 0.3 else " " + rng.choice(WORDS)})
        )
    calls = 0
    while len(out) < events - 3:
        tool = "write_file" if calls % 2 == 0 else rng.choice(_TOOLS)
        first = {
            "index": calls,
            "id": f"call_{seed}x{calls:04d}Qx7bR2kP9sLmT4vW",
            "type": "function",
            "function": {"name": tool, "arguments": ""},
        }
        out.append(chunk({"tool_calls": [first]}))
        for piece in _pieces(_arguments(rng, tool), rng):
            out.append(chunk({"tool_calls": [{"index": calls, "function": {"arguments": piece}}]}))
        calls += 1
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    usage = {
        "prompt_tokens": 1_234,
        "completion_tokens": len(out),
        "total_tokens": 1_234 + len(out),
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    out.append(_dumps({**head, "choices": [], "usage": usage, "obfuscation": _obfuscation(rng)}))
    out.append(b"[DONE]")
    return b"".join(b"data: " + payload + b"\n\n" for payload in out)


def short_openai_stream(case: int) -> bytes:
    """A short generation (a few dozen events) for the suite benchmark; one in four calls a tool."""
    rng = random.Random(case)
    head = {
        "id": f"chatcmpl-case{case:05d}",
        "object": "chat.completion.chunk",
        "created": 1_770_933_892,
        "model": "gpt-4.1-mini-2025-04-14",
        "service_tier": "default",
        "system_fingerprint": "fp_de604bd877",
    }

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _dumps(
            {**head, "choices": [choice], "usage": None, "obfuscation": _obfuscation(rng)}
        )

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for _ in range(rng.randint(10, 50)):
        out.append(chunk({"content": " " + rng.choice(WORDS)}))
    tool = case % 4 == 0
    if tool:
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": f"call_case{case:05d}",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                }
            )
        )
        for piece in _pieces(_arguments(rng, "get_weather"), rng):
            out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    out.append(chunk({}, "tool_calls" if tool else "stop"))
    usage = {
        "prompt_tokens": 20 + case % 7,
        "completion_tokens": len(out),
        "total_tokens": 20 + case % 7 + len(out),
    }
    out.append(_dumps({**head, "choices": [], "usage": usage, "obfuscation": _obfuscation(rng)}))
    out.append(b"[DONE]")
    return b"".join(b"data: " + payload + b"\n\n" for payload in out)


# -- Anthropic ------------------------------------------------------------------------


def anthropic_stream(events: int, *, seed: int = 2) -> bytes:
    """One Messages API generation of at least ``events`` SSE events."""
    rng = random.Random(seed)
    parts: list[bytes] = []

    def emit(kind: str, payload: dict[str, object]) -> None:
        parts.append(
            b"event: " + kind.encode() + b"\ndata: " + _dumps({"type": kind, **payload}) + b"\n\n"
        )

    emit(
        "message_start",
        {
            "message": {
                "model": "claude-sonnet-4-5-20250929",
                "id": f"msg_018E1hg8GoVTGEKQY3ov{seed:04d}",
                "type": "message",
                "role": "assistant",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 1234,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": 0,
                        "ephemeral_1h_input_tokens": 0,
                    },
                    "output_tokens": 1,
                    "service_tier": "standard",
                },
            }
        },
    )
    index = tools = 0
    while len(parts) < events - 3:
        if index and rng.random() < 0.2:
            tool = rng.choice(_TOOLS)
            emit(
                "content_block_start",
                {
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": f"toolu_01QE1WLsSVp5hy5Q{index:06d}",
                        "name": tool,
                        "input": {},
                    },
                },
            )
            emit(
                "content_block_delta",
                {"index": index, "delta": {"type": "input_json_delta", "partial_json": ""}},
            )
            for piece in _pieces(_arguments(rng, tool), rng):
                emit(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
                )
            tools += 1
        else:
            emit(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            for _ in range(rng.randint(100, 400)):
                emit(
                    "content_block_delta",
                    {
                        "index": index,
                        "delta": {"type": "text_delta", "text": " " + rng.choice(WORDS)},
                    },
                )
        emit("content_block_stop", {"index": index})
        emit("ping", {})
        index += 1
    emit(
        "message_delta",
        {
            "delta": {"stop_reason": "tool_use" if tools else "end_turn", "stop_sequence": None},
            "usage": {
                "input_tokens": 1234,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": len(parts),
            },
        },
    )
    emit("message_stop", {})
    return b"".join(parts)


# -- Gemini ----------------------------------------------------------------------------


def gemini_stream(events: int, *, seed: int = 3) -> bytes:
    """One ``streamGenerateContent?alt=sse`` generation of at least ``events`` events."""
    rng = random.Random(seed)
    parts: list[bytes] = []
    response_id = f"1lpeaMTxIpW1nvgP-O3v{seed:04d}"
    output = 0
    while len(parts) < events:
        last = len(parts) == events - 1
        # the calls come at the end of the answer, as Gemini sends them
        if len(parts) > events * 0.999 and not last:
            tool = rng.choice(_TOOLS)
            part: dict[str, object] = {
                "functionCall": {"name": tool, "args": json.loads(_arguments(rng, tool))}
            }
        else:
            part = {"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))}
        output += 3
        candidate: dict[str, object] = {"content": {"parts": [part], "role": "model"}}
        if last:
            candidate["finishReason"] = "STOP"
        usage = {
            "promptTokenCount": 1234,
            "candidatesTokenCount": output,
            "totalTokenCount": 1234 + output,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1234}],
        }
        payload = {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": "gemini-2.5-flash",
            "responseId": response_id,
        }
        parts.append(b"data: " + _dumps(payload) + b"\r\n\r\n")
    return b"".join(parts)


# -- helpers ------------------------------------------------------------------------------


def fragments(body: bytes, size: int = FRAGMENT) -> list[bytes]:
    """``body`` cut into ``size``-byte pieces (cut anywhere: inside lines and UTF-8 characters)."""
    return [body[i : i + size] for i in range(0, len(body), size)]


def count_sse_events(body: bytes) -> int:
    """The number of SSE events in a body whose events end with a blank line."""
    return body.replace(b"\r\n", b"\n").count(b"\n\n")


def chunk_sequence(count: int, *, seed: int = 4) -> list[object]:
    """A valid StreamChunk sequence of about ``count`` chunks (chunk objects).

    Text blocks of 20-200 deltas, tool-call blocks of 5-40 argument fragments
    and some reasoning blocks, then ``usage`` and ``finish``: the mix a long
    agent turn produces.
    """
    from dsh_replay import (
        BlockEnd,
        BlockStart,
        CallId,
        Finish,
        FinishReason,
        ReasoningBlock,
        ReasoningDelta,
        TextBlock,
        TextDelta,
        ToolCallBlock,
        ToolCallDelta,
        Usage,
        UsageChunk,
    )

    rng = random.Random(seed)
    words = [" " + word for word in WORDS]
    chunks: list[object] = []
    index = 0
    tools = 0
    while len(chunks) < count - 2:
        kind = rng.random()
        chunks.append(
            BlockStart(
                index=index,
                block_type="tool-call" if kind < 0.15 else "reasoning" if kind < 0.25 else "text",
            )
        )
        if kind < 0.15:
            call_id, name = CallId(f"call_{index:07d}"), rng.choice(_TOOLS)
            pieces = list(_pieces(_arguments(rng, name), rng))
            chunks += [
                ToolCallDelta(index=index, id=call_id, name=name, arguments_delta=p) for p in pieces
            ]
            chunks.append(
                BlockEnd(
                    index=index,
                    block=ToolCallBlock(id=call_id, name=name, arguments="".join(pieces)),
                )
            )
            tools += 1
        else:
            texts = [rng.choice(words) for _ in range(rng.randint(20, 200))]
            if kind < 0.25:
                chunks += [ReasoningDelta(index=index, text=t) for t in texts]
                chunks.append(BlockEnd(index=index, block=ReasoningBlock(text="".join(texts))))
            else:
                chunks += [TextDelta(index=index, text=t) for t in texts]
                chunks.append(BlockEnd(index=index, block=TextBlock(text="".join(texts))))
        index += 1
    chunks.append(UsageChunk(usage=Usage(input_tokens=1234, output_tokens=len(chunks))))
    chunks.append(
        Finish(reason=FinishReason(kind="tool-calls" if tools else "stop", raw="tool_calls"))
    )
    return chunks
