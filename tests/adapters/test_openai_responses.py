"""Route ``openai-responses``: request mapping, typed events, errors, cassettes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_replay import (
    AuthenticationError,
    ConfigError,
    GenerateOptions,
    Message,
    ProviderError,
    RateLimitError,
    ServerError,
    StreamInterruptedError,
    Usage,
)
from dsh_replay.adapters import OpenAIResponsesAdapter
from dsh_replay.cassette.replay import run_adapter, trace_body
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

from .test_openai_chat import (
    CONVERSATION,
    KEY,
    NO_RETRY,
    calls,
    trace,
    turn,
    types,
)

ROUTE = "openai-responses"
FC = "fc_68b1"
MSG = "msg_68b2"


def events(*payloads: dict[str, Any], event_lines: bool = True, done: bool = False) -> bytes:
    """A Responses body: ``event: <type>`` + ``data:`` per payload (OpenRouter: no event lines, [DONE])."""
    out = []
    for number, payload in enumerate(payloads):
        payload = {**payload, "sequence_number": number}
        head = f"event: {payload['type']}\n" if event_lines else ""
        out.append(f"{head}data: {json.dumps(payload, ensure_ascii=False)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def response(status: str, usage: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": status, "output": [], "usage": usage, **fields}


USAGE = {
    "input_tokens": 90,
    "input_tokens_details": {"cached_tokens": 64},
    "output_tokens": 40,
    "output_tokens_details": {"reasoning_tokens": 16},
    "total_tokens": 130,
}
CREATED = {"type": "response.created", "response": response("in_progress")}
COMPLETED = {"type": "response.completed", "response": response("completed", USAGE)}


def added(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def done(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def text_delta(item_id: str, index: int, delta: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "item_id": item_id, "output_index": index, "content_index": 0, "delta": delta}


def args_delta(item_id: str, index: int, delta: str) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index, "delta": delta}


def function_call(item_id: str, call_id: str, name: str, arguments: str = "", status: str = "in_progress") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments, "status": status}


def message(item_id: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}


# -- request mapping -------------------------------------------------------------------------------------


def test_request_maps_every_role_to_input_items() -> None:
    request = OpenAIResponsesAdapter(api_key=KEY).build_request(CONVERSATION)
    assert request.url == "https://api.openai.com/v1/responses"
    assert request.json == {
        "model": "m",
        "input": [
            {"type": "message", "role": "system", "content": "Be brief."},
            {"type": "message", "role": "user", "content": "Weather in Paris and Rome?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
            {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": '{"city":"Rome"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
            {"type": "function_call_output", "call_id": "call_2", "output": "24 C"},
            {"type": "message", "role": "assistant", "content": "Paris 18 C, Rome 24 C."},
            {"type": "message", "role": "user", "content": "Thanks!"},
        ],
        "stream": True,
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Get the weather.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "strict": False,
            }
        ],
        "temperature": 0.3,
        "max_output_tokens": 256,
        "seed": 7,
    }
    assert dict(request.headers) == {"Authorization": f"Bearer {KEY}", "Accept": "text/event-stream"}


def test_extra_overrides_and_removes_keys() -> None:
    options = GenerateOptions(
        model="o4-mini",
        messages=[Message(role="user", content="hi")],
        extra={"reasoning": {"effort": "low", "summary": "auto"}, "stream": None, "store": False},
    )
    body = OpenAIResponsesAdapter(api_key=KEY).build_request(options).json
    assert body == {
        "model": "o4-mini",
        "input": [{"type": "message", "role": "user", "content": "hi"}],
        "reasoning": {"effort": "low", "summary": "auto"},
        "store": False,
    }


def test_key_is_required() -> None:
    with pytest.raises(ConfigError):
        OpenAIResponsesAdapter(api_key="")


@pytest.mark.asyncio
async def test_the_key_travels_only_in_the_authorization_header() -> None:
    body = events(CREATED, added(0, message(MSG)), text_delta(MSG, 0, "hi"), COMPLETED)
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/responses", ScriptedResponse.streaming(body))
        adapter = OpenAIResponsesAdapter(api_key=KEY, base_url=emu.base_url + "/v1", retry=NO_RETRY)
        outcome = await run_adapter(adapter, CONVERSATION)
        (request,) = emu.requests
    assert turn(outcome).text == "hi"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert (request.path, request.query) == ("/v1/responses", {})
    assert KEY not in request.body.decode()


# -- event mapping ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_function_call_uses_call_id_name_from_added_and_argument_deltas() -> None:
    body = events(
        CREATED,
        added(0, function_call(FC, "call_abc", "get_weather")),
        args_delta(FC, 0, '{"city":'),
        args_delta(FC, 0, '"Paris"}'),
        {"type": "response.function_call_arguments.done", "item_id": FC, "output_index": 0, "arguments": '{"city":"Paris"}'},
        done(0, function_call(FC, "call_abc", "get_weather", '{"city":"Paris"}', "completed")),
        COMPLETED,
    )
    outcome = await trace(body, ROUTE)
    assert types(outcome) == ["block-start", "tool-call-delta", "tool-call-delta", "block-end", "usage", "finish"]
    result = turn(outcome)
    assert calls(result) == [("call_abc", "get_weather", {"city": "Paris"})]
    assert result.finish_reason is not None
    assert (result.finish_reason.kind, result.finish_reason.raw) == ("tool-calls", "completed")
    assert result.usage == Usage(input_tokens=90, output_tokens=40, cached_input_tokens=64, reasoning_tokens=16)


@pytest.mark.asyncio
async def test_arguments_only_in_done_events_are_not_lost() -> None:
    body = events(
        added(0, function_call(FC, "call_abc", "now")),
        done(0, function_call(FC, "call_abc", "now", '{"tz":"UTC"}', "completed")),
        COMPLETED,
    )
    assert calls(turn(await trace(body, ROUTE))) == [("call_abc", "now", {"tz": "UTC"})]


@pytest.mark.asyncio
async def test_text_then_tool_call_then_reasoning_summaries_are_separate_blocks() -> None:
    rs = "rs_68b0"
    summary = {"type": "response.reasoning_summary_text.delta", "item_id": rs, "output_index": 0}
    body = events(
        CREATED,
        added(0, {"type": "reasoning", "id": rs, "summary": []}),
        {**summary, "summary_index": 0, "delta": "First idea."},
        {**summary, "summary_index": 1, "delta": "Second idea."},
        done(0, {"type": "reasoning", "id": rs, "summary": []}),
        added(1, message(MSG)),
        text_delta(MSG, 1, "I'll check."),
        done(1, message(MSG)),
        added(2, function_call(FC, "call_x", "lookup")),
        args_delta(FC, 2, "{}"),
        done(2, function_call(FC, "call_x", "lookup", "{}", "completed")),
        COMPLETED,
    )
    result = turn(await trace(body, ROUTE))
    assert [type(b).__name__ for b in result.blocks] == ["ReasoningBlock", "ReasoningBlock", "TextBlock", "ToolCallBlock"]
    assert result.reasoning == "First idea.Second idea."
    assert result.text == "I'll check."
    dropped = turn(await trace(body, ROUTE, drop_reasoning=True))
    assert [type(b).__name__ for b in dropped.blocks] == ["TextBlock", "ToolCallBlock"]


@pytest.mark.asyncio
async def test_web_search_call_is_not_a_tool_call_and_its_answer_stays_text() -> None:
    ws = "ws_68b3"
    body = events(
        CREATED,
        added(0, {"type": "web_search_call", "id": ws, "status": "in_progress", "action": {"type": "search"}}),
        {"type": "response.web_search_call.in_progress", "item_id": ws, "output_index": 0},
        {"type": "response.web_search_call.searching", "item_id": ws, "output_index": 0},
        {"type": "response.web_search_call.completed", "item_id": ws, "output_index": 0},
        done(0, {"type": "web_search_call", "id": ws, "status": "completed", "action": {"type": "search", "query": "q"}}),
        added(1, message(MSG)),
        text_delta(MSG, 1, "Pogačar won."),
        {"type": "response.output_text.annotation.added", "item_id": MSG, "output_index": 1, "content_index": 0,
         "annotation_index": 0, "annotation": {"type": "url_citation", "url": "https://example.org"}},
        done(1, message(MSG)),
        COMPLETED,
    )
    result = turn(await trace(body, ROUTE))
    assert result.tool_calls == ()
    assert result.text == "Pogačar won."
    assert result.finish_reason is not None and result.finish_reason.kind == "stop"


@pytest.mark.asyncio
async def test_incomplete_response_finishes_with_its_reason() -> None:
    incomplete = response("incomplete", USAGE, incomplete_details={"reason": "max_output_tokens"})
    body = events(CREATED, added(0, message(MSG)), text_delta(MSG, 0, "The Eiffel"),
                  {"type": "response.incomplete", "response": incomplete})
    result = turn(await trace(body, ROUTE))
    assert result.text == "The Eiffel"
    assert result.finish_reason is not None
    assert (result.finish_reason.kind, result.finish_reason.raw) == ("stop", "max_output_tokens")
    assert result.usage is not None and result.usage.output_tokens == 40


@pytest.mark.asyncio
async def test_refusal_deltas_are_text() -> None:
    refusal = {"type": "response.refusal.delta", "item_id": MSG, "output_index": 0, "content_index": 0}
    body = events(added(0, message(MSG)), {**refusal, "delta": "I can't"}, {**refusal, "delta": " help."}, COMPLETED)
    assert turn(await trace(body, ROUTE)).text == "I can't help."


@pytest.mark.asyncio
async def test_openrouter_form_without_event_lines_and_with_done() -> None:
    rs = "rs_tmp_1"
    body = b": OPENROUTER PROCESSING\n\n" + events(
        CREATED,
        added(0, {"type": "reasoning", "id": rs, "summary": []}),
        {"type": "response.reasoning_text.delta", "item_id": rs, "output_index": 0, "content_index": 0, "delta": "2+2."},
        added(1, message(MSG)),
        text_delta(MSG, 1, "4"),
        done(1, message(MSG)),
        {"type": "response.reasoning_text.done", "item_id": rs, "output_index": 0, "content_index": 0, "text": "2+2."},
        done(0, {"type": "reasoning", "id": rs, "summary": []}),
        COMPLETED,
        event_lines=False,
        done=True,
    )
    result = turn(await trace(body, ROUTE))
    assert (result.reasoning, result.text) == ("2+2.", "4")


@pytest.mark.asyncio
async def test_done_sentinel_is_not_a_terminal_event() -> None:
    body = events(CREATED, added(0, message(MSG)), text_delta(MSG, 0, "4"), event_lines=False, done=True)
    outcome = await trace_body(body, route=ROUTE)
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert "response.completed" in outcome.raised.message


@pytest.mark.asyncio
async def test_truncated_body_is_interrupted_without_finish() -> None:
    body = events(CREATED, added(0, message(MSG)), text_delta(MSG, 0, "Hel"), text_delta(MSG, 0, "lo"), COMPLETED)
    cut = body[: body.index(b"event: response.completed") + 40]  # inside the terminal event
    for truncated in (cut, body[: body.index(b"event: response.completed")]):
        outcome = await trace_body(truncated, route=ROUTE)
        assert isinstance(outcome.raised, StreamInterruptedError)
        assert types(outcome) == ["block-start", "text-delta", "text-delta"]


@pytest.mark.asyncio
async def test_error_event_raises_the_typed_error_with_its_message() -> None:
    error = {"type": "error", "code": "rate_limit_exceeded", "message": "Rate limit reached for o4-mini.", "param": None}
    failed = {"type": "response.failed", "response": response("failed", error={"code": "rate_limit_exceeded", "message": "x"})}
    outcome = await trace_body(events(CREATED, added(0, message(MSG)), text_delta(MSG, 0, "Hi"), error, failed), route=ROUTE)
    assert isinstance(outcome.raised, RateLimitError)
    assert outcome.raised.message == "Rate limit reached for o4-mini."
    assert types(outcome) == ["block-start", "text-delta"]


@pytest.mark.asyncio
async def test_response_failed_raises_with_the_response_error() -> None:
    failed = response("failed", error={"code": "server_error", "message": "The model failed to generate a response."})
    outcome = await trace_body(events(CREATED, {"type": "response.failed", "response": failed}), route=ROUTE)
    assert isinstance(outcome.raised, ServerError)
    assert outcome.raised.message == "The model failed to generate a response."
    assert outcome.chunks == []


# -- HTTP errors -------------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "payload", "headers", "error_type"),
    [
        (401, {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": None,
                         "code": "invalid_api_key"}}, {}, AuthenticationError),
        (429, {"error": {"message": "Rate limit reached for requests", "type": "requests", "param": None,
                         "code": "rate_limit_exceeded"}}, {"retry-after": "20"}, RateLimitError),
        (500, {"error": {"message": "The server had an error processing your request.", "type": "server_error",
                         "param": None, "code": None}}, {}, ServerError),
    ],
    ids=["401", "429", "500"],
)
async def test_http_errors_are_typed(status: int, payload: dict[str, Any], headers: dict[str, str], error_type: type) -> None:
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/responses", ScriptedResponse.json(payload, status=status, headers=headers))
        adapter = OpenAIResponsesAdapter(api_key=KEY, base_url=emu.base_url + "/v1", retry=NO_RETRY)
        outcome = await run_adapter(adapter, CONVERSATION)
    error = outcome.raised
    assert isinstance(error, ProviderError)
    assert type(error) is error_type
    assert error.message.startswith(payload["error"]["message"])
    assert (error.status, error.route) == (status, ROUTE)
    if status == 429:
        assert isinstance(error, RateLimitError) and error.retry_after == 20.0
