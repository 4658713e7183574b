"""Finish kinds (P10) and derived call ids, checked on every shipped route.

Both are decided once, in the sequencer, never by an adapter: ``finish`` is
``tool-calls`` iff the stream has a tool-call block, whatever the provider's own
reason (kept in ``raw``), and a call that comes without an id gets
``call_{n}_{name}`` on every route that can receive one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_replay import Turn, collect
from dsh_replay.adapters import BUILTIN_ROUTES
from dsh_replay.cassette.replay import trace_body


def sse(*payloads: dict[str, Any] | str, events: bool = False) -> bytes:
    out = []
    for payload in payloads:
        if isinstance(payload, str):
            out.append(f"data: {payload}\n\n")
            continue
        head = f"event: {payload['type']}\n" if events else ""
        out.append(f"{head}data: {json.dumps(payload)}\n\n")
    return "".join(out).encode()


def ndjson(*lines: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def chat(delta: dict[str, Any], finish: str | None = None, **top: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **top}


CHAT_USAGE = {"prompt_tokens": 10, "completion_tokens": 5}
USAGE_CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": [], "usage": CHAT_USAGE}
CHAT_CALL = {"index": 0, "id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
GEMINI_COMPAT_CALL = {"function": {"arguments": '{"city":"Paris"}', "name": "get_weather"}, "id": "", "type": "function"}


def anthropic(*content: dict[str, Any], reason: str) -> bytes:
    start: dict[str, Any] = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                                  "model": "claude", "usage": {"input_tokens": 10, "output_tokens": 1}}}
    end: list[dict[str, Any]] = [{"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}, "usage": {"output_tokens": 5}},
           {"type": "message_stop"}]
    return sse(start, *content, *end, events=True)


ANTHROPIC_CALL = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"city":"Paris"}'}},
    {"type": "content_block_stop", "index": 0},
]
ANTHROPIC_TEXT = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
]


def responses(*items: dict[str, Any]) -> bytes:
    def response(status: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"id": "resp_1", "object": "response", "status": status, "output": [], "usage": usage}

    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    payloads = [{"type": "response.created", "response": response("in_progress")}, *items,
                {"type": "response.completed", "response": response("completed", usage)}]
    return sse(*[{**p, "sequence_number": n} for n, p in enumerate(payloads)], events=True)


FUNCTION_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_r1", "name": "get_weather", "arguments": "", "status": "in_progress"}
RESPONSES_CALL = [
    {"type": "response.output_item.added", "output_index": 0, "item": FUNCTION_CALL},
    {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"city":"Paris"}'},
    {"type": "response.output_item.done", "output_index": 0,
     "item": {**FUNCTION_CALL, "arguments": '{"city":"Paris"}', "status": "completed"}},
]


def gemini(*parts: dict[str, Any], reason: str) -> bytes:
    payload = {"candidates": [{"content": {"parts": list(parts), "role": "model"}, "finishReason": reason, "index": 0}],
               "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}
    return f"data: {json.dumps(payload)}\r\n\r\n".encode()


def ollama(message: dict[str, Any], reason: str) -> bytes:
    return ndjson({"model": "llama3.2", "message": {"role": "assistant", "content": "", **message}, "done": False},
                  {"model": "llama3.2", "message": {"role": "assistant", "content": ""}, "done": True,
                   "done_reason": reason, "prompt_eval_count": 10, "eval_count": 5})


#: route -> (a tool call the provider ends with a reason that is not "tool calls", its raw reason)
CALL_BUT_PROVIDER_SAYS_STOP: dict[str, tuple[bytes, str]] = {
    "openai": (sse(chat({"role": "assistant", "tool_calls": [CHAT_CALL]}), chat({}, "stop"), USAGE_CHUNK, "[DONE]"), "stop"),
    # as Gemini's OpenAI-compatible endpoint sends it: "id": "", no index, "stop"
    "openai-compatible": (sse(chat({"role": "assistant", "tool_calls": [GEMINI_COMPAT_CALL]}, "stop", usage=CHAT_USAGE), "[DONE]"), "stop"),
    "deepseek": (sse(chat({"role": "assistant", "tool_calls": [CHAT_CALL]}, "stop", usage=CHAT_USAGE), "[DONE]"), "stop"),
    "anthropic": (anthropic(*ANTHROPIC_CALL, reason="end_turn"), "end_turn"),
    "openai-responses": (responses(*RESPONSES_CALL), "completed"),
    "gemini": (gemini({"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}, reason="STOP"), "STOP"),
    "ollama": (ollama({"tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, "stop"), "stop"),
}

#: route -> (text only, with a provider reason that claims tool calls, its raw reason)
NO_CALL_BUT_PROVIDER_SAYS_TOOLS: dict[str, tuple[bytes, str]] = {
    "openai": (sse(chat({"content": "Hi"}), chat({}, "tool_calls", usage=CHAT_USAGE), "[DONE]"), "tool_calls"),
    "openai-compatible": (sse(chat({"content": "Hi"}, "tool_calls", usage=CHAT_USAGE), "[DONE]"), "tool_calls"),
    "deepseek": (sse(chat({"content": "Hi"}, "tool_calls", usage=CHAT_USAGE), "[DONE]"), "tool_calls"),
    "anthropic": (anthropic(*ANTHROPIC_TEXT, reason="tool_use"), "tool_use"),
    "gemini": (gemini({"text": "Hi"}, reason="STOP"), "STOP"),
    "ollama": (ollama({"content": "Hi"}, "stop"), "stop"),
}


async def traced(route: str, body: bytes) -> Turn:
    outcome = await trace_body(body, route=route)
    assert outcome.raised is None, outcome.raised
    assert outcome.violations == [], outcome.violations
    return collect(outcome.chunks)


def test_every_route_is_covered() -> None:
    assert set(CALL_BUT_PROVIDER_SAYS_STOP) == set(BUILTIN_ROUTES)


@pytest.mark.asyncio
@pytest.mark.parametrize("route", sorted(CALL_BUT_PROVIDER_SAYS_STOP))
async def test_a_tool_call_block_finishes_tool_calls_whatever_the_provider_says(route: str) -> None:
    body, raw = CALL_BUT_PROVIDER_SAYS_STOP[route]
    turn = await traced(route, body)
    assert [(call.name, call.parsed) for call in turn.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert turn.finish_reason is not None
    assert (turn.finish_reason.kind, turn.finish_reason.raw) == ("tool-calls", raw)


@pytest.mark.asyncio
@pytest.mark.parametrize("route", sorted(NO_CALL_BUT_PROVIDER_SAYS_TOOLS))
async def test_no_tool_call_block_finishes_stop_whatever_the_provider_says(route: str) -> None:
    body, raw = NO_CALL_BUT_PROVIDER_SAYS_TOOLS[route]
    turn = await traced(route, body)
    assert turn.text == "Hi" and turn.tool_calls == ()
    assert turn.finish_reason is not None
    assert (turn.finish_reason.kind, turn.finish_reason.raw) == ("stop", raw)


@pytest.mark.asyncio
@pytest.mark.parametrize("route", ["gemini", "ollama", "openai-compatible"])
async def test_id_less_calls_get_the_same_derived_ids_on_every_route(route: str) -> None:
    # one mechanism (the sequencer's): the n-th call of the response is call_{n}_{name}
    bodies = {
        "gemini": gemini({"text": "Checking."}, {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                         {"functionCall": {"name": "get_time", "args": {}}}, reason="STOP"),
        "ollama": ollama({"content": "Checking.", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"function": {"name": "get_time", "arguments": {}}}]}, "stop"),
        "openai-compatible": sse(
            chat({"content": "Checking.", "role": "assistant"}),
            chat({"role": "assistant", "tool_calls": [GEMINI_COMPAT_CALL]}),
            chat({"role": "assistant", "tool_calls": [{**GEMINI_COMPAT_CALL, "function": {"arguments": "{}", "name": "get_time"}}]}),
            chat({"role": "assistant"}, "stop", usage=CHAT_USAGE),
            "[DONE]",
        ),
    }
    turn = await traced(route, bodies[route])
    assert turn.text == "Checking."
    assert [(call.id, call.name) for call in turn.tool_calls] == [("call_0_get_weather", "get_weather"), ("call_1_get_time", "get_time")]
    assert turn.finish_reason is not None and turn.finish_reason.kind == "tool-calls"
