"""The provider SDKs (which use httpx2) are recorded and replayed like any httpx client.

Each SDK talks to the loopback emulator while recording; the replay runs after
the emulator has stopped, so a request that leaked to the network would fail.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import yaml

from dsh_replay import CassetteError, use_cassette
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

OPENAI_KEY = "sk-proj-" + "Yh3Jk8Lm2Np7Qr1St6Uv0Wx4Za9Bc5De"
ANTHROPIC_KEY = "sk-ant-api03-" + "Fg4Hi9Jk3Lm8No2Pq7Rs1Tu6Vw0Xy5Za"


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = b""
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out += (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()
    return out


def _openai_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object": "chat.completion.chunk",
        "created": 1741569952, "model": "gpt-4o-mini-2024-07-18", "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra,
    }


OPENAI_SSE = _sse([
    (None, _openai_chunk({"role": "assistant", "content": "", "refusal": None})),
    (None, _openai_chunk({"content": "Hello"})),
    (None, _openai_chunk({"content": " from"})),
    (None, _openai_chunk({"content": " the caf\u00e9!"})),
    (None, _openai_chunk({}, "stop")),
    (None, {**_openai_chunk({}), "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}),
    (None, "[DONE]"),
])

ANTHROPIC_SSE = _sse([
    ("message_start", {"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5-20250929", "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 472, "output_tokens": 2}}}),
    ("content_block_start", {"type": "content_block_start", "index": 0,
                             "content_block": {"type": "text", "text": ""}}),
    ("ping", {"type": "ping"}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "Let me check"}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": " the weather."}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather", "input": {}}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 1,
                             "delta": {"type": "input_json_delta", "partial_json": "{\"location\": \"San"}}),
    ("content_block_delta", {"type": "content_block_delta", "index": 1,
                             "delta": {"type": "input_json_delta", "partial_json": " Francisco\"}"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                       "usage": {"output_tokens": 89}}),
    ("message_stop", {"type": "message_stop"}),
])


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _fragment_count(path: Path) -> int:
    data = yaml.safe_load(path.read_text())
    return len(data["interactions"][0]["response"]["dsh_replay"]["fragments"])


# -- openai ----------------------------------------------------------------------------


async def _openai_run(base_url: str, prompt: str = "Say hello") -> list[dict[str, Any]]:
    async with openai.AsyncOpenAI(api_key=OPENAI_KEY, base_url=base_url, max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}],
            stream=True, stream_options={"include_usage": True},
        )
        return [chunk.model_dump() async for chunk in stream]


@pytest.mark.asyncio
async def test_openai_sdk_is_recorded_and_replayed_offline(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(OPENAI_SSE, delay=0.005))
    base_url = emu.url("/v1")
    path = tmp_path / "openai.yaml"
    async with use_cassette(path, "once", route="openai") as recording:
        live = await _openai_run(base_url)
    assert "".join(c["choices"][0]["delta"]["content"] or "" for c in live if c["choices"]) == "Hello from the café!"
    assert live[-1]["usage"]["total_tokens"] == 13
    assert emu.requests[0].headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert recording.scrubbed == 1
    text = path.read_text()
    assert OPENAI_KEY not in text
    assert _fragment_count(path) == OPENAI_SSE.count(b"\n\n")
    emu.stop()

    async with use_cassette(path) as replay:
        replayed = await _openai_run(base_url)
    assert replayed == live
    assert replay.played == 1


@pytest.mark.asyncio
async def test_openai_sdk_changed_prompt_is_refused_offline(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(OPENAI_SSE))
    base_url = emu.url("/v1")
    path = tmp_path / "openai.yaml"
    async with use_cassette(path, "once"):
        await _openai_run(base_url)
    emu.stop()
    # (some SDK versions wrap what the transport raises in APIConnectionError)
    with pytest.raises((CassetteError, openai.APIConnectionError)) as caught:
        async with use_cassette(path):
            await _openai_run(base_url, prompt="Say goodbye")
    error = caught.value if isinstance(caught.value, CassetteError) else caught.value.__cause__
    assert isinstance(error, CassetteError)
    assert "changed JSON fields: messages[0].content" in str(error)
    assert '+      "content": "Say goodbye",' in str(error)


def test_sync_openai_sdk_is_recorded_and_replayed(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(OPENAI_SSE))
    base_url = emu.url("/v1")
    path = tmp_path / "openai-sync.yaml"

    def run() -> list[str | None]:
        with openai.OpenAI(api_key=OPENAI_KEY, base_url=base_url, max_retries=0) as client:
            stream = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Say hello"}], stream=True,
            )
            return [c.choices[0].delta.content for c in stream if c.choices]

    with use_cassette(path, "once"):
        live = run()
    emu.stop()
    with use_cassette(path) as replay:
        assert run() == live
    assert replay.played == 1
    assert live[1:4] == ["Hello", " from", " the café!"]


# -- anthropic -------------------------------------------------------------------------


async def _anthropic_events(base_url: str) -> list[dict[str, Any]]:
    async with anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY, base_url=base_url, max_retries=0) as client:
        stream = await client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, stream=True,
            messages=[{"role": "user", "content": "What is the weather in San Francisco?"}],
            tools=[{"name": "get_weather", "description": "Weather of a city",
                    "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}],
        )
        return [event.model_dump() async for event in stream]


async def _anthropic_final(base_url: str) -> dict[str, Any]:
    async with anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY, base_url=base_url, max_retries=0) as client:
        async with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=1024,
            messages=[{"role": "user", "content": "What is the weather in San Francisco?"}],
        ) as stream:
            message = await stream.get_final_message()
        return message.model_dump()


@pytest.mark.asyncio
async def test_anthropic_sdk_is_recorded_and_replayed_offline(emu: ProviderEmulator, tmp_path: Path) -> None:
    emu.add("POST", "/v1/messages", ScriptedResponse.streaming(ANTHROPIC_SSE, delay=0.005))
    base_url = emu.base_url
    path = tmp_path / "anthropic.yaml"
    async with use_cassette(path, "once", route="anthropic") as recording:
        live_events = await _anthropic_events(base_url)
        live_final = await _anthropic_final(base_url)
    assert [e["type"] for e in live_events][:2] == ["message_start", "content_block_start"]
    assert live_events[-1]["type"] == "message_stop"
    assert live_final["stop_reason"] == "tool_use"
    assert live_final["content"][1]["input"] == {"location": "San Francisco"}
    # (newer SDKs send the key as a bearer token, older ones as x-api-key)
    assert [name for name, value in emu.requests[0].headers.items() if ANTHROPIC_KEY in value] in (
        ["authorization"], ["x-api-key"])
    assert recording.scrubbed == 2  # one credential header per request
    assert ANTHROPIC_KEY not in path.read_text()
    assert "event: message_start\n" in path.read_text()  # the literal block, one SSE line per line
    emu.stop()

    async with use_cassette(path) as replay:
        assert await _anthropic_events(base_url) == live_events
        assert await _anthropic_final(base_url) == live_final
    assert replay.played == 2
    assert replay.unplayed == []
