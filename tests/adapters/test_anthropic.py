"""AnthropicAdapter: request mapping, event mapping, cassettes, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_replay import (
    AuthenticationError,
    BlockEnd,
    CallId,
    ConfigError,
    GenerateOptions,
    MalformedStreamError,
    Message,
    MessageToolCall,
    OverloadedError,
    RateLimitError,
    ReasoningBlock,
    ReasoningDelta,
    StreamInterruptedError,
    ToolCallDelta,
    ToolDefinition,
    Usage,
    check_chunk_sequence,
    collect,
)
from dsh_replay.adapters import AnthropicAdapter
from dsh_replay.cassette.replay import Outcome, run_adapter, trace_body
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from dsh_replay.wire.transport import RetryPolicy

KEY = "test-anthropic-key"

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

CONVERSATION = GenerateOptions(
    model="claude-sonnet-4-5",
    messages=[
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=(
                MessageToolCall(id=CallId("toolu_A"), name="get_weather", arguments='{"city": "Paris"}'),
                MessageToolCall(id=CallId("toolu_B"), name="get_weather", arguments=""),
            ),
        ),
        Message(role="tool", call_id=CallId("toolu_A"), content="18°C"),
        Message(role="tool", call_id=CallId("toolu_B"), content="error: no city"),
        Message(role="user", content="And tomorrow?"),
        Message(role="assistant", content="I cannot forecast."),
    ],
    tools=[WEATHER],
    temperature=0.3,
)


# -- request mapping -------------------------------------------------------------


def test_conversation_maps_to_the_exact_messages_body() -> None:
    request = AnthropicAdapter(KEY).build_request(CONVERSATION)
    assert request.url == "https://api.anthropic.com/v1/messages"
    assert request.json == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "stream": True,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_B", "name": "get_weather", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_A", "content": "18°C"},
                    {"type": "tool_result", "tool_use_id": "toolu_B", "content": "error: no city"},
                ],
            },
            {"role": "user", "content": "And tomorrow?"},
            {"role": "assistant", "content": "I cannot forecast."},
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            }
        ],
        "temperature": 0.3,
    }


def test_key_and_version_only_in_headers() -> None:
    request = AnthropicAdapter(KEY, base_url="https://proxy.example/").build_request(CONVERSATION)
    assert request.url == "https://proxy.example/v1/messages"
    assert KEY not in request.url
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in {name.lower() for name in request.headers}


def test_max_tokens_extra_and_several_system_messages() -> None:
    options = GenerateOptions(
        model="m",
        messages=[Message(role="system", content="A."), Message(role="system", content="B."), Message(role="user", content="hi")],
        max_tokens=77,
        extra={"thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u1"}},
    )
    body = AnthropicAdapter(KEY).build_request(options).json
    assert isinstance(body, dict)
    assert body["max_tokens"] == 77
    assert body["system"] == "A.\n\nB."
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["metadata"] == {"user_id": "u1"}
    assert "tools" not in body and "temperature" not in body


def test_signed_thinking_of_a_tool_calling_turn_goes_back_first() -> None:
    from dsh_replay import ReasoningBlock
    from dsh_replay.adapters.anthropic import request_body

    turn = Message(
        role="assistant",
        reasoning=(
            ReasoningBlock(text="Need the weather tool.", signature="EqQBCkgIARABGAIiQ"),
            ReasoningBlock(text="unsigned: never sent"),
        ),
        tool_calls=(MessageToolCall(id=CallId("toolu_A"), name="get_weather", arguments='{"city":"Paris"}'),),
    )
    options = GenerateOptions(
        model="claude-sonnet-4-5",
        messages=[Message(role="user", content="Weather?"), turn, Message(role="tool", call_id=CallId("toolu_A"), content="18C")],
    )
    assert request_body(options)["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Need the weather tool.", "signature": "EqQBCkgIARABGAIiQ"},
            {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {"city": "Paris"}},
        ],
    }


def test_history_arguments_that_are_not_an_object_are_refused() -> None:
    options = GenerateOptions(
        model="m",
        messages=[Message(role="assistant", tool_calls=(MessageToolCall(id=CallId("t"), name="f", arguments="[1]"),))],
    )
    with pytest.raises(ConfigError, match=r"'f'.*not a JSON object"):
        AnthropicAdapter(KEY).build_request(options)


def test_an_empty_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="api_key"):
        AnthropicAdapter("")


@pytest.mark.asyncio
async def test_request_reaches_the_provider_with_headers_and_body() -> None:
    body = sse(message_start(5), text_start(0), text_delta(0, "ok"), stop(0), message_delta("end_turn", 1), {"type": "message_stop"})
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/messages", ScriptedResponse.streaming(body.encode()))
        outcome = await run_adapter(AnthropicAdapter(KEY, base_url=emu.base_url), CONVERSATION)
        sent = emu.requests[0]
    assert outcome.raised is None and collect(outcome.chunks).text == "ok"
    assert sent.path == "/v1/messages" and sent.query == {}
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.json() == AnthropicAdapter(KEY).build_request(CONVERSATION).json


# -- event mapping: inline bodies ------------------------------------------------------


def sse(*payloads: dict[str, Any], event: bool = True) -> str:
    """An Anthropic SSE body: ``event:`` + ``data:`` per payload."""
    out = ""
    for payload in payloads:
        head = f"event: {payload['type']}\n" if event else ""
        out += f"{head}data: {json.dumps(payload)}\n\n"
    return out


def message_start(input_tokens: int, **usage: int) -> dict[str, Any]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude",
               "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage}}
    return {"type": "message_start", "message": message}


def text_start(index: int) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}


def tool_start(index: int, call_id: str, name: str, kind: str = "tool_use") -> dict[str, Any]:
    return {"type": "content_block_start", "index": index,
            "content_block": {"type": kind, "id": call_id, "name": name, "input": {}}}


def json_delta(index: int, fragment: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": fragment}}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(reason: str, output_tokens: int, **usage: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens, **usage}}


END = {"type": "message_stop"}


async def trace(body: str, **kwargs: Any) -> Outcome:
    return await trace_body(body.encode(), route="anthropic", **kwargs)


@pytest.mark.asyncio
async def test_tool_use_with_empty_input_gets_empty_object_arguments() -> None:
    body = sse(message_start(9), tool_start(0, "toolu_1", "list_files"), json_delta(0, ""), stop(0),
               message_delta("tool_use", 4), END)
    outcome = await trace(body)
    assert outcome.violations == [] and outcome.raised is None
    turn = collect(outcome.chunks)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("toolu_1", "list_files", "{}")]
    assert turn.finish_reason is not None and turn.finish_reason.kind == "tool-calls"
    assert turn.finish_reason.raw == "tool_use"


@pytest.mark.asyncio
async def test_tool_arguments_are_passed_through_raw_per_fragment() -> None:
    body = sse(message_start(9), tool_start(0, "toolu_1", "get_weather"), json_delta(0, ""),
               json_delta(0, '{"city": '), json_delta(0, '"Paris"}'), stop(0), message_delta("tool_use", 4), END)
    outcome = await trace(body)
    deltas = [c.arguments_delta for c in outcome.chunks if isinstance(c, ToolCallDelta)]
    assert deltas == ['{"city": ', '"Paris"}']
    assert collect(outcome.chunks).tool_calls[0].parsed == {"city": "Paris"}


@pytest.mark.asyncio
async def test_thinking_with_signature_becomes_a_signed_reasoning_block() -> None:
    body = sse(
        message_start(9),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "think."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBsig=="}},
        stop(0), text_start(1), text_delta(1, "Done."), stop(1), message_delta("end_turn", 20), END,
    )
    outcome = await trace(body)
    assert outcome.violations == []
    ends = [c.block for c in outcome.chunks if isinstance(c, BlockEnd)]
    assert ends[0] == ReasoningBlock(text="Let me think.", signature="EqQBsig==")
    assert collect(outcome.chunks).text == "Done."

    dropped = await trace(body, drop_reasoning=True)
    assert not any(isinstance(c, ReasoningDelta) for c in dropped.chunks)
    assert [c.block for c in dropped.chunks if isinstance(c, BlockEnd)] == [ends[1]]
    assert dropped.violations == []


@pytest.mark.asyncio
async def test_redacted_thinking_produces_no_block() -> None:
    body = sse(
        message_start(9),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}},
        stop(0), text_start(1), text_delta(1, "Hi"), stop(1), message_delta("end_turn", 3), END,
    )
    outcome = await trace(body)
    assert outcome.violations == []
    assert [type(c.block).__name__ for c in outcome.chunks if isinstance(c, BlockEnd)] == ["TextBlock"]


@pytest.mark.asyncio
async def test_server_tool_blocks_are_skipped_and_do_not_make_a_tool_calls_finish() -> None:
    body = sse(
        message_start(9),
        tool_start(0, "srvtoolu_1", "web_search", kind="server_tool_use"),
        json_delta(0, '{"query": "x"}'), stop(0),
        {"type": "content_block_start", "index": 1, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}},
        stop(1),
        {"type": "content_block_start", "index": 2, "content_block": {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "ask", "input": {}, "server_name": "wiki"}},
        stop(2),
        text_start(3), text_delta(3, "Found it."), stop(3), message_delta("end_turn", 30), END,
    )
    outcome = await trace(body)
    assert outcome.violations == []
    turn = collect(outcome.chunks)
    assert turn.tool_calls == () and turn.text == "Found it."
    assert turn.finish_reason is not None and turn.finish_reason.kind == "stop"


@pytest.mark.asyncio
async def test_server_tool_then_client_tool_keeps_only_the_client_call() -> None:
    body = sse(
        message_start(9),
        tool_start(0, "srvtoolu_1", "tool_search", kind="server_tool_use"), json_delta(0, '{"q": 1}'), stop(0),
        tool_start(1, "toolu_9", "get_rate"), json_delta(1, '{"from": "USD"}'), stop(1),
        message_delta("tool_use", 30), END,
    )
    outcome = await trace(body)
    assert [(c.id, c.arguments) for c in collect(outcome.chunks).tool_calls] == [("toolu_9", '{"from": "USD"}')]
    assert outcome.violations == []


@pytest.mark.asyncio
async def test_message_delta_input_tokens_override_message_start() -> None:
    body = sse(message_start(43, cache_read_input_tokens=7), text_start(0), text_delta(0, "pong"), stop(0),
               message_delta("end_turn", 2, input_tokens=61), END)
    usage = collect((await trace(body)).chunks).usage
    assert usage == Usage(input_tokens=61, output_tokens=2, cached_input_tokens=7)

    without = sse(message_start(43), text_start(0), text_delta(0, "pong"), stop(0), message_delta("end_turn", 2), END)
    assert collect((await trace(without)).chunks).usage == Usage(input_tokens=43, output_tokens=2)


@pytest.mark.asyncio
async def test_duplicate_message_start_is_ignored() -> None:
    body = sse(message_start(17), text_start(0), text_delta(0, "Hello"), message_start(99), text_delta(0, ", World!"),
               stop(0), message_delta("end_turn", 227), END)
    outcome = await trace(body)
    assert outcome.violations == [] and outcome.raised is None
    turn = collect(outcome.chunks)
    assert turn.text == "Hello, World!"
    assert turn.usage == Usage(input_tokens=17, output_tokens=227)


@pytest.mark.asyncio
async def test_ping_and_unknown_events_are_ignored_and_event_lines_optional() -> None:
    body = sse(message_start(3), {"type": "ping"}, text_start(0), {"type": "future_event", "x": 1}, text_delta(0, "a"),
               stop(0), message_delta("end_turn", 1), END, event=False)
    outcome = await trace(body)
    assert outcome.violations == [] and collect(outcome.chunks).text == "a"


@pytest.mark.asyncio
async def test_error_event_mid_stream_raises_overloaded_after_the_chunks_so_far() -> None:
    body = sse(message_start(3), text_start(0), text_delta(0, "Once"),
               {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    outcome = await trace(body)
    assert isinstance(outcome.raised, OverloadedError)
    assert outcome.raised.message == "Overloaded"
    assert outcome.raised.provider_code == "overloaded_error"
    assert [type(c).__name__ for c in outcome.chunks] == ["BlockStart", "TextDelta"]


@pytest.mark.asyncio
async def test_api_error_event_is_a_server_error() -> None:
    from dsh_replay import ServerError

    body = sse(message_start(3), {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
    outcome = await trace(body)
    assert isinstance(outcome.raised, ServerError) and outcome.raised.message == "Internal server error"


@pytest.mark.parametrize(
    "payloads",
    [
        pytest.param((message_start(3), text_start(0), text_delta(0, "cut")), id="mid-block"),
        pytest.param((message_start(3), text_start(0), text_delta(0, "x"), stop(0), message_delta("end_turn", 1)), id="before-message_stop"),
        pytest.param((), id="empty-body"),
    ],
)
@pytest.mark.asyncio
async def test_truncated_body_raises_stream_interrupted(payloads: tuple[dict[str, Any], ...]) -> None:
    outcome = await trace(sse(*payloads))
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert "message_stop" in str(outcome.raised)
    assert not any(type(c).__name__ == "Finish" for c in outcome.chunks)


@pytest.mark.asyncio
async def test_tool_json_cut_by_max_tokens_is_closed_raw_and_flagged_by_p7j() -> None:
    body = sse(message_start(450), tool_start(0, "toolu_1", "make_file"), json_delta(0, ""),
               json_delta(0, '{"filename": "taxes.txt", "lines": ["# TAX'), message_delta("max_tokens", 124), END)
    outcome = await trace(body)
    assert outcome.raised is None
    assert [v.rule for v in outcome.violations] == ["P7j"]
    assert check_chunk_sequence(outcome.chunks, json_arguments=False) == []
    turn = collect(outcome.chunks)
    assert turn.tool_calls[0].arguments == '{"filename": "taxes.txt", "lines": ["# TAX'
    assert turn.finish_reason is not None and turn.finish_reason.raw == "max_tokens"


@pytest.mark.asyncio
async def test_data_that_is_not_json_is_malformed() -> None:
    outcome = await trace("event: message_start\ndata: {not json\n\n" + sse(message_start(3)))
    assert isinstance(outcome.raised, MalformedStreamError)
    assert outcome.raised.raw == b"{not json"


@pytest.mark.parametrize("fragmentation", ["bytes", "random:3", "random:11"])
@pytest.mark.asyncio
async def test_inline_body_gives_the_same_chunks_under_any_fragmentation(fragmentation: str) -> None:
    body = sse(message_start(3), text_start(0), text_delta(0, "Grüße 東京 🌧️"), stop(0),
               tool_start(1, "toolu_1", "f"), json_delta(1, '{"a": "é'), json_delta(1, '"}'), stop(1),
               message_delta("tool_use", 9), END).replace("\n", "\r\n")
    single = await trace(body)
    assert single.violations == [] and single.raised is None
    assert (await trace(body, fragmentation=fragmentation)).golden_bytes() == single.golden_bytes()


# -- HTTP errors ---------------------------------------------------------------------


async def _fail_with(response: ScriptedResponse) -> BaseException | None:
    options = GenerateOptions(model="m", messages=[Message(role="user", content="hi")])
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/messages", response)
        adapter = AnthropicAdapter(KEY, base_url=emu.base_url, retry=RetryPolicy(max_retries=0))
        outcome = await run_adapter(adapter, options)
        assert len(emu.requests) == 1
    assert outcome.chunks == []
    return outcome.raised


@pytest.mark.asyncio
async def test_http_401_is_an_authentication_error() -> None:
    error = await _fail_with(ScriptedResponse.json(
        {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
        status=401, headers={"request-id": "req_401"},
    ))
    assert isinstance(error, AuthenticationError)
    assert error.message.startswith("invalid x-api-key")
    assert (error.status, error.provider_code, error.request_id) == (401, "authentication_error", "req_401")


@pytest.mark.asyncio
async def test_http_429_is_a_rate_limit_error_with_retry_after() -> None:
    error = await _fail_with(ScriptedResponse.json(
        {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}},
        status=429, headers={"retry-after": "20"},
    ))
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 20.0 and error.status == 429
    assert error.message == "Number of requests has exceeded your rate limit"


@pytest.mark.asyncio
async def test_http_529_is_an_overloaded_error() -> None:
    error = await _fail_with(ScriptedResponse.json(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529,
    ))
    assert isinstance(error, OverloadedError)
    assert error.message == "Overloaded" and error.status == 529
