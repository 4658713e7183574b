"""``dsh-replay import`` underneath: foreign formats, inferred fragments, routes, reverse request mappings.

The command itself, on real third-party cassettes, is tested in ``tests/cli/test_import.py``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from vcr.request import Request as VcrRequest

from dsh_replay import CallId, GenerateOptions, Message, ToolDefinition
from dsh_replay.adapters import BUILTIN_ROUTES, HttpAdapter
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.import_formats import infer_fragments, read_foreign
from dsh_replay.cassette.import_options import NotImportable
from dsh_replay.cassette.import_requests import base_url_of, detect_route, map_request
from dsh_replay.protocol.options import MessageToolCall

ROUTES = RouteTable.load()

# -- inferred fragments ------------------------------------------------------------------


@pytest.mark.parametrize(("body", "sizes"), [
    (b"data: a\n\ndata: b\n\n", [9, 9]),
    (b"event: x\ndata: a\n\ndata: [DONE]\n\n", [18, 14]),
    (b"data: a\r\n\r\ndata: b\r\n\r\n", [11, 11]),  # Gemini's CRLF separators
    (b"data: a\r\rdata: b\r\r", [9, 9]),
    (b"data: a\n\ndata: b", [9, 7]),  # a last event without its blank line
    (b"", []),
])
def test_sse_bodies_are_cut_one_fragment_per_event(body: bytes, sizes: list[int]) -> None:
    assert infer_fragments(body, ndjson=False) == sizes


def test_ndjson_bodies_are_cut_one_fragment_per_line() -> None:
    body = b'{"a": 1}\n{"b": 2}\n{"done": true}'
    assert infer_fragments(body, ndjson=True) == [9, 9, 14]


# -- foreign formats ----------------------------------------------------------------------

SSE = 'data: {"x": 1}\n\ndata: [DONE]\n\n'
REQUEST = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def vcrpy_interaction(body: Any, headers: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {
        "request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions",
                    "body": json.dumps(REQUEST), "headers": {"content-type": ["application/json"]}},
        "response": {"status": {"code": 200, "message": "OK"},
                     "headers": {"Content-Type": ["text/event-stream; charset=utf-8"], **(headers or {})},
                     "body": {"string": body}},
    }


def write_yaml(path: Path, interactions: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}), encoding="utf-8")
    return path


def test_reads_a_plain_vcrpy_cassette(tmp_path: Path) -> None:
    foreign = read_foreign(write_yaml(tmp_path / "c.yaml", [vcrpy_interaction(SSE)]))
    assert foreign is not None and foreign.style == "vcrpy"
    [item] = foreign.interactions
    assert (item.method, item.uri, item.status, item.reason) == (
        "POST", "https://api.openai.com/v1/chat/completions", 200, "OK")
    assert item.streamed and item.content_type == "text/event-stream"
    assert orjson.loads(item.request_body) == REQUEST
    assert item.body == SSE.encode()


def test_a_gzip_binary_body_is_decoded_and_its_encoding_headers_dropped(tmp_path: Path) -> None:
    encoded = gzip.compress(SSE.encode())
    path = write_yaml(tmp_path / "c.yaml", [vcrpy_interaction(encoded, {"Content-Encoding": ["gzip"],
                                                                        "Content-Length": [str(len(encoded))]})])
    assert b"!!binary" in path.read_bytes()
    [item] = read_foreign(path).interactions  # type: ignore[union-attr]
    assert item.body == SSE.encode()
    assert item.decoded == ["response body was gzip-encoded; it is stored decoded"]
    assert {name.lower() for name, _ in item.headers} == {"content-type"}


def test_a_body_that_does_not_decode_is_kept_with_the_reason(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "c.yaml", [vcrpy_interaction(b"not gzip at all", {"Content-Encoding": ["gzip"]})])
    [item] = read_foreign(path).interactions  # type: ignore[union-attr]
    assert item.problem.startswith("its response body does not decode as gzip")


def test_reads_pydantic_ais_parsed_body(tmp_path: Path) -> None:
    raw = vcrpy_interaction(SSE)
    request = raw["request"]
    request["parsed_body"] = REQUEST
    del request["body"]
    request["headers"]["content-length"] = ["999"]
    foreign = read_foreign(write_yaml(tmp_path / "c.yaml", [raw]))
    assert foreign is not None and foreign.style == "pydantic-ai"
    [item] = foreign.interactions
    assert orjson.loads(item.request_body) == REQUEST
    # the recorded length was that of other bytes: it goes, as the body is written anew
    assert [name for name, _ in item.request_headers] == ["content-type"]


def test_reads_cassetters_typed_bodies_and_integer_status(tmp_path: Path) -> None:
    interaction = {
        "request": {"method": "POST", "uri": "https://api.openai.com/v1/chat/completions", "headers": {},
                    "body": {"type": "json", "content": REQUEST}},
        "response": {"status": 200, "headers": {"content-type": ["text/event-stream"]},
                     "body": {"type": "text", "content": SSE}},
    }
    foreign = read_foreign(write_yaml(tmp_path / "c.yaml", [interaction]))
    assert foreign is not None and foreign.style == "cassetter"
    [item] = foreign.interactions
    assert (item.status, item.reason, item.body) == (200, "OK", SSE.encode())
    assert orjson.loads(item.request_body) == REQUEST


def test_reads_vcrpy_json_and_a_gzipped_file(tmp_path: Path) -> None:
    data = json.dumps({"interactions": [vcrpy_interaction(SSE)], "version": 1}).encode()
    (tmp_path / "c.json").write_bytes(data)
    (tmp_path / "c.yaml.gz").write_bytes(gzip.compress(data))  # JSON is YAML too
    for name in ("c.json", "c.yaml.gz"):
        [item] = read_foreign(tmp_path / name).interactions  # type: ignore[union-attr]
        assert item.body == SSE.encode()


def test_a_yaml_file_that_is_no_cassette_is_none_and_ours_is_recognised(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("name: x\n", encoding="utf-8")
    assert read_foreign(tmp_path / "config.yaml") is None
    (tmp_path / "ours.yaml").write_text("dsh_replay: {format: 1}\ninteractions: []\nversion: 1\n", encoding="utf-8")
    assert read_foreign(tmp_path / "ours.yaml").style == "dsh-replay"  # type: ignore[union-attr]


# -- routes --------------------------------------------------------------------------------


@pytest.mark.parametrize(("uri", "route"), [
    ("https://api.openai.com/v1/chat/completions", "openai"),
    ("https://api.openai.com/v1/responses", "openai-responses"),
    ("https://myorg.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01", "openai"),
    ("https://api.anthropic.com/v1/messages", "anthropic"),
    ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
     "gemini"),
    ("http://localhost:11434/api/chat", "ollama"),
    ("https://api.deepseek.com/chat/completions", "deepseek"),
    ("https://api.groq.com/openai/v1/chat/completions", "openai-compatible"),
    ("https://api.mistral.ai/v1/chat/completions", "openai-compatible"),
    ("https://api.together.xyz/v1/chat/completions", "openai-compatible"),
    ("https://openrouter.ai/api/v1/chat/completions", "openai-compatible"),
    ("http://localhost:8000/v1/chat/completions", None),  # a local server: --route says which
    ("https://oauth2.googleapis.com/token", None),
])
def test_the_route_comes_from_host_and_path(uri: str, route: str | None) -> None:
    assert detect_route(uri) == route


def test_the_base_url_is_the_url_up_to_the_endpoint() -> None:
    assert base_url_of("openai-compatible", "https://api.groq.com/openai/v1/chat/completions") == \
        "https://api.groq.com/openai/v1"
    assert base_url_of("gemini", "https://x.googleapis.com/v1beta/models/m:streamGenerateContent?alt=sse") == \
        "https://x.googleapis.com/v1beta"
    assert base_url_of("anthropic", "https://user:pw@proxy.example/v1/messages") == "https://proxy.example"
    assert base_url_of("anthropic", "https://api.anthropic.com/v1/complete") is None


# -- reverse request mappings ----------------------------------------------------------------

CONVERSATION = GenerateOptions(
    model="model-1",
    messages=[
        Message(role="system", content="Be brief."),
        Message(role="user", content="Weather in Paris?"),
        Message(role="assistant",
                tool_calls=(MessageToolCall(id=CallId("call_1"), name="weather", arguments='{"city":"Paris"}'),)),
        Message(role="tool", call_id=CallId("call_1"), content="sunny"),
        Message(role="assistant", content="It is sunny."),
        Message(role="user", content="Thanks!"),
    ],
    tools=[ToolDefinition(name="weather", description="Current weather",
                          parameters={"type": "object", "properties": {"city": {"type": "string"}}})],
    temperature=0.5,
    max_tokens=300,
)
BASES = {"openai-compatible": "https://api.groq.com/openai/v1", "ollama": "http://localhost:11434"}
#: routes whose reverse mapping gives back the very options (the others add a name or an id the wire lacks)
EXACT = {"openai", "openai-compatible", "deepseek", "openai-responses", "anthropic"}


def recorded_request(route: str, options: GenerateOptions) -> tuple[VcrRequest, dict[str, Any]]:
    adapter = ROUTES.adapter(route, base_url=BASES.get(route))
    assert isinstance(adapter, HttpAdapter)
    request = adapter.build_request(options)
    assert isinstance(request.json, dict)
    return VcrRequest("POST", request.url, orjson.dumps(request.json), {}), request.json


@pytest.mark.parametrize("route", sorted(BUILTIN_ROUTES))
def test_every_routes_reverse_mapping_gives_back_what_makes_the_same_request(route: str) -> None:
    recorded, body = recorded_request(route, CONVERSATION)
    mapped = map_request(ROUTES, route, recorded)
    assert mapped.notes == ()
    assert mapped.options.extra == {}
    assert recorded_request(route, mapped.options)[1] == body
    if route in EXACT:
        assert mapped.options == CONVERSATION
    else:
        assert [m.content for m in mapped.options.messages] == [m.content for m in CONVERSATION.messages]


def openai_recording(**changes: Any) -> VcrRequest:
    body = dict(recorded_request("openai", CONVERSATION)[1], **changes)
    return VcrRequest("POST", "https://api.openai.com/v1/chat/completions", orjson.dumps(body), {})


def test_a_field_the_options_do_not_hold_is_kept_as_an_extra_parameter_and_named() -> None:
    mapped = map_request(ROUTES, "openai", openai_recording(parallel_tool_calls=False, seed=7))
    assert mapped.options.extra == {"parallel_tool_calls": False, "seed": 7}
    assert mapped.notes == ("request field 'parallel_tool_calls' is kept as an extra parameter",
                            "request field 'seed' is kept as an extra parameter")


def test_a_field_the_adapter_adds_but_the_recording_lacks_is_removed_through_extra() -> None:
    body = recorded_request("openai", CONVERSATION)[1]
    del body["stream_options"]
    mapped = map_request(ROUTES, "openai", VcrRequest("POST", "https://api.openai.com/v1/chat/completions",
                                                      orjson.dumps(body), {}))
    assert mapped.options.extra == {"stream_options": None}
    assert "request field 'stream_options', which the openai adapter adds" in mapped.notes[0]


def test_tools_the_options_cannot_hold_are_carried_whole_and_said_so() -> None:
    tools = [{"type": "function", "function": {"name": "weather", "description": "", "strict": True,
                                               "parameters": {"type": "object", "properties": {}}}}]
    mapped = map_request(ROUTES, "openai", openai_recording(tools=tools))
    assert mapped.options.tools == ()
    assert mapped.options.extra == {"tools": tools}
    assert mapped.notes[0].startswith("request field 'tools' is kept as an extra parameter "
                                      "(tools[0].function.strict is not what the openai adapter makes")


def test_the_conversation_is_never_carried_as_an_extra_parameter() -> None:
    # an assistant turn with a field our Chat mapping never writes: replacing `messages` through
    # extra would make every prompt match, so the request is refused, and the field named
    body = recorded_request("openai", CONVERSATION)[1]
    body["messages"][4]["refusal"] = None
    recorded = VcrRequest("POST", "https://api.openai.com/v1/chat/completions", orjson.dumps(body), {})
    with pytest.raises(NotImportable, match=r"request field 'messages' cannot be mapped: the openai adapter "
                                            r"sends messages\[4\]\.refusal as nothing where the recording has None"):
        map_request(ROUTES, "openai", recorded)


def test_content_parts_cannot_be_mapped_and_the_field_is_named() -> None:
    # two text parts are not one string: the options cannot hold them, and nothing joins them
    parts = [{"type": "text", "text": "hi"}, {"type": "text", "text": " there"}]
    body = {"model": "claude", "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": parts}]}
    recorded = VcrRequest("POST", "https://api.anthropic.com/v1/messages", orjson.dumps(body), {})
    with pytest.raises(NotImportable, match=r"request field 'messages\[0\]\.content' cannot be mapped: it is a "
                                            "list of content parts"):
        map_request(ROUTES, "anthropic", recorded)


def test_a_request_that_names_no_model_is_not_importable_and_says_so() -> None:
    # the Azure AI Inference SDK leaves the model to the deployment in the URL
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
    recorded = VcrRequest("POST", "https://x.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=1",
                          orjson.dumps(body), {})
    with pytest.raises(NotImportable, match="request field 'model' cannot be mapped: the recorded request names no "
                                            "model"):
        map_request(ROUTES, "openai", recorded)


def test_gemini_reads_the_model_from_the_path_and_keeps_unknown_subfields() -> None:
    recorded, body = recorded_request("gemini", CONVERSATION)
    body["systemInstruction"]["role"] = "user"
    body["generationConfig"]["topK"] = 3
    mapped = map_request(ROUTES, "gemini", VcrRequest("POST", recorded.uri, orjson.dumps(body), {}))
    assert mapped.options.model == "model-1"
    assert (mapped.options.temperature, mapped.options.max_tokens) == (0.5, 300)
    assert mapped.options.extra == {"generationConfig": {"topK": 3}, "systemInstruction": {"role": "user"}}
    assert mapped.base_url == "https://generativelanguage.googleapis.com/v1beta"
