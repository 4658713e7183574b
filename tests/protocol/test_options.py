from __future__ import annotations

import enum
import math
from collections.abc import Callable

import pytest
import yaml

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


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], "options must be a JSON object, got [1]"),
        ({"messages": [USER]}, "options.model must be a non-empty string, got nothing (the field is missing)"),
        ({"model": 5, "messages": [USER]}, "options.model must be a non-empty string, got 5"),
        ({"model": "m", "messages": "hi"}, "options.messages must be a list, got 'hi'"),
        ({"model": "m", "messages": []}, "options.messages must hold at least one message"),
        ({"model": "m", "messages": [5]}, "options.messages[0] must be a JSON object, got 5"),
        ({"model": "m", "messages": [{"content": "x"}]}, "options.messages[0].role must be one of system, user, assistant, tool, got nothing (the field is missing)"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "options.messages[0].content must be a string, got 5"),
        ({"model": "m", "messages": [{"role": "tool", "content": "r"}]}, "options.messages[0]: a tool message needs the call_id"),
        ({"model": "m", "messages": [{"role": "robot"}]}, "options.messages[0].role must be one of system, user, assistant, tool, got 'robot'"),
        ({"model": "m", "messages": [USER], "temprature": 1}, "options has an unknown field 'temprature' (did you mean temperature?)"),
        ({"model": "m", "messages": [USER], "temperature": "hot"}, "options.temperature must be a number or null, got 'hot'"),
        ({"model": "m", "messages": [USER], "temperature": True}, "options.temperature must be a number or null, got True"),
        ({"model": "m", "messages": [USER], "maxTokens": 1.5}, "options.maxTokens must be an integer >= 1 or null, got 1.5"),
        ({"model": "m", "messages": [USER], "extra": []}, "options.extra must be a JSON object, got []"),
        ({"model": "m", "messages": [USER], "tools": [{"description": "d"}]}, "options.tools[0].name must be a non-empty string, got nothing (the field is missing)"),
        (
            {"model": "m", "messages": [{"role": "assistant", "toolCalls": [{"id": "c", "name": 3}]}]},
            "options.messages[0].toolCalls[0].name must be a non-empty string, got 3",
        ),
        (
            {"model": "m", "messages": [{"role": "assistant", "reasoning": [{"text": "t", "signatur": "s"}]}]},
            "options.messages[0].reasoning[0] has an unknown field 'signatur' (did you mean signature?)",
        ),
    ],
)
def test_malformed_json_is_a_config_error_naming_the_field(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GenerateOptions.from_json(data)
    assert str(caught.value).startswith(message)


def test_null_optional_fields_mean_absent() -> None:
    options = GenerateOptions.from_json({"model": "m", "messages": [USER], "temperature": None, "maxTokens": None})
    assert (options.temperature, options.max_tokens) == (None, None)


HI = Message(role="user", content="hi")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": None}, "GenerateOptions.model must be a non-empty string, got None"),
        ({"model": ""}, "GenerateOptions.model must be a non-empty string, got ''"),
        ({"messages": "hi"}, "GenerateOptions.messages must be a list of Message, got 'hi'"),
        ({"messages": []}, "GenerateOptions.messages must hold at least one message"),
        ({"messages": [{"role": "user"}]}, "GenerateOptions.messages[0] must be a Message, got {'role': 'user'}"),
        ({"tools": [{"name": "f"}]}, "GenerateOptions.tools[0] must be a ToolDefinition, got {'name': 'f'}"),
        ({"temperature": math.nan}, "GenerateOptions.temperature must be a number >= 0 or None, got nan"),
        ({"temperature": "hot"}, "GenerateOptions.temperature must be a number >= 0 or None, got 'hot'"),
        ({"max_tokens": -5}, "GenerateOptions.max_tokens must be an integer >= 1 or None, got -5"),
        ({"max_tokens": True}, "GenerateOptions.max_tokens must be an integer >= 1 or None, got True"),
        ({"extra": [1]}, "GenerateOptions.extra must be a mapping of provider parameters, got [1]"),
        ({"extra": {"seed": {1, 2}}}, "GenerateOptions.extra.seed must be JSON (a string, number, true/false, null, list or object), got {1, 2}"),
        ({"extra": {"top_p": math.inf}}, "GenerateOptions.extra.top_p must be a finite number, got inf"),
        ({"extra": {1: "x"}}, "GenerateOptions.extra key must be a string, got 1"),
    ],
)
def test_options_of_the_wrong_kind_are_refused_naming_the_field(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"model": "m", "messages": [HI], **kwargs}
    with pytest.raises(ConfigError) as caught:
        GenerateOptions(**arguments)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_enums_and_other_subclasses_become_plain_values_that_a_cassette_can_store() -> None:
    class Model(enum.StrEnum):
        MINI = "gpt-4o-mini"

    class Effort(enum.IntEnum):
        HIGH = 3

    tool = ToolDefinition(name="f", parameters={"type": "object", "properties": {"n": {"maximum": Effort.HIGH}}})
    options = GenerateOptions(model=Model.MINI, messages=[HI], tools=[tool], extra={"effort": Effort.HIGH, "tags": ("a",)})
    assert type(options.model) is str and options.model == "gpt-4o-mini"
    assert options.extra == {"effort": 3, "tags": ["a"]} and type(options.extra["effort"]) is int
    assert type(options.tools[0].parameters["properties"]["n"]["maximum"]) is int
    assert yaml.safe_dump(options.to_json())  # the cassette's metadata can hold them
    assert GenerateOptions.from_json(options.to_json()) == options


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Message(role="user", content=5), "Message.content must be a string, got 5"),
        (lambda: Message(role="assistant", tool_calls="x"), "Message.tool_calls must be a list of MessageToolCall, got 'x'"),
        (lambda: MessageToolCall(id=CallId(""), name="f"), "MessageToolCall.id must be a non-empty string, got ''"),
        (lambda: ToolDefinition(name="f", parameters=None), "ToolDefinition.parameters must be a JSON-schema mapping, got None"),
        (lambda: ToolDefinition(name="f", parameters={"x": object}), "tool 'f' parameters.x must be JSON"),
    ],
)
def test_messages_and_tools_of_the_wrong_kind_are_refused(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build()
    assert str(caught.value).startswith(message)
