"""OllamaAdapter: request mapping, event mapping, cassettes, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_replay import (
    AuthenticationError,
    BlockEnd,
    CallId,
    GenerateOptions,
    InvalidRequestError,
    MalformedStreamError,
    Message,
    MessageToolCall,
    ReasoningBlock,
    ReasoningDelta,
    ServerError,
    StreamInterruptedError,
    ToolDefinition,
    Usage,
    collect,
)
from dsh_replay.adapters import OllamaAdapter
from dsh_replay.cassette.replay import Outcome, run_adapter, trace_body
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from dsh_replay.wire.transport import RetryPolicy

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

CONVERSATION = GenerateOptions(
    model="qwen3:8b",
    messages=[
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(
            role="assistant",
            content="",
            tool_calls=(
                MessageToolCall(id=CallId("call_0_get_weather"), name="get_weather", arguments='{"city": "Paris"}'),
                MessageToolCall(id=CallId("call_1_get_weather"), name="get_weather", arguments='{"city": "Rome"}'),
            ),
        ),
        Message(role="tool", call_id=CallId("call_0_get_weather"), content="18°C"),
        Message(role="tool", call_id=CallId("call_1_get_weather"), content="25°C"),
        Message(role="assistant", content="Paris 18°C, Rome 25°C."),
        Message(role="user", content="Thanks!"),
    ],
    tools=[WEATHER],
    temperature=0.3,
    max_tokens=128,
    extra={"options": {"num_ctx": 8192}, "think": False},
)


# -- request mapping -------------------------------------------------------------


def test_conversation_maps_to_the_exact_chat_body() -> None:
    request = OllamaAdapter("").build_request(CONVERSATION)
    assert request.url == "http://localhost:11434/api/chat"
    assert request.json == {
        "model": "qwen3:8b",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
                ],
            },
            {"role": "tool", "content": "18°C", "tool_name": "get_weather"},
            {"role": "tool", "content": "25°C", "tool_name": "get_weather"},
            {"role": "assistant", "content": "Paris 18°C, Rome 25°C."},
            {"role": "user", "content": "Thanks!"},
        ],
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                },
            }
        ],
        "options": {"temperature": 0.3, "num_predict": 128, "num_ctx": 8192},
        "think": False,
    }


def test_no_key_needed_and_a_given_key_goes_only_in_authorization() -> None:
    assert OllamaAdapter.requires_api_key is False
    bare = OllamaAdapter("").build_request(CONVERSATION)
    assert "authorization" not in {name.lower() for name in bare.headers}
    keyed = OllamaAdapter("ollama-test-key", base_url="https://ollama.example/").build_request(CONVERSATION)
    assert keyed.url == "https://ollama.example/api/chat"
    assert "ollama-test-key" not in keyed.url
    assert keyed.headers["authorization"] == "Bearer ollama-test-key"


@pytest.mark.asyncio
async def test_request_reaches_the_server_without_authorization() -> None:
    body = line(content="ok") + line(done=True, done_reason="stop", prompt_eval_count=3, eval_count=1)
    with ProviderEmulator() as emu:
        emu.add("POST", "/api/chat", ScriptedResponse.streaming(body.encode(), content_type="application/x-ndjson"))
        outcome = await run_adapter(OllamaAdapter("", base_url=emu.base_url), CONVERSATION)
        sent = emu.requests[0]
    assert outcome.raised is None and collect(outcome.chunks).text == "ok"
    assert "authorization" not in sent.headers
    assert sent.json() == OllamaAdapter("").build_request(CONVERSATION).json


# -- event mapping: inline bodies ------------------------------------------------------


def line(content: str | None = None, *, thinking: str | None = None, tool_calls: tuple[Any, ...] | None = None,
         **fields: Any) -> str:
    message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    if thinking is not None:
        message["thinking"] = thinking
    if tool_calls is not None:
        message["tool_calls"] = list(tool_calls)
    payload = {"model": "qwen3", "created_at": "2025-06-12T09:41:07.127341Z", "message": message,
               "done": fields.pop("done", False), **fields}
    return json.dumps(payload) + "\n"


DONE = line(done=True, done_reason="stop", prompt_eval_count=169, eval_count=15)


async def trace(body: str, **kwargs: Any) -> Outcome:
    return await trace_body(body.encode(), route="ollama", **kwargs)


@pytest.mark.asyncio
async def test_tool_calls_get_stable_derived_ids_unless_given() -> None:
    body = line(tool_calls=(
        {"function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}},
        {"id": "call_x1", "function": {"index": 1, "name": "get_time", "arguments": {}}},
    )) + line(tool_calls=({"function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},)) + DONE
    first, second = await trace(body), await trace(body)
    assert first.violations == [] and first.golden_bytes() == second.golden_bytes()
    turn = collect(first.chunks)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("call_0_get_weather", "get_weather", '{"city":"Tokyo"}'),
        ("call_x1", "get_time", "{}"),
        ("call_2_get_weather", "get_weather", '{"city": "Rome"}'),
    ]
    assert turn.finish_reason is not None
    assert (turn.finish_reason.kind, turn.finish_reason.raw) == ("tool-calls", "stop")
    assert turn.usage == Usage(input_tokens=169, output_tokens=15)


@pytest.mark.asyncio
async def test_thinking_is_reasoning_and_can_be_dropped() -> None:
    body = line(thinking="Let me ") + line(thinking="think.") + line("Answer") + line(".") + DONE
    outcome = await trace(body)
    assert outcome.violations == []
    blocks = [c.block for c in outcome.chunks if isinstance(c, BlockEnd)]
    assert blocks[0] == ReasoningBlock(text="Let me think.")
    assert collect(outcome.chunks).text == "Answer."
    dropped = await trace(body, drop_reasoning=True)
    assert not any(isinstance(c, ReasoningDelta) for c in dropped.chunks)
    assert dropped.violations == [] and collect(dropped.chunks).text == "Answer."


@pytest.mark.asyncio
async def test_content_on_the_done_line_comes_before_the_finish() -> None:
    body = line("That") + line("!", done=True, done_reason="length", prompt_eval_count=4, eval_count=2)
    outcome = await trace(body)
    assert outcome.violations == []
    turn = collect(outcome.chunks)
    assert turn.text == "That!" and turn.finish_reason is not None and turn.finish_reason.raw == "length"


@pytest.mark.asyncio
async def test_generate_endpoint_lines_are_accepted() -> None:
    body = "".join(json.dumps({"model": "m", "created_at": "t", "response": piece, "done": False}) + "\n"
                   for piece in ("Rab", "bits")) + json.dumps({"model": "m", "response": "", "done": True,
                                                               "done_reason": "stop", "context": [1, 2]}) + "\n"
    turn = collect((await trace(body)).chunks)
    assert turn.text == "Rabbits" and turn.usage == Usage(input_tokens=0, output_tokens=0)


@pytest.mark.asyncio
async def test_error_line_raises_a_server_error_with_the_message() -> None:
    body = line("Once") + json.dumps({"error": "an error was encountered while running the model: unexpected EOF"}) + "\n"
    outcome = await trace(body)
    assert type(outcome.raised) is ServerError
    assert outcome.raised.message == "an error was encountered while running the model: unexpected EOF"
    assert outcome.raised.status is None
    assert [type(c).__name__ for c in outcome.chunks] == ["BlockStart", "TextDelta"]


@pytest.mark.asyncio
@pytest.mark.parametrize("body", [
    pytest.param(line("Hello") + line(" there"), id="no-done-line"),
    pytest.param(line("Hello") + '{"model":"qwen3","message":{"role":"assistant","content":" th', id="cut-mid-line"),
    pytest.param("", id="empty"),
])
async def test_missing_done_raises_stream_interrupted(body: str) -> None:
    outcome = await trace(body)
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert not any(type(c).__name__ == "Finish" for c in outcome.chunks)


@pytest.mark.asyncio
async def test_a_complete_line_that_is_not_json_is_malformed() -> None:
    outcome = await trace(line("Hello") + '{"model": oops}\n' + DONE)
    assert isinstance(outcome.raised, MalformedStreamError)
    assert outcome.raised.raw == b'{"model": oops}'


@pytest.mark.asyncio
async def test_tool_call_without_a_name_is_malformed() -> None:
    outcome = await trace(line(tool_calls=({"function": {"arguments": {}}},)) + DONE)
    assert isinstance(outcome.raised, MalformedStreamError)


@pytest.mark.asyncio
@pytest.mark.parametrize("fragmentation", ["bytes", "random:3", "random:11"])
async def test_inline_body_gives_the_same_chunks_under_any_fragmentation(fragmentation: str) -> None:
    body = (line(thinking="Pensée…") + line("Grüße 東京 🌧️")
            + line(tool_calls=({"function": {"name": "f", "arguments": {"q": "é"}}},)) + DONE).replace("\n", "\r\n")
    single = await trace(body)
    assert single.violations == [] and single.raised is None
    assert (await trace(body, fragmentation=fragmentation)).golden_bytes() == single.golden_bytes()


# -- HTTP errors ---------------------------------------------------------------------


async def _fail_with(response: ScriptedResponse, key: str = "") -> BaseException | None:
    options = GenerateOptions(model="qwen3:8b", messages=[Message(role="user", content="hi")])
    with ProviderEmulator() as emu:
        emu.add("POST", "/api/chat", response)
        adapter = OllamaAdapter(key, base_url=emu.base_url, retry=RetryPolicy(max_retries=0))
        outcome = await run_adapter(adapter, options)
        assert len(emu.requests) == 1
    assert outcome.chunks == []
    return outcome.raised


@pytest.mark.asyncio
async def test_http_404_unknown_model_is_an_invalid_request() -> None:
    error = await _fail_with(ScriptedResponse.json({"error": "model 'qwen3:8b' not found"}, status=404))
    assert isinstance(error, InvalidRequestError)
    assert error.message == "model 'qwen3:8b' not found" and error.status == 404


@pytest.mark.asyncio
async def test_http_401_with_a_key_is_an_authentication_error() -> None:
    error = await _fail_with(ScriptedResponse.json({"error": "unauthorized"}, status=401), key="ollama-test-key")
    assert isinstance(error, AuthenticationError)
    assert error.message.startswith("unauthorized")


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [500, 503])
async def test_http_5xx_is_a_server_error(status: int) -> None:
    error = await _fail_with(ScriptedResponse.json(
        {"error": "server busy, please try again.  maximum pending requests exceeded"},
        status=status, headers={"retry-after": "20"},
    ))
    assert isinstance(error, ServerError)
    assert error.message == "server busy, please try again.  maximum pending requests exceeded"
    assert error.status == status
