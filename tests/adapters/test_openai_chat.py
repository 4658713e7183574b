"""Routes ``openai`` and ``openai-compatible``: request mapping, event mapping, errors, cassettes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_replay import (
    AuthenticationError,
    CallId,
    ConfigError,
    GenerateOptions,
    InvalidRequestError,
    Message,
    MessageToolCall,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
    ToolDefinition,
    Turn,
    Usage,
    chunk_to_json,
    collect,
)
from dsh_replay.adapters import OpenAIChatAdapter, OpenAICompatibleAdapter
from dsh_replay.cassette.replay import Outcome, run_adapter, trace_body
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from dsh_replay.wire.transport import RetryPolicy

ROOT = Path(__file__).resolve().parents[2]
NO_RETRY = RetryPolicy(max_retries=0)
KEY = "sk-test-" + "k" * 24

WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

#: a conversation with every role: system prompt, tool definition, assistant tool calls, tool results
CONVERSATION = GenerateOptions(
    model="m",
    messages=[
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(
            role="assistant",
            tool_calls=(
                MessageToolCall(id=CallId("call_1"), name="get_weather", arguments='{"city":"Paris"}'),
                MessageToolCall(id=CallId("call_2"), name="get_weather", arguments='{"city":"Rome"}'),
            ),
        ),
        Message(role="tool", call_id=CallId("call_1"), content="18 C"),
        Message(role="tool", call_id=CallId("call_2"), content="24 C"),
        Message(role="assistant", content="Paris 18 C, Rome 24 C."),
        Message(role="user", content="Thanks!"),
    ],
    tools=[WEATHER],
    temperature=0.3,
    max_tokens=256,
    extra={"seed": 7},
)

CHAT_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "24 C"},
    {"role": "assistant", "content": "Paris 18 C, Rome 24 C."},
    {"role": "user", "content": "Thanks!"},
]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


# -- helpers shared by the other test modules of these routes -----------------------------------


def sse(*payloads: object, done: bool = True) -> bytes:
    """An SSE body: one ``data:`` event per payload (dicts as JSON), then ``[DONE]``."""
    parts = [f"data: {p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)}\n\n" for p in payloads]
    if done:
        parts.append("data: [DONE]\n\n")
    return "".join(parts).encode()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> dict[str, Any]:
    """One chat.completion.chunk with choice 0."""
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "m", "choices": [choice], **top}


def usage_chunk(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-x", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, **extra}}


async def trace(body: bytes, route: str = "openai", **kwargs: Any) -> Outcome:
    outcome = await trace_body(body, route=route, **kwargs)
    assert outcome.violations == [], outcome.violations
    return outcome


def turn(outcome: Outcome) -> Turn:
    assert outcome.raised is None, outcome.raised
    return collect(outcome.chunks)


def types(outcome: Outcome) -> list[str]:
    return [chunk_to_json(c)["type"] for c in outcome.chunks]


def calls(result: Turn) -> list[tuple[str, str, object]]:
    return [(call.id, call.name, call.parsed) for call in result.tool_calls]


# -- request mapping ------------------------------------------------------------------------------


def test_openai_request_is_the_chat_completions_body() -> None:
    request = OpenAIChatAdapter(api_key=KEY).build_request(CONVERSATION)
    assert request.url == "https://api.openai.com/v1/chat/completions"
    assert request.method == "POST"
    assert request.json == {
        "model": "m",
        "messages": CHAT_MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": CHAT_TOOLS,
        "temperature": 0.3,
        "max_completion_tokens": 256,
        "seed": 7,
    }
    assert dict(request.headers) == {"Authorization": f"Bearer {KEY}", "Accept": "text/event-stream"}


def test_compatible_request_sends_max_tokens_and_its_base_url() -> None:
    adapter = OpenAICompatibleAdapter(api_key=KEY, base_url="https://api.groq.com/openai/v1/")
    request = adapter.build_request(CONVERSATION)
    assert request.url == "https://api.groq.com/openai/v1/chat/completions"
    assert request.json == {
        "model": "m",
        "messages": CHAT_MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": CHAT_TOOLS,
        "temperature": 0.3,
        "max_tokens": 256,
        "seed": 7,
    }
    assert dict(request.headers) == {"Authorization": f"Bearer {KEY}", "Accept": "text/event-stream"}


def test_assistant_text_with_tool_calls_keeps_its_content_and_names_are_sent() -> None:
    options = GenerateOptions(
        model="m",
        messages=[
            Message(role="user", content="hi", name="ada"),
            Message(role="assistant", content="Checking.", tool_calls=(MessageToolCall(id=CallId("c"), name="t"),)),
        ],
    )
    messages = OpenAIChatAdapter(api_key=KEY).build_request(options).json["messages"]  # type: ignore[index]
    assert messages == [
        {"role": "user", "content": "hi", "name": "ada"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
        },
    ]


def test_extra_none_removes_a_key() -> None:
    options = GenerateOptions(model="m", messages=[Message(role="user", content="hi")], extra={"stream_options": None})
    body = OpenAICompatibleAdapter(None, base_url="http://localhost:8080/v1").build_request(options).json
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_compatible_without_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        OpenAICompatibleAdapter(api_key=KEY)


def test_compatible_without_key_sends_no_authorization() -> None:
    request = OpenAICompatibleAdapter(None, base_url="http://localhost:11434/v1").build_request(CONVERSATION)
    assert dict(request.headers) == {"Accept": "text/event-stream"}


def test_openai_without_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="api_key"):
        OpenAIChatAdapter(api_key="")


def test_repr_never_shows_the_key() -> None:
    assert KEY not in repr(OpenAIChatAdapter(api_key=KEY))


@pytest.mark.asyncio
@pytest.mark.parametrize("adapter_cls", [OpenAIChatAdapter, OpenAICompatibleAdapter])
async def test_the_key_travels_only_in_the_authorization_header(adapter_cls: type[OpenAIChatAdapter]) -> None:
    body = sse(chunk({"content": "hi"}), chunk(finish="stop"), usage_chunk(1, 1))
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(body))
        adapter = adapter_cls(api_key=KEY, base_url=emu.base_url + "/v1", retry=NO_RETRY)
        outcome = await run_adapter(adapter, CONVERSATION)
        (request,) = emu.requests
    assert turn(outcome).text == "hi"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["accept"] == "text/event-stream"
    assert request.query == {}
    assert KEY not in request.path
    assert KEY not in request.body.decode()
    assert request.json() == adapter.build_request(CONVERSATION).json


@pytest.mark.asyncio
async def test_a_local_server_gets_no_authorization_header_at_all() -> None:
    body = sse(chunk({"content": "hi"}), chunk(finish="stop"), usage_chunk(1, 1))
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(body))
        adapter = OpenAICompatibleAdapter(None, base_url=emu.base_url + "/v1", retry=NO_RETRY)
        outcome = await run_adapter(adapter, CONVERSATION)
        (request,) = emu.requests
    assert turn(outcome).text == "hi"
    assert "authorization" not in request.headers


# -- event mapping: translator edge cases ------------------------------------------------------------


@pytest.mark.asyncio
async def test_interleaved_parallel_tool_call_fragments_come_out_as_sequential_blocks() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "g", "arguments": '{"y"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x"'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": ":2}"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}),
        chunk(finish="tool_calls"),
        usage_chunk(10, 5),
    )
    outcome = await trace(body)
    assert types(outcome) == [
        "block-start", "tool-call-delta", "tool-call-delta", "block-end",
        "block-start", "tool-call-delta", "tool-call-delta", "block-end", "usage", "finish",
    ]
    result = turn(outcome)
    assert calls(result) == [("call_a", "f", {"x": 1}), ("call_b", "g", {"y": 2})]
    assert result.finish_reason is not None and result.finish_reason.kind == "tool-calls"
    assert result.finish_reason.raw == "tool_calls"


@pytest.mark.asyncio
async def test_text_after_a_tool_call_gets_its_own_block_after_it() -> None:
    body = sse(
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
        chunk({"content": "Done"}),
        chunk({"content": " calling."}),
        chunk(finish="tool_calls"),
        usage_chunk(3, 4),
    )
    result = turn(await trace(body))
    assert [type(b).__name__ for b in result.blocks] == ["ToolCallBlock", "TextBlock"]
    assert result.text == "Done calling."


@pytest.mark.asyncio
async def test_usage_only_chunk_fills_usage_with_cache_and_reasoning_counts() -> None:
    body = sse(
        chunk({"content": "ok"}),
        chunk(finish="stop"),
        usage_chunk(
            50, 7,
            prompt_tokens_details={"cached_tokens": 32, "audio_tokens": 0},
            completion_tokens_details={"reasoning_tokens": 4},
        ),
    )
    result = turn(await trace(body))
    assert result.usage == Usage(input_tokens=50, output_tokens=7, cached_input_tokens=32, reasoning_tokens=4)


@pytest.mark.asyncio
async def test_missing_finish_reason_finishes_stop_at_done_with_no_raw() -> None:
    body = sse(chunk({"content": "4"}), usage_chunk(22, 5))
    result = turn(await trace(body, "openai-compatible"))
    assert result.text == "4"
    assert result.finish_reason is not None
    assert (result.finish_reason.kind, result.finish_reason.raw) == ("stop", None)
    assert result.usage == Usage(input_tokens=22, output_tokens=5)


@pytest.mark.asyncio
async def test_done_without_any_usage_reports_zeros() -> None:
    result = turn(await trace(sse(chunk({"content": "hi"}), chunk(finish="stop")), "openai-compatible"))
    assert result.usage == Usage(input_tokens=0, output_tokens=0)


@pytest.mark.asyncio
async def test_refusal_is_surfaced_as_text() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "I can't"}),
        chunk({"refusal": " help with that."}),
        chunk(finish="stop"),
        usage_chunk(9, 6),
    )
    result = turn(await trace(body))
    assert result.text == "I can't help with that."
    assert result.finish_reason is not None and result.finish_reason.raw == "stop"


@pytest.mark.asyncio
async def test_mistral_content_array_splits_thinking_and_text() -> None:
    body = sse(
        chunk({"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Two plus"}]}]}),
        chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": " two."}]}]}),
        chunk({"content": [{"type": "text", "text": "4"}]}),
        chunk({"content": ""}, "stop", usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
    )
    result = turn(await trace(body, "openai-compatible"))
    assert (result.reasoning, result.text) == ("Two plus two.", "4")
    assert [type(b).__name__ for b in result.blocks] == ["ReasoningBlock", "TextBlock"]


@pytest.mark.asyncio
async def test_whole_tool_calls_without_index_are_told_apart_by_position_and_id() -> None:
    body = sse(
        chunk(
            {"content": None, "tool_calls": [
                {"id": "a1", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                {"id": "b2", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}},
            ]},
            "tool_calls",
            usage={"prompt_tokens": 124, "total_tokens": 146, "completion_tokens": 22},
        ),
    )
    result = turn(await trace(body, "openai-compatible"))
    assert calls(result) == [("a1", "weather", {"city": "Paris"}), ("b2", "weather", {"city": "Rome"})]


@pytest.mark.asyncio
async def test_continuation_with_empty_name_keeps_the_first_name() -> None:
    body = sse(
        chunk({"tool_calls": [{"id": "t-1", "type": "function", "function": {"name": "webSearch", "arguments": ""}, "index": 0}]}),
        chunk({"tool_calls": [{"type": "function", "function": {"name": "", "arguments": '{"query": "x"}'}, "index": 0}]}),
        chunk({"content": ""}, "tool_calls", usage={"prompt_tokens": 1, "completion_tokens": 2}),
    )
    outcome = await trace(body, "openai-compatible")
    assert calls(turn(outcome)) == [("t-1", "webSearch", {"query": "x"})]
    deltas = [chunk_to_json(c) for c in outcome.chunks if chunk_to_json(c)["type"] == "tool-call-delta"]
    assert {d["name"] for d in deltas} == {"webSearch"}


@pytest.mark.asyncio
async def test_a_new_id_on_a_reused_index_is_a_new_call() -> None:
    body = sse(
        chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a":1}'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "g", "arguments": '{"b":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "2}"}}]}),
        chunk(finish="tool_calls"),
        usage_chunk(1, 1),
    )
    assert calls(turn(await trace(body, "openai-compatible"))) == [("c1", "f", {"a": 1}), ("c2", "g", {"b": 2})]


def gemini_call(name: str, arguments: str, **extra: Any) -> dict[str, Any]:
    """A call as generativelanguage.googleapis.com/v1beta/openai streams it: whole, "id": "", no index."""
    return {"function": {"arguments": arguments, "name": name}, "id": "", "type": "function", **extra}


@pytest.mark.asyncio
async def test_gemini_compat_call_with_an_empty_id_gets_a_derived_id_and_finishes_tool_calls() -> None:
    body = sse(chunk({"role": "assistant", "tool_calls": [gemini_call("get_weather", '{"city":"Paris"}')]}, "stop",
                     usage={"completion_tokens": 21, "prompt_tokens": 94, "total_tokens": 115}))
    outcome = await trace(body, "openai-compatible")
    result = turn(outcome)
    assert calls(result) == [("call_0_get_weather", "get_weather", {"city": "Paris"})]
    assert result.finish_reason is not None
    assert (result.finish_reason.kind, result.finish_reason.raw) == ("tool-calls", "stop")
    assert result.usage == Usage(input_tokens=94, output_tokens=21)


@pytest.mark.asyncio
async def test_gemini_compat_calls_in_separate_chunks_stay_separate_calls() -> None:
    # each call in its own chunk, all at position 0 with "id": "": a named entry is a new call
    body = sse(
        chunk({"content": "Checking.", "role": "assistant"}),
        chunk({"role": "assistant", "tool_calls": [gemini_call("get_weather", '{"city":"Paris"}')]}),
        chunk({"role": "assistant", "tool_calls": [gemini_call("get_weather", '{"city":"Tokyo"}')]}),
        chunk({"role": "assistant"}, "stop", usage={"completion_tokens": 30, "prompt_tokens": 97}),
    )
    result = turn(await trace(body, "openai-compatible"))
    assert result.text == "Checking."
    assert calls(result) == [
        ("call_0_get_weather", "get_weather", {"city": "Paris"}),
        ("call_1_get_weather", "get_weather", {"city": "Tokyo"}),
    ]
    assert result.finish_reason is not None and result.finish_reason.kind == "tool-calls"


@pytest.mark.asyncio
async def test_gemini_compat_thought_signature_entries_add_no_call() -> None:
    # Gemini 3 puts a thought signature in extra_content, on the call or in an entry of its own
    signature = {"extra_content": {"google": {"thought_signature": "EjQKMgEMOdbHJChLX75QUCJjyYlm"}}}
    body = sse(
        chunk({"role": "assistant", "tool_calls": [gemini_call("read", '{"path":"a.md"}', **signature), signature]}),
        chunk({"role": "assistant"}, "stop", usage={"completion_tokens": 9, "prompt_tokens": 40}),
    )
    result = turn(await trace(body, "openai-compatible"))
    assert calls(result) == [("call_0_read", "read", {"path": "a.md"})]


@pytest.mark.asyncio
async def test_a_given_id_is_kept_and_derived_ids_count_every_call() -> None:
    # a call that has an id keeps it; an id-less one after it is still numbered by its position
    body = sse(
        chunk({"tool_calls": [{"id": "jm4owj31", "function": {"arguments": "{}", "name": "f"}, "type": "function"},
                              gemini_call("g", "{}")]}, "stop", usage={"completion_tokens": 1, "prompt_tokens": 1}),
    )
    assert calls(turn(await trace(body, "openai-compatible"))) == [("jm4owj31", "f", {}), ("call_1_g", "g", {})]


@pytest.mark.asyncio
async def test_xai_whole_call_in_one_delta_with_cumulative_usage_on_every_chunk() -> None:
    def usage(completion: int) -> dict[str, Any]:
        return {"prompt_tokens": 412, "completion_tokens": completion, "total_tokens": 412 + completion,
                "prompt_tokens_details": {"text_tokens": 412, "cached_tokens": 384}, "num_sources_used": 0}

    call = {"id": "call_58413027", "function": {"name": "get_weather", "arguments": '{"city":"Berlin"}'}, "index": 0, "type": "function"}
    body = sse(
        chunk({"role": "assistant", "tool_calls": [call]}, usage=usage(20)),
        chunk({"content": "", "role": "assistant"}, "tool_calls", usage=usage(29)),
    )
    outcome = await trace(body, "openai-compatible")
    assert types(outcome) == ["block-start", "tool-call-delta", "block-end", "usage", "finish"]
    result = turn(outcome)
    assert calls(result) == [("call_58413027", "get_weather", {"city": "Berlin"})]
    assert result.usage == Usage(input_tokens=412, output_tokens=29, cached_input_tokens=384)


@pytest.mark.asyncio
async def test_groq_usage_in_x_groq_and_reasoning_field() -> None:
    groq_usage = {"prompt_tokens": 17, "completion_tokens": 30, "completion_tokens_details": {"reasoning_tokens": 20}}
    body = sse(
        chunk({"role": "assistant", "content": ""}, x_groq={"id": "req_1"}),
        chunk({"reasoning": "Think", "channel": "analysis"}),
        chunk({"reasoning": "ing."}),
        chunk({"content": "Answer"}),
        chunk({}, "stop", x_groq={"id": "req_1", "usage": groq_usage}),
    )
    result = turn(await trace(body, "openai-compatible"))
    assert (result.reasoning, result.text) == ("Thinking.", "Answer")
    assert result.usage == Usage(input_tokens=17, output_tokens=30, reasoning_tokens=20)


@pytest.mark.asyncio
async def test_comments_and_an_empty_first_chunk_are_ignored() -> None:
    body = b": OPENROUTER PROCESSING\n\n" + sse(
        {"id": "", "choices": [], "prompt_filter_results": [{"prompt_index": 0}]},
        chunk({"content": "hey"}),
        chunk(finish="stop"),
        usage_chunk(2, 1),
    )
    assert turn(await trace(body, "openai-compatible")).text == "hey"


@pytest.mark.asyncio
async def test_only_choice_zero_is_translated_when_n_is_above_one() -> None:
    def choice(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "x", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}

    body = sse(
        choice(0, {"content": "A"}), choice(1, {"content": "B"}), choice(0, {"content": "a"}),
        choice(1, {"content": "b"}, "length"), choice(0, {}, "stop"), usage_chunk(5, 4),
    )
    result = turn(await trace(body))
    assert result.text == "Aa"
    assert result.finish_reason is not None and result.finish_reason.raw == "stop"


@pytest.mark.asyncio
async def test_body_without_done_finishes_when_reason_and_usage_arrived() -> None:
    body = sse(chunk({"content": "ok"}), chunk(finish="stop", usage={"prompt_tokens": 3, "completion_tokens": 1}), done=False)
    result = turn(await trace(body, "openai-compatible"))
    assert result.finish_reason is not None and result.finish_reason.raw == "stop"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "body",
    [
        sse(chunk({"content": "Hel"}), chunk({"content": "lo"}), done=False),
        sse(chunk({"content": "Hel"}), chunk(finish="stop"), done=False),  # no usage and no [DONE]
        sse(chunk({"content": "Hel"}), done=False) + b'data: {"id":"chatcmpl-x","choices":[{"index":0,"del',
    ],
    ids=["after-an-event", "after-finish-reason", "inside-an-event"],
)
async def test_truncated_body_is_an_interrupted_stream_never_a_finish(body: bytes) -> None:
    outcome = await trace_body(body, route="openai")
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert "finish" not in types(outcome) and "usage" not in types(outcome)
    assert types(outcome) == ["block-start", "text-delta", "text-delta"][: len(outcome.chunks)]


@pytest.mark.asyncio
async def test_error_object_in_the_stream_raises_the_typed_error() -> None:
    error = {"error": {"message": "The server had an error while processing your request.", "type": "server_error",
                       "param": None, "code": None}}
    outcome = await trace_body(sse(chunk({"content": "Par"}), error, done=False), route="openai")
    assert isinstance(outcome.raised, ServerError)
    assert outcome.raised.message == "The server had an error while processing your request."
    assert outcome.raised.route == "openai"
    assert types(outcome) == ["block-start", "text-delta"]


@pytest.mark.asyncio
async def test_error_beside_choices_raises_even_after_a_finish_reason() -> None:
    # OpenRouter: a chunk with choices and a top-level error, then [DONE]
    late = chunk({"content": ""}, error={"code": 400, "message": "Provider returned error"})
    outcome = await trace_body(sse(chunk({"content": "x"}, "length"), late), route="openai-compatible")
    assert isinstance(outcome.raised, InvalidRequestError)
    assert outcome.raised.message == "Provider returned error"


@pytest.mark.asyncio
async def test_event_error_block_raises_with_the_provider_message() -> None:
    payload = {"error": {"message": "Tool call validation failed", "type": "invalid_request_error",
                         "code": "tool_use_failed", "status_code": 400}}
    body = sse(chunk({"reasoning": "hm"}), done=False) + b"event: error\ndata: " + json.dumps(payload).encode() + b"\n\n"
    outcome = await trace_body(body, route="openai-compatible")
    assert isinstance(outcome.raised, InvalidRequestError)
    assert outcome.raised.message == "Tool call validation failed"
    assert outcome.raised.provider_code == "tool_use_failed"


@pytest.mark.asyncio
async def test_drop_reasoning_drops_reasoning_content() -> None:
    body = sse(
        chunk({"role": "assistant", "content": None, "reasoning_content": "Let me think."}),
        chunk({"content": "42", "reasoning_content": None}),
        chunk({"content": ""}, "stop", usage={"prompt_tokens": 5, "completion_tokens": 9}),
    )
    kept = turn(await trace(body, "openai-compatible"))
    dropped = turn(await trace(body, "openai-compatible", drop_reasoning=True))
    assert (kept.reasoning, kept.text) == ("Let me think.", "42")
    assert (dropped.reasoning, dropped.text, len(dropped.blocks)) == ("", "42", 1)


# -- HTTP errors --------------------------------------------------------------------------------------


async def _failing(adapter_cls: type[OpenAIChatAdapter], response: ScriptedResponse, **kwargs: Any) -> Outcome:
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat/completions", response)
        adapter = adapter_cls(api_key=KEY, base_url=emu.base_url + "/v1", retry=NO_RETRY, **kwargs)
        return await run_adapter(adapter, CONVERSATION)


@pytest.mark.asyncio
@pytest.mark.parametrize("adapter_cls", [OpenAIChatAdapter, OpenAICompatibleAdapter])
@pytest.mark.parametrize(
    ("status", "payload", "headers", "error_type", "message"),
    [
        (401, {"error": {"message": "Incorrect API key provided: sk-test-****kkkk.", "type": "invalid_request_error",
                         "param": None, "code": "invalid_api_key"}}, {}, AuthenticationError,
         "Incorrect API key provided: sk-test-****kkkk."),
        (429, {"error": {"message": "Rate limit reached for requests", "type": "requests", "param": None,
                         "code": "rate_limit_exceeded"}}, {"retry-after": "20"}, RateLimitError,
         "Rate limit reached for requests"),
        (500, {"error": {"message": "The server had an error processing your request.", "type": "server_error",
                         "param": None, "code": None}}, {"x-request-id": "req_500"}, ServerError,
         "The server had an error processing your request."),
    ],
    ids=["401", "429", "500"],
)
async def test_http_errors_are_typed_with_the_provider_message(
    adapter_cls: type[OpenAIChatAdapter], status: int, payload: dict[str, Any], headers: dict[str, str],
    error_type: type[ProviderError], message: str,
) -> None:
    outcome = await _failing(adapter_cls, ScriptedResponse.json(payload, status=status, headers=headers))
    assert type(outcome.raised) is error_type
    assert outcome.chunks == []
    error = outcome.raised
    assert isinstance(error, ProviderError)
    assert error.message.startswith(message)
    assert (error.status, error.route) == (status, adapter_cls.route)
    if status == 429:
        assert isinstance(error, RateLimitError) and error.retry_after == 20.0
    if status == 500:
        assert error.request_id == "req_500"
