"""The Cohere adapter's tests: recorded once, replayed offline ever after.

    pytest --record-mode=once     # with COHERE_API_KEY (and COHERE_BASE_URL) set: records the
                                  #   cassettes and goldens in cassettes/test_cohere/
    pytest                        # replays them: no network, no key

``python record_with_emulator.py`` records them against an emulated Cohere instead
(``dsh_replay.testing.ProviderEmulator`` serving realistic /v2/chat bodies).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest
from cohere_adapter import CohereAdapter

from dsh_replay import (
    CallId,
    GenerateOptions,
    Message,
    MessageToolCall,
    ReasoningBlock,
    ToolDefinition,
    load_golden,
)

if TYPE_CHECKING:
    from dsh_replay.testing import DshReplay

# Only recording needs these; replay matches requests on path and body, not on host or key.
BASE_URL = os.environ.get("COHERE_BASE_URL", "https://api.cohere.com")
API_KEY = os.environ.get("COHERE_API_KEY", "sk-test-cohere-offline-0000")
MODEL = "command-a-03-2025"

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather in a city",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
)


@pytest.fixture
def cohere() -> CohereAdapter:
    return CohereAdapter(API_KEY, base_url=BASE_URL)


def ask(text: str, *, tools: Sequence[ToolDefinition] = (), max_tokens: int | None = None) -> GenerateOptions:
    return GenerateOptions(model=MODEL, messages=[Message(role="user", content=text)], tools=tools,
                           max_tokens=max_tokens)


def raised(dsh_replay: DshReplay) -> str | None:
    """The error class the golden ends with; None while recording (goldens are written at tear-down)."""
    if not dsh_replay.golden_path.is_file():
        return None
    golden = load_golden(dsh_replay.golden_path)
    return golden.raised.error if golden.raised is not None else "(nothing raised)"


@pytest.mark.asyncio
async def test_text(dsh_replay: DshReplay, cohere: CohereAdapter) -> None:
    await dsh_replay.stream(cohere, ask("What is an LLM? One sentence."))
    turn = dsh_replay.turn
    assert turn is not None
    assert turn.text == "A large language model (LLM) is a neural network trained on vast amounts of text."
    assert turn.finish_reason is not None and (turn.finish_reason.kind, turn.finish_reason.raw) == ("stop", "COMPLETE")
    assert turn.usage is not None and (turn.usage.input_tokens, turn.usage.output_tokens) == (196, 20)


@pytest.mark.asyncio
async def test_tool_call(dsh_replay: DshReplay, cohere: CohereAdapter) -> None:
    chunks = await dsh_replay.stream(cohere, ask("What's the weather in Madrid?", tools=[WEATHER]))
    turn = dsh_replay.turn
    assert turn is not None
    # the tool plan is the model's reasoning, then one tool-call block
    assert [type(c).__name__ for c in chunks if type(c).__name__ == "BlockStart"] == ["BlockStart"] * 2
    assert turn.reasoning == "I will look up the weather in Madrid."
    assert [(c.id, c.name, c.parsed) for c in turn.tool_calls] == [
        ("get_weather_1byjy32y2k6a", "get_weather", {"location": "Madrid"})
    ]
    assert turn.finish_reason is not None and (turn.finish_reason.kind, turn.finish_reason.raw) == ("tool-calls", "TOOL_CALL")


@pytest.mark.asyncio
async def test_parallel_tool_calls(dsh_replay: DshReplay, cohere: CohereAdapter) -> None:
    await dsh_replay.stream(cohere, ask("Weather in Madrid and Brasilia?", tools=[WEATHER]))
    turn = dsh_replay.turn
    assert turn is not None
    assert [(c.id, c.parsed) for c in turn.tool_calls] == [
        ("get_weather_p0dage9q1nv4", {"location": "Madrid"}),
        ("get_weather_7vfrbu0d0jhv", {"location": "Brasilia"}),
    ]


@pytest.mark.asyncio
async def test_tool_result_in_history(dsh_replay: DshReplay, cohere: CohereAdapter) -> None:
    options = GenerateOptions(
        model=MODEL,
        tools=[WEATHER],
        messages=[
            Message(role="system", content="You are a concise assistant."),
            Message(role="user", content="What's the weather in Madrid?"),
            Message(
                role="assistant",
                reasoning=(ReasoningBlock(text="I will look up the weather in Madrid."),),
                tool_calls=(MessageToolCall(id=CallId("get_weather_1byjy32y2k6a"), name="get_weather",
                                            arguments='{"location":"Madrid"}'),),
            ),
            Message(role="tool", call_id=CallId("get_weather_1byjy32y2k6a"), content='{"temperature": "24C"}'),
        ],
    )
    await dsh_replay.stream(cohere, options)
    assert dsh_replay.turn is not None
    assert dsh_replay.turn.text == "It is currently 24°C in Madrid."


@pytest.mark.asyncio
async def test_max_tokens(dsh_replay: DshReplay, cohere: CohereAdapter) -> None:
    await dsh_replay.stream(cohere, ask("Write a poem about the sea.", max_tokens=8))
    turn = dsh_replay.turn
    assert turn is not None
    assert turn.text == "The sea, a vast and restless"
    assert turn.finish_reason is not None and (turn.finish_reason.kind, turn.finish_reason.raw) == ("stop", "MAX_TOKENS")


@pytest.mark.asyncio
@pytest.mark.dsh_replay(expect_error=True)
async def test_rate_limited(dsh_replay: DshReplay, cohere: CohereAdapter) -> None:
    # the default RetryPolicy re-sends a 429 twice; the cassette holds all three answers
    assert await dsh_replay.stream(cohere, ask("Hello")) == []
    assert raised(dsh_replay) in ("RateLimitError", None)


@pytest.mark.asyncio
@pytest.mark.dsh_replay(expect_error=True)
async def test_error_mid_stream(dsh_replay: DshReplay, cohere: CohereAdapter) -> None:
    # message-end with finish_reason ERROR: the text so far is out, then the typed error, never a finish
    chunks = await dsh_replay.stream(cohere, ask("Tell me a long story"))
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta", "TextDelta"]
    assert raised(dsh_replay) in ("ProviderError", None)
