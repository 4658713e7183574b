"""GeminiAdapter: request mapping, event mapping, cassettes, errors."""

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
    InvalidRequestError,
    MalformedStreamError,
    Message,
    MessageToolCall,
    RateLimitError,
    ReasoningBlock,
    ReasoningDelta,
    ServerError,
    StreamInterruptedError,
    ToolDefinition,
    Usage,
    collect,
)
from dsh_replay.adapters import GeminiAdapter
from dsh_replay.cassette.replay import Outcome, run_adapter, trace_body
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from dsh_replay.wire.transport import RetryPolicy

KEY = "test-gemini-key"
PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

CONVERSATION = GenerateOptions(
    model="gemini-2.5-flash",
    messages=[
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris and Rome?"),
        Message(
            role="assistant",
            content="Checking.",
            tool_calls=(
                MessageToolCall(id=CallId("call_0_get_weather"), name="get_weather", arguments='{"city": "Paris"}'),
                MessageToolCall(id=CallId("call_1_get_weather"), name="get_weather", arguments='{"city": "Rome"}'),
            ),
        ),
        Message(role="tool", call_id=CallId("call_0_get_weather"), content='{"celsius": 18}'),
        Message(role="tool", call_id=CallId("call_1_get_weather"), content="sunny, 25°C", name="get_weather"),
        Message(role="user", content="Thanks!"),
    ],
    tools=[WEATHER],
    temperature=0.3,
    max_tokens=300,
)


# -- request mapping -------------------------------------------------------------


def test_conversation_maps_to_the_exact_generate_content_body() -> None:
    request = GeminiAdapter(KEY).build_request(CONVERSATION)
    assert request.url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert request.json == {
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Checking."},
                    {"functionCall": {"id": "call_0_get_weather", "name": "get_weather", "args": {"city": "Paris"}}},
                    {"functionCall": {"id": "call_1_get_weather", "name": "get_weather", "args": {"city": "Rome"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "call_0_get_weather", "name": "get_weather", "response": {"celsius": 18}}},
                    {"functionResponse": {"id": "call_1_get_weather", "name": "get_weather", "response": {"output": "sunny, 25°C"}}},
                ],
            },
            {"role": "user", "parts": [{"text": "Thanks!"}]},
        ],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "get_weather",
                        "description": "Current weather for a city.",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                    }
                ]
            }
        ],
        "generationConfig": {"temperature": 0.3, "maxOutputTokens": 300},
    }


def test_key_only_in_the_x_goog_api_key_header() -> None:
    request = GeminiAdapter(KEY).build_request(CONVERSATION)
    assert "key=" not in request.url and KEY not in request.url
    assert request.headers["x-goog-api-key"] == KEY
    assert "authorization" not in {name.lower() for name in request.headers}


def test_model_prefix_and_extra_generation_config_are_merged() -> None:
    options = GenerateOptions(
        model="models/gemini-2.5-pro",
        messages=[Message(role="user", content="hi")],
        temperature=0.0,
        extra={"generationConfig": {"thinkingConfig": {"includeThoughts": True}}, "safetySettings": []},
    )
    request = GeminiAdapter(KEY, base_url="https://proxy.example/v1beta/").build_request(options)
    assert request.url == "https://proxy.example/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    body = request.json
    assert isinstance(body, dict)
    assert body["generationConfig"] == {"temperature": 0.0, "thinkingConfig": {"includeThoughts": True}}
    assert body["safetySettings"] == []
    assert "systemInstruction" not in body and "tools" not in body


def test_tool_result_without_a_known_function_name_is_refused() -> None:
    options = GenerateOptions(model="m", messages=[Message(role="tool", call_id=CallId("nope"), content="x")])
    with pytest.raises(ConfigError, match="function name"):
        GeminiAdapter(KEY).build_request(options)


@pytest.mark.asyncio
async def test_request_reaches_the_provider_with_header_key_and_body() -> None:
    body = chunks({"text": "ok"}, finish="STOP")
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", ScriptedResponse.streaming(body.encode()))
        adapter = GeminiAdapter(KEY, base_url=emu.base_url + "/v1beta")
        outcome = await run_adapter(adapter, CONVERSATION)
        sent = emu.requests[0]
    assert outcome.raised is None and collect(outcome.chunks).text == "ok"
    assert sent.query == {"alt": "sse"}
    assert sent.headers["x-goog-api-key"] == KEY
    assert sent.json() == GeminiAdapter(KEY).build_request(CONVERSATION).json


# -- event mapping: inline bodies ------------------------------------------------------


