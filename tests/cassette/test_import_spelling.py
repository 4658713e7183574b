"""``dsh-replay import`` and requests SDKs spell otherwise than our adapters, which the provider reads alike.

Each shape is a recorded request as an SDK sends it: it must map like the
adapter's own spelling, the case must keep the request as the adapter sends it
(named in the notes), the adapter's rebuilt request must match it with replay's
matchers, and a changed prompt must still fail.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from vcr.request import Request as VcrRequest

from dsh_replay import CallId, GenerateOptions, Message
from dsh_replay.adapters import HttpAdapter
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.import_options import NotImportable
from dsh_replay.cassette.import_requests import MappedRequest, map_request
from dsh_replay.cassette.import_spelling import respell
from dsh_replay.cassette.matching import default_matchers, requests_match
from dsh_replay.protocol.options import MessageToolCall

ROUTES = RouteTable.load()
URLS = {"openai": "https://api.openai.com/v1/chat/completions",
        "openai-responses": "https://api.openai.com/v1/responses",
        "anthropic": "https://api.anthropic.com/v1/messages"}
CALL = MessageToolCall(id=CallId("call_1"), name="weather", arguments='{"city":"Paris"}')
TOOL_TURN = GenerateOptions(model="m", messages=[
    Message(role="system", content="Be brief."),
    Message(role="user", content="Weather in Paris?"),
    Message(role="assistant", tool_calls=(CALL,)),
    Message(role="tool", call_id=CallId("call_1"), content="sunny"),
])
CHAT = GenerateOptions(model="m", messages=[
    Message(role="system", content="Be brief."),
    Message(role="user", content="Hi"),
    Message(role="assistant", content="Hello!"),
    Message(role="user", content="Weather in Paris?"),
])


def adapter_body(route: str, options: GenerateOptions) -> dict[str, Any]:
    adapter = ROUTES.adapter(route)
    assert isinstance(adapter, HttpAdapter)
    data = adapter.build_request(options).json
    assert isinstance(data, dict)
    return data


def imported(route: str, body: dict[str, Any]) -> tuple[MappedRequest, VcrRequest]:
    recorded = VcrRequest("POST", URLS[route], orjson.dumps(body), {})
    return map_request(ROUTES, route, recorded), recorded


def replays(mapped: MappedRequest, recorded: VcrRequest) -> bool:
    adapter = ROUTES.adapter(mapped.route, base_url=mapped.base_url)
    assert isinstance(adapter, HttpAdapter)
    request = adapter.request_for(mapped.options)
    mine = VcrRequest(request.method, request.url, orjson.dumps(request.json), {})
    return requests_match(default_matchers(), mine, recorded, "<test>")


def assert_replays_and_a_changed_prompt_fails(mapped: MappedRequest, recorded: VcrRequest) -> None:
    assert replays(mapped, recorded)
    messages = list(mapped.options.messages)
    position = max(n for n, m in enumerate(messages) if m.role == "user")
    messages[position] = dataclasses.replace(messages[position], content="Weather in Rome?")
    assert not replays(dataclasses.replace(mapped, options=dataclasses.replace(mapped.options, messages=messages)),
                       recorded)


# -- Chat Completions: an assistant turn that only calls tools --------------------------------------------


def test_an_assistant_turn_with_tool_calls_and_no_content_key_maps_and_is_kept_with_content_null() -> None:
    body = adapter_body("openai", TOOL_TURN)
    assert body["messages"][2]["content"] is None  # what our adapter sends for such a turn
    del body["messages"][2]["content"]  # what the OpenAI SDK sends from a model_dump(exclude_none=True)
    mapped, recorded = imported("openai", body)
    assert mapped.options.messages == TOOL_TURN.messages
    assert mapped.notes[0] == (
        "request field messages[2].content is omitted in the recording and null in the openai adapter's request; an "
        "assistant turn that calls tools needs no content and the API reads both alike, so the case keeps null")
    assert orjson.loads(recorded.body)["messages"][2] == {**body["messages"][2], "content": None}
    assert_replays_and_a_changed_prompt_fails(mapped, recorded)


def test_content_null_needs_no_rewriting() -> None:
    mapped, recorded = imported("openai", adapter_body("openai", TOOL_TURN))
    assert mapped.notes == ()
    assert mapped.options.messages == TOOL_TURN.messages
    assert replays(mapped, recorded)


def test_an_assistant_turn_without_tool_calls_still_needs_its_content() -> None:
    body = adapter_body("openai", CHAT)
    del body["messages"][2]["content"]
    with pytest.raises(NotImportable, match=r"request field 'messages\[2\]\.content' cannot be mapped"):
        imported("openai", body)


# -- Responses: the SDK's short form of a message ----------------------------------------------------------


@pytest.mark.parametrize("content", ["text", "parts"])
def test_responses_messages_in_the_short_form_map_like_the_long_form(content: str) -> None:
    body = adapter_body("openai-responses", CHAT)
    for item in body["input"]:
        del item["type"]
        if content == "parts":
            kind = "output_text" if item["role"] == "assistant" else "input_text"
            item["content"] = [{"type": kind, "text": item["content"]}]
    mapped, recorded = imported("openai-responses", body)
    assert mapped.options.messages == CHAT.messages
    assert mapped.notes[0].startswith("request field input[0], input[1], input[2], input[3] is the SDK's short "
                                      "form of a message (no type) in the recording")
    if content == "parts":
        assert mapped.notes[1].startswith("request field input[0].content, input[1].content, input[2].content, "
                                          "input[3].content is a list of one text part in the recording")
    assert orjson.loads(recorded.body)["input"] == adapter_body("openai-responses", CHAT)["input"]
    assert_replays_and_a_changed_prompt_fails(mapped, recorded)


def test_a_responses_message_with_two_text_parts_is_not_importable() -> None:
    body = adapter_body("openai-responses", CHAT)
    body["input"][1] = {"role": "user", "content": [{"type": "input_text", "text": "H"},
                                                     {"type": "input_text", "text": "i"}]}
    with pytest.raises(NotImportable, match=r"request field 'input\[1\]\.content' cannot be mapped: it is a list "
                                            "of content parts"):
        imported("openai-responses", body)


def test_a_text_part_with_more_than_its_text_is_not_rewritten() -> None:
    body = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi", "cache": True}]}]}
    out, notes = respell("openai-responses", body)
    assert out["input"][0] == {"type": "message", **body["input"][0]}  # only its type was added
    assert len(notes) == 1 and notes[0].startswith("request field input[0] is the SDK's short form")


# -- Anthropic: a text as a list of one text block ----------------------------------------------------------


def test_anthropic_text_blocks_map_like_strings_and_are_kept_as_strings() -> None:
    body = adapter_body("anthropic", TOOL_TURN)
    body["system"] = [{"type": "text", "text": body["system"]}]
    body["messages"][0]["content"] = [{"type": "text", "text": body["messages"][0]["content"]}]
    result = body["messages"][2]["content"][0]
    result["content"] = [{"type": "text", "text": result["content"]}]
    mapped, recorded = imported("anthropic", body)
    assert mapped.options.messages == TOOL_TURN.messages
    assert mapped.notes == ("request field system, messages[0].content, messages[2].content[0].content is a list of "
                            "one text part in the recording and a string in the anthropic adapter's request; the API "
                            "reads a string as one text part, so the case keeps the string",)
    assert orjson.loads(recorded.body) == adapter_body("anthropic", TOOL_TURN)
    assert_replays_and_a_changed_prompt_fails(mapped, recorded)


def test_a_text_block_with_cache_control_is_not_rewritten() -> None:
    body = adapter_body("anthropic", CHAT)
    body["messages"][0]["content"] = [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]
    with pytest.raises(NotImportable, match=r"request field 'messages\[0\]\.content' cannot be mapped"):
        imported("anthropic", body)


def test_respelling_leaves_the_recorded_body_alone() -> None:
    body = adapter_body("openai", TOOL_TURN)
    del body["messages"][2]["content"]
    before = orjson.dumps(body)
    out, notes = respell("openai", body)
    assert notes and out["messages"][2]["content"] is None
    assert orjson.dumps(body) == before
