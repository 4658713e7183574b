"""Route ``deepseek``: request mapping, reasoning_content, cache usage, errors, cassettes."""

from __future__ import annotations

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
    chunk_to_json,
)
from dsh_replay.adapters import DeepSeekAdapter
from dsh_replay.cassette.replay import run_adapter, trace_body
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

from .test_openai_chat import (
    CHAT_MESSAGES,
    CHAT_TOOLS,
    CONVERSATION,
    KEY,
    NO_RETRY,
    chunk,
    sse,
    trace,
    turn,
    types,
)

DEEPSEEK_USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 120,
    "total_tokens": 160,
    "prompt_tokens_details": {"cached_tokens": 32},
    "completion_tokens_details": {"reasoning_tokens": 100},
    "prompt_cache_hit_tokens": 32,
    "prompt_cache_miss_tokens": 8,
}

REASONER_BODY = b": keep-alive\n\n" + sse(
    chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
    chunk({"content": None, "reasoning_content": "Count"}),
    chunk({"content": None, "reasoning_content": " the r's."}),
    chunk({"content": "Three", "reasoning_content": None}),
    chunk({"content": ".", "reasoning_content": None}),
    chunk({"content": "", "reasoning_content": None}, "stop", usage=DEEPSEEK_USAGE),
)


# -- request mapping -------------------------------------------------------------------------------


def test_request_is_chat_completions_at_api_deepseek_com_with_max_tokens() -> None:
    request = DeepSeekAdapter(api_key=KEY).build_request(CONVERSATION)
    assert request.url == "https://api.deepseek.com/chat/completions"
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


def test_base_url_can_point_at_the_beta_endpoint() -> None:
    adapter = DeepSeekAdapter(api_key=KEY, base_url="https://api.deepseek.com/beta")
    options = GenerateOptions(model="deepseek-chat", messages=[Message(role="user", content="hi")])
    assert adapter.build_request(options).url == "https://api.deepseek.com/beta/chat/completions"


def test_key_is_required() -> None:
    with pytest.raises(ConfigError):
        DeepSeekAdapter(api_key="")


@pytest.mark.asyncio
async def test_the_key_travels_only_in_the_authorization_header() -> None:
    with ProviderEmulator() as emu:
        emu.add("POST", "/chat/completions", ScriptedResponse.streaming(REASONER_BODY))
        adapter = DeepSeekAdapter(api_key=KEY, base_url=emu.base_url, retry=NO_RETRY)
        outcome = await run_adapter(adapter, CONVERSATION)
        (request,) = emu.requests
    assert turn(outcome).text == "Three."
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert (request.path, request.query) == ("/chat/completions", {})
    assert KEY not in request.body.decode()


# -- event mapping -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_reasoning_content_becomes_a_reasoning_block_before_the_answer() -> None:
    outcome = await trace(REASONER_BODY, "deepseek")
    assert types(outcome) == [
        "block-start", "reasoning-delta", "reasoning-delta", "block-end",
        "block-start", "text-delta", "text-delta", "block-end", "usage", "finish",
    ]
    starts = [chunk_to_json(c)["blockType"] for c in outcome.chunks if chunk_to_json(c)["type"] == "block-start"]
    assert starts == ["reasoning", "text"]
    result = turn(outcome)
    assert (result.reasoning, result.text) == ("Count the r's.", "Three.")


@pytest.mark.asyncio
async def test_cache_hits_are_cached_input_tokens() -> None:
    result = turn(await trace(REASONER_BODY, "deepseek"))
    assert result.usage == Usage(input_tokens=40, output_tokens=120, cached_input_tokens=32, reasoning_tokens=100)


@pytest.mark.asyncio
async def test_prompt_cache_hit_tokens_alone_are_enough() -> None:
    usage = {"prompt_tokens": 13, "completion_tokens": 4, "prompt_cache_hit_tokens": 9, "prompt_cache_miss_tokens": 4}
    body = sse(chunk({"content": "Hi"}), chunk({"content": ""}, "length", usage=usage))
    result = turn(await trace(body, "deepseek"))
    assert result.usage == Usage(input_tokens=13, output_tokens=4, cached_input_tokens=9)
    assert result.finish_reason is not None
    assert (result.finish_reason.kind, result.finish_reason.raw) == ("stop", "length")


@pytest.mark.asyncio
async def test_drop_reasoning_leaves_only_the_answer() -> None:
    result = turn(await trace(REASONER_BODY, "deepseek", drop_reasoning=True))
    assert (result.reasoning, result.text, len(result.blocks)) == ("", "Three.", 1)


@pytest.mark.asyncio
async def test_stream_cut_during_reasoning_is_interrupted() -> None:
    body = REASONER_BODY[: REASONER_BODY.index(b"Three")]
    outcome = await trace_body(body, route="deepseek")
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert "finish" not in types(outcome)


@pytest.mark.asyncio
async def test_error_in_the_stream_is_typed() -> None:
    error = {"error": {"message": "Service is too busy.", "type": "server_error", "param": None, "code": "service_unavailable"}}
    outcome = await trace_body(sse(chunk({"content": "The"}), error, done=False), route="deepseek")
    assert isinstance(outcome.raised, ServerError)
    assert outcome.raised.message == "Service is too busy."


# -- HTTP errors ----------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("status", "payload", "headers", "error_type"),
    [
        (401, {"error": {"message": "Authentication Fails (no such user)", "type": "authentication_error",
                         "param": None, "code": "invalid_request_error"}}, {}, AuthenticationError),
        (429, {"error": {"message": "Rate Limit Reached", "type": "rate_limit_reached_error", "param": None,
                         "code": "rate_limit_reached"}}, {"retry-after": "20"}, RateLimitError),
        (500, {"error": {"message": "Server Error", "type": "server_error", "param": None, "code": None}}, {}, ServerError),
    ],
    ids=["401", "429", "500"],
)
async def test_http_errors_are_typed(status: int, payload: dict[str, Any], headers: dict[str, str], error_type: type) -> None:
    with ProviderEmulator() as emu:
        emu.add("POST", "/chat/completions", ScriptedResponse.json(payload, status=status, headers=headers))
        adapter = DeepSeekAdapter(api_key=KEY, base_url=emu.base_url, retry=NO_RETRY)
        outcome = await run_adapter(adapter, CONVERSATION)
    error = outcome.raised
    assert isinstance(error, ProviderError)
    assert type(error) is error_type
    assert error.message.startswith(payload["error"]["message"])
    assert error.status == status
    if status == 429:
        assert isinstance(error, RateLimitError) and error.retry_after == 20.0
