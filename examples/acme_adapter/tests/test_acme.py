"""The Acme adapter's tests: recorded once against the provider, replayed offline ever after.

    pytest --record-mode=once     # with ACME_API_KEY (and ACME_BASE_URL) set: records the
                                  #   cassettes and goldens in cassettes/test_acme/
    pytest                        # replays them: no network, no key

Acme is fictional, so its "real provider" is dsh_replay.testing.ProviderEmulator:
``python record_with_emulator.py`` runs each test with --record-mode=once against it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from acme_adapter import AcmeAdapter

from dsh_replay import (
    CallId,
    GenerateOptions,
    Message,
    MessageToolCall,
    ToolDefinition,
    load_golden,
    load_plugins,
)

if TYPE_CHECKING:
    from dsh_replay.testing import DshReplay  # the type of the dsh_replay fixture

# Only recording needs these; replay matches requests on path and body, not on host or key.
BASE_URL = os.environ.get("ACME_BASE_URL", "https://api.acme.example")
API_KEY = os.environ.get("ACME_API_KEY", "acme-offline-key")

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def acme() -> AcmeAdapter:
    return AcmeAdapter(API_KEY, base_url=BASE_URL)


def ask(text: str, *, tools: Sequence[ToolDefinition] = ()) -> GenerateOptions:
    return GenerateOptions(model="acme-1", messages=[Message(role="user", content=text)], tools=tools)


@pytest.mark.asyncio
async def test_text_answer(dsh_replay: DshReplay, acme: AcmeAdapter) -> None:
    await dsh_replay.stream(acme, ask("Say hello"))
    turn = dsh_replay.turn
    assert turn is not None
    assert turn.text == "Hello! How can I help today?"
    assert turn.finish_reason is not None and (turn.finish_reason.kind, turn.finish_reason.raw) == ("stop", "end_turn")


@pytest.mark.asyncio
async def test_tool_call(dsh_replay: DshReplay, acme: AcmeAdapter) -> None:
    await dsh_replay.stream(acme, ask("What's the weather in Paris?", tools=[WEATHER]))
    turn = dsh_replay.turn
    assert turn is not None
    assert [(c.id, c.name, c.parsed) for c in turn.tool_calls] == [
        ("call_w1", "get_weather", {"city": "Paris", "unit": "celsius"})
    ]
    assert turn.finish_reason is not None and turn.finish_reason.kind == "tool-calls"
    assert turn.usage is not None and (turn.usage.input_tokens, turn.usage.output_tokens) == (42, 18)


@pytest.mark.asyncio
async def test_parallel_tool_calls_become_sequential_blocks(dsh_replay: DshReplay, acme: AcmeAdapter) -> None:
    # Acme interleaves the argument fragments of parallel calls; the harness gets one block after the other
    chunks = await dsh_replay.stream(acme, ask("Weather in Paris and Tokyo?", tools=[WEATHER]))
    turn = dsh_replay.turn
    assert turn is not None
    assert turn.text == "Let me check both cities."
    assert [(c.id, c.parsed) for c in turn.tool_calls] == [("call_a", {"city": "Paris"}), ("call_b", {"city": "Tokyo"})]
    assert [type(c).__name__ for c in chunks].count("BlockStart") == 3
    assert turn.usage is not None and turn.usage.cached_input_tokens == 32


@pytest.mark.asyncio
async def test_tool_result_in_history(dsh_replay: DshReplay, acme: AcmeAdapter) -> None:
    options = GenerateOptions(
        model="acme-1",
        tools=[WEATHER],
        messages=[
            Message(role="user", content="What's the weather in Paris?"),
            Message(
                role="assistant",
                tool_calls=(MessageToolCall(id=CallId("call_w1"), name="get_weather", arguments='{"city": "Paris"}'),),
            ),
            Message(role="tool", call_id=CallId("call_w1"), content='{"temp_c": 18, "sky": "cloudy"}'),
        ],
    )
    await dsh_replay.stream(acme, options)
    assert dsh_replay.turn is not None
    assert dsh_replay.turn.text == "It is 18 °C and cloudy in Paris."


@pytest.mark.asyncio
@pytest.mark.dsh_replay(expect_error=True)
async def test_overloaded_mid_stream(dsh_replay: DshReplay, acme: AcmeAdapter) -> None:
    # the error path is regression-tested too: the golden ends with the "raised" line
    chunks = await dsh_replay.stream(acme, ask("Tell me a long story"))
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta"]
    golden = load_golden(dsh_replay.golden_path)
    assert golden.raised is not None and golden.raised.error == "OverloadedError"


def test_plugin_yaml_registers_the_route(dsh_replay: DshReplay) -> None:
    # the way a harness gets its adapters: dsh.yml → load_plugins → ctx.llm.resolve(route)
    ctx = load_plugins(Path(__file__).parents[1] / "dsh.yml")
    adapter = ctx.llm.resolve("acme")
    dsh_replay.run(adapter, ask("Say hi in French"))  # the sync twin of stream(), for tests that are not async
    assert dsh_replay.turn is not None and dsh_replay.turn.text == "Bonjour !"