def chunks(*parts: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None,
           response_id: str = "resp-1") -> str:
    """One Gemini SSE event holding ``parts`` (CRLF framing, as the API sends)."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    payload = {"candidates": [candidate], "usageMetadata": usage or {"promptTokenCount": 5},
               "modelVersion": "gemini-2.5-flash", "responseId": response_id}
    return f"data: {json.dumps(payload)}\r\n\r\n"


def call(name: str, args: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **extra}
    if args is not None:
        body["args"] = args
    return {"functionCall": body}


async def trace(body: str, **kwargs: Any) -> Outcome:
    return await trace_body(body.encode(), route="gemini", **kwargs)


@pytest.mark.asyncio
async def test_function_call_without_id_gets_a_stable_derived_id() -> None:
    body = chunks(call("get_capital", {"country": "France"}), finish="STOP")
    first, second = await trace(body), await trace(body)
    assert first.violations == [] and first.golden_bytes() == second.golden_bytes()
    turn = collect(first.chunks)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("call_0_get_capital", "get_capital", '{"country":"France"}')]
    assert turn.finish_reason is not None
    assert (turn.finish_reason.kind, turn.finish_reason.raw) == ("tool-calls", "STOP")


@pytest.mark.asyncio
async def test_function_call_id_is_used_when_present_and_missing_args_are_an_empty_object() -> None:
    body = chunks(call("list_files", id="fc-abc"), finish="STOP")
    turn = collect((await trace(body)).chunks)
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("fc-abc", "{}")]


@pytest.mark.asyncio
async def test_parallel_function_calls_become_sequential_blocks_numbered_by_position() -> None:
    body = chunks({"text": "Checking both."}, call("get_weather", {"city": "Paris"}), call("get_time", {"tz": "CET"})) \
        + chunks(call("get_weather", {"city": "Rome"}), finish="STOP")
    outcome = await trace(body)
    assert outcome.violations == []
    turn = collect(outcome.chunks)
    assert turn.text == "Checking both."
    assert [(c.id, c.parsed) for c in turn.tool_calls] == [
        ("call_0_get_weather", {"city": "Paris"}),
        ("call_1_get_time", {"tz": "CET"}),
        ("call_2_get_weather", {"city": "Rome"}),
    ]


@pytest.mark.asyncio
async def test_thought_parts_are_reasoning_and_the_next_signature_signs_them() -> None:
    body = (
        chunks({"text": "Think A.", "thought": True})
        + chunks({"text": " Think B.", "thought": True})
        + chunks({"text": "Answer.", "thoughtSignature": "sig-1"}, {"text": "", "thoughtSignature": "sig-2"}, finish="STOP")
    )
    outcome = await trace(body)
    assert outcome.violations == []
    blocks = [c.block for c in outcome.chunks if isinstance(c, BlockEnd)]
    assert blocks[0] == ReasoningBlock(text="Think A. Think B.", signature="sig-1")
    assert collect(outcome.chunks).text == "Answer."

    dropped = await trace(body, drop_reasoning=True)
    assert not any(isinstance(c, ReasoningDelta) for c in dropped.chunks)
    assert dropped.violations == [] and collect(dropped.chunks).text == "Answer."


@pytest.mark.asyncio
async def test_signature_on_a_thought_part_and_signature_without_reasoning() -> None:
    signed = await trace(chunks({"text": "Hmm.", "thought": True, "thoughtSignature": "sig-t"}, {"text": "Yes."}, finish="STOP"))
    assert next(c.block for c in signed.chunks if isinstance(c, BlockEnd)) == ReasoningBlock(text="Hmm.", signature="sig-t")
    # with no reasoning block the signature has nowhere to go: dropped, no empty block forged
    unsigned = await trace(chunks({"text": "Hi.", "thoughtSignature": "sig-x"}, finish="STOP"))
    assert [type(c.block).__name__ for c in unsigned.chunks if isinstance(c, BlockEnd)] == ["TextBlock"]
    assert unsigned.violations == []


@pytest.mark.asyncio
async def test_each_reasoning_run_keeps_its_own_first_signature() -> None:
    body = chunks(
        {"text": "A.", "thought": True, "thoughtSignature": "sig-a"},
        {"text": "x", "thoughtSignature": "sig-late"},
        {"text": "B.", "thought": True},
        {"text": "y", "thoughtSignature": "sig-b"},
        finish="STOP",
    )
    outcome = await trace(body)
    assert outcome.violations == []
    reasoning = [c.block for c in outcome.chunks if isinstance(c, BlockEnd) and isinstance(c.block, ReasoningBlock)]
    assert reasoning == [ReasoningBlock(text="A.", signature="sig-a"), ReasoningBlock(text="B.", signature="sig-b")]


@pytest.mark.asyncio
async def test_usage_is_reported_once_from_the_latest_metadata() -> None:
    body = (
        chunks({"text": "The"}, usage={"promptTokenCount": 15, "totalTokenCount": 15})
        + chunks({"text": " end."}, finish="STOP", usage={"promptTokenCount": 13, "candidatesTokenCount": 8,
                                                           "thoughtsTokenCount": 30, "cachedContentTokenCount": 4})
    )
    outcome = await trace(body)
    usages = [c for c in outcome.chunks if type(c).__name__ == "UsageChunk"]
    assert len(usages) == 1
    assert collect(outcome.chunks).usage == Usage(input_tokens=13, output_tokens=8, cached_input_tokens=4, reasoning_tokens=30)


@pytest.mark.asyncio
async def test_usage_in_a_chunk_after_the_finish_reason_is_still_counted() -> None:
    trailing = {"candidates": [], "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 21}, "responseId": "r"}
    body = chunks({"text": "Hi"}, finish="STOP", usage={"promptTokenCount": 9}) + f"data: {json.dumps(trailing)}\r\n\r\n"
    outcome = await trace(body)
    assert outcome.violations == []
    assert collect(outcome.chunks).usage == Usage(input_tokens=9, output_tokens=21)


@pytest.mark.asyncio
@pytest.mark.parametrize("body", [
    pytest.param(chunks({"text": "The capital"}) + chunks({"text": " of"}), id="no-finishReason"),
    pytest.param("", id="empty"),
])
async def test_stream_without_finish_reason_is_interrupted(body: str) -> None:
    outcome = await trace(body)
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert "finishReason" in str(outcome.raised)
    assert not any(type(c).__name__ in ("Finish", "UsageChunk") for c in outcome.chunks)


@pytest.mark.asyncio
@pytest.mark.parametrize("cut", [5, 30])
async def test_body_cut_inside_an_event_is_interrupted_not_malformed(cut: int) -> None:
    body = chunks({"text": "The capital"}) + chunks({"text": " is Paris."}, finish="STOP")
    outcome = await trace(body[: len(body) - cut])
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert not any(type(c).__name__ == "Finish" for c in outcome.chunks)


@pytest.mark.asyncio
async def test_a_complete_event_that_is_not_json_is_malformed() -> None:
    outcome = await trace("data: {oops}\r\n\r\n" + chunks({"text": "x"}, finish="STOP"))
    assert isinstance(outcome.raised, MalformedStreamError)


@pytest.mark.asyncio
async def test_max_tokens_and_safety_reasons_are_kept_raw() -> None:
    turn = collect((await trace(chunks({"text": "The sea"}, finish="MAX_TOKENS"))).chunks)
    assert turn.finish_reason is not None and (turn.finish_reason.kind, turn.finish_reason.raw) == ("stop", "MAX_TOKENS")
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 7}}
    outcome = await trace(f"data: {json.dumps(blocked)}\r\n\r\n")
    assert outcome.violations == [] and outcome.raised is None
    turn = collect(outcome.chunks)
    assert turn.blocks == () and turn.finish_reason is not None and turn.finish_reason.raw == "SAFETY"


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("error", "cls"),
    [
        ({"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}, ServerError),
        ({"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}, RateLimitError),
        ({"code": 400, "message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}, InvalidRequestError),
    ],
)
async def test_error_object_in_the_stream_raises_its_typed_error(error: dict[str, Any], cls: type[Exception]) -> None:
    body = chunks({"text": "Once"}) + f"data: {json.dumps({'error': error})}\r\n\r\n"
    outcome = await trace(body)
    assert type(outcome.raised) is cls
    assert str(outcome.raised).startswith(error["message"])
    assert [type(c).__name__ for c in outcome.chunks] == ["BlockStart", "TextDelta"]


@pytest.mark.asyncio
async def test_vertex_streamed_partial_args_are_rebuilt_into_one_delta() -> None:
    def partial(*args: dict[str, Any], more: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {"partialArgs": list(args)}
        if more:
            body["willContinue"] = True
        return {"functionCall": body}

    body = (
        chunks(call("book", willContinue=True, id="fc-1"))
        + chunks(partial({"jsonPath": "$.city", "stringValue": "San ", "willContinue": True}))
        + chunks(partial({"jsonPath": "$.city", "stringValue": "Francisco"}, {"jsonPath": "$.nights", "numberValue": 3}))
        + chunks(partial({"jsonPath": "$.guests[1].name", "stringValue": "Bo"}, {"jsonPath": "$['late checkout']", "boolValue": True}))
        + chunks({"functionCall": {}})
        + chunks(call("book", willContinue=True)) + chunks(partial({"jsonPath": "$.city", "stringValue": "Rome"}, more=False),
                                                          finish="STOP")
    )
    outcome = await trace(body)
    assert outcome.violations == []
    calls = collect(outcome.chunks).tool_calls
    assert [(c.id, c.parsed) for c in calls] == [
        ("fc-1", {"city": "San Francisco", "nights": 3, "guests": [None, {"name": "Bo"}], "late checkout": True}),
        ("call_1_book", {"city": "Rome"}),
    ]
    deltas = [c for c in outcome.chunks if type(c).__name__ == "ToolCallDelta"]
    assert len(deltas) == 2


@pytest.mark.asyncio
async def test_function_call_without_name_is_malformed() -> None:
    outcome = await trace(chunks({"functionCall": {"args": {"a": 1}}}, finish="STOP"))
    assert isinstance(outcome.raised, MalformedStreamError)


@pytest.mark.asyncio
async def test_code_execution_parts_produce_no_block() -> None:
    body = chunks({"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                  {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}}) + chunks({"text": "It is 1."}, finish="STOP")
    outcome = await trace(body)
    assert outcome.violations == []
    assert [type(c.block).__name__ for c in outcome.chunks if isinstance(c, BlockEnd)] == ["TextBlock"]


@pytest.mark.asyncio
@pytest.mark.parametrize("fragmentation", ["bytes", "random:3", "random:11"])
async def test_inline_body_gives_the_same_chunks_under_any_fragmentation(fragmentation: str) -> None:
    body = (chunks({"text": "Pensée…", "thought": True}) + chunks({"text": "Grüße 東京 🌧️", "thoughtSignature": "s"})
            + chunks(call("f", {"q": "é"}), finish="STOP"))
    single = await trace(body)
    assert single.violations == [] and single.raised is None
    assert (await trace(body, fragmentation=fragmentation)).golden_bytes() == single.golden_bytes()


# -- HTTP errors ---------------------------------------------------------------------


async def _fail_with(response: ScriptedResponse) -> BaseException | None:
    options = GenerateOptions(model="gemini-2.5-flash", messages=[Message(role="user", content="hi")])
    with ProviderEmulator() as emu:
        emu.add("POST", PATH, response)
        adapter = GeminiAdapter(KEY, base_url=emu.base_url + "/v1beta", retry=RetryPolicy(max_retries=0))
        outcome = await run_adapter(adapter, options)
        assert len(emu.requests) == 1
    assert outcome.chunks == []
    return outcome.raised


@pytest.mark.asyncio
async def test_http_401_is_an_authentication_error() -> None:
    error = await _fail_with(ScriptedResponse.json(
        {"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}},
        status=401, headers={"x-goog-request-id": "g-401"},
    ))
    assert isinstance(error, AuthenticationError)
    assert error.message.startswith("Request had invalid authentication credentials.")
    assert (error.status, error.provider_code, error.request_id) == (401, "UNAUTHENTICATED", "g-401")


@pytest.mark.asyncio
async def test_http_403_is_an_authentication_error() -> None:
    error = await _fail_with(ScriptedResponse.json(
        {"error": {"code": 403, "message": "Method doesn't allow unregistered callers.", "status": "PERMISSION_DENIED"}},
        status=403,
    ))
    assert isinstance(error, AuthenticationError)
    assert error.message.startswith("Method doesn't allow unregistered callers.")
    assert (error.status, error.provider_code) == (403, "PERMISSION_DENIED")


@pytest.mark.asyncio
async def test_http_429_takes_retry_after_from_the_header_or_the_retry_info() -> None:
    payload = {"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED",
                         "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}
    error = await _fail_with(ScriptedResponse.json(payload, status=429, headers={"retry-after": "20"}))
    assert isinstance(error, RateLimitError)
    assert error.retry_after == 20.0 and error.message == "You exceeded your current quota."
    error = await _fail_with(ScriptedResponse.json(payload, status=429))
    assert isinstance(error, RateLimitError) and error.retry_after == 37.0


@pytest.mark.asyncio
async def test_http_503_is_a_server_error() -> None:
    error = await _fail_with(ScriptedResponse.json(
        {"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}},
        status=503,
    ))
    assert isinstance(error, ServerError)
    assert error.message == "The model is overloaded. Please try again later." and error.status == 503
