from __future__ import annotations

import pytest

from dsh_replay import (
    CallId,
    ConfigError,
    GenerateOptions,
    Message,
    MessageToolCall,
    ReasoningBlock,
    ToolDefinition,
)


def test_plain_keyword_construction() -> None:
    options = GenerateOptions(model="m", messages=[Message(role="user", content="hi")])
    assert options.messages == (Message(role="user", content="hi"),)
    assert options.tools == () and options.temperature is None


def test_round_trip_through_json() -> None:
    options = GenerateOptions(
        model="gpt-x",
        messages=[
            Message(role="system", content="be brief"),
            Message(role="user", content="weather?"),
            Message(role="assistant", tool_calls=[MessageToolCall(id=CallId("call_1"), name="get_weather", arguments='{"city":"Paris"}')]),
            Message(role="tool", call_id=CallId("call_1"), content='{"temp":21}'),
            Message(role="assistant", content="21C.", reasoning=[ReasoningBlock(text="t", signature="s"), ReasoningBlock(text="u")]),
        ],
        tools=[ToolDefinition(name="get_weather", description="Weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}})],
        temperature=0.2,
        max_tokens=100,
        extra={"seed": 7},
    )
    data = options.to_json()
    assert data["messages"][2]["toolCalls"] == [{"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}]
    assert data["maxTokens"] == 100
    assert data["messages"][4]["reasoning"] == [{"text": "t", "signature": "s"}, {"text": "u"}]
    assert GenerateOptions.from_json(data) == options


def test_message_rules() -> None:
    with pytest.raises(ConfigError, match="role must be one of"):
        Message(role="robot", content="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs the call_id"):
        Message(role="tool", content="result")
    with pytest.raises(ConfigError, match="only assistant messages carry reasoning"):
        Message(role="user", content="x", reasoning=[ReasoningBlock(text="r")])
    with pytest.raises(ConfigError, match="only assistant messages carry tool_calls"):
        Message(role="user", tool_calls=[MessageToolCall(id=CallId("c"), name="f")])


def test_malformed_json_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="malformed GenerateOptions"):
        GenerateOptions.from_json({"messages": []})
