"""``dsh-replay import`` and the query of a recorded request: default query parameters, credentials, hosts.

The recorded parameters an adapter does not send become the case's default
query; one it sends otherwise stays a reason the request is not importable.
Which route a host's requests went to can be configured in
``[tool.dsh_replay.hosts]``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest
from vcr.request import Request as VcrRequest

from dsh_replay import GenerateOptions, Message
from dsh_replay.adapters import HttpAdapter
from dsh_replay.adapters.route_table import RouteTable, host_routes
from dsh_replay.cassette.import_options import NotImportable
from dsh_replay.cassette.import_requests import MappedRequest, detect_route, map_request
from dsh_replay.cassette.matching import default_matchers, requests_match
from dsh_replay.errors import ConfigError

ROUTES = RouteTable.load()
PROMPT = GenerateOptions(model="gpt-4o", messages=[Message(role="user", content="Say hello")], max_tokens=50)
AZURE = "https://myorg.openai.azure.com/openai/deployments/gpt4o/chat/completions"


def body_of(route: str, options: GenerateOptions, base_url: str | None = None) -> dict[str, Any]:
    adapter = ROUTES.adapter(route, base_url=base_url)
    assert isinstance(adapter, HttpAdapter)
    data = adapter.build_request(options).json
    assert isinstance(data, dict)
    return data


def recording(uri: str, body: dict[str, Any]) -> VcrRequest:
    return VcrRequest("POST", uri, orjson.dumps(body), {})


def replays(mapped: MappedRequest, recorded: VcrRequest) -> bool:
    """Whether the adapter, built as the case's replay builds it, makes a request the matchers take for ``recorded``."""
    adapter = ROUTES.adapter(mapped.route, base_url=mapped.base_url, default_query=mapped.default_query)
    assert isinstance(adapter, HttpAdapter)
    request = adapter.request_for(mapped.options)
    mine = VcrRequest(request.method, request.url, orjson.dumps(request.json), {})
    return requests_match(default_matchers(), mine, recorded, "<test>")


def changed_prompt(mapped: MappedRequest) -> MappedRequest:
    last = mapped.options.messages[-1]
    messages = [*mapped.options.messages[:-1], dataclasses.replace(last, content=last.content + " In French.")]
    return dataclasses.replace(mapped, options=dataclasses.replace(mapped.options, messages=messages))


@pytest.mark.parametrize(("route", "uri", "query"), [
    ("openai", f"{AZURE}?api-version=2024-06-01", {"api-version": "2024-06-01"}),
    ("anthropic", "https://api.anthropic.com/v1/messages?beta=true", {"beta": "true"}),
])
def test_a_query_parameter_the_adapter_never_sends_becomes_the_cases_default_query(
        route: str, uri: str, query: dict[str, str]) -> None:
    recorded = recording(uri, body_of(route, PROMPT))
    mapped = map_request(ROUTES, route, recorded)
    assert mapped.default_query == query
    assert mapped.options == PROMPT
    shown = ", ".join(f"{name}={value}" for name, value in query.items())
    assert mapped.notes == (f"the recorded query parameter(s) {shown} are sent on every request of the case "
                            "(dsh_replay.adapter.default_query)",)
    assert recorded.uri == uri  # kept as recorded: the adapter now sends it
    assert replays(mapped, recorded)
    assert not replays(changed_prompt(mapped), recorded)
    assert not replays(dataclasses.replace(mapped, default_query={}), recorded)  # the query is matched too


def test_the_azure_deployment_is_the_base_url() -> None:
    mapped = map_request(ROUTES, "openai", recording(f"{AZURE}?api-version=2024-06-01", body_of("openai", PROMPT)))
    assert mapped.base_url == "https://myorg.openai.azure.com/openai/deployments/gpt4o"


@pytest.mark.parametrize(("query", "reason"), [
    # a parameter the adapter sets itself, with another value
    ("alt=json", "the gemini adapter sends alt=sse where the recording has alt=json"),
    # one the adapter sends that the recording has not
    ("", "the gemini adapter sends alt=sse, which the recording has not"),
    ("alt=sse&v=1&v=2", "the recording repeats the query parameter(s) v, and a default query holds one value each"),
])
def test_a_query_the_adapter_sends_otherwise_is_not_importable(query: str, reason: str) -> None:
    uri = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    recorded = recording(f"{uri}?{query}" if query else uri, body_of("gemini", PROMPT))
    with pytest.raises(NotImportable) as caught:
        map_request(ROUTES, "gemini", recorded)
    assert reason in str(caught.value)
    assert "without loosening its matchers" in str(caught.value)
    assert "; and" not in str(caught.value)  # the query is one reason, not named again by the check


def test_a_credential_in_the_query_is_left_out_of_the_case_and_never_a_default_query() -> None:
    # scrubbed as a recording is: the key stays a REDACTED query parameter, which no adapter sends
    uri = ("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent"
           "?alt=sse&key=REDACTED")
    recorded = recording(uri, body_of("gemini", PROMPT))
    mapped = map_request(ROUTES, "gemini", recorded)
    assert mapped.default_query == {}
    assert mapped.notes == ("the recorded query parameter(s) key (a credential, REDACTED) are left out of the "
                            "case's request: the gemini adapter sends its credential in a header",)
    assert recorded.uri == uri.removesuffix("&key=REDACTED")  # the request the case keeps
    assert replays(mapped, recorded)


def test_a_mapping_problem_is_reported_beside_a_query_problem() -> None:
    body = body_of("gemini", PROMPT)
    body["contents"][0]["parts"] = [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]
    uri = "https://generativelanguage.googleapis.com/v1beta/models/m:streamGenerateContent?alt=json"
    with pytest.raises(NotImportable) as caught:
        map_request(ROUTES, "gemini", recording(uri, body))
    assert "alt=sse where the recording has alt=json" in str(caught.value)
    assert "; and request field 'contents[0].parts[0]' cannot be mapped" in str(caught.value)


# -- [tool.dsh_replay.hosts] ------------------------------------------------------------------------------

HOSTS = {"my-vllm.internal:8000": "openai-compatible", "llm.example": "openai-compatible",
         "[::1]:9000": "ollama", "api.openai.com": "openai-compatible"}


@pytest.mark.parametrize(("uri", "route"), [
    ("http://my-vllm.internal:8000/v1/chat/completions", "openai-compatible"),
    ("http://my-vllm.internal:8001/v1/chat/completions", None),  # another port is another server
    ("https://llm.example/v1/chat/completions", "openai-compatible"),  # any port of a host named alone
    ("http://[::1]:9000/api/chat", "ollama"),
    # asked before the built-in detection...
    ("https://api.openai.com/v1/chat/completions", "openai-compatible"),
    # ...which still decides when the path is not the configured route's endpoint
    ("https://api.openai.com/v1/responses", "openai-responses"),
    ("http://my-vllm.internal:8000/v1/embeddings", None),
])
def test_the_hosts_table_is_asked_before_the_built_in_detection(uri: str, route: str | None) -> None:
    assert detect_route(uri, HOSTS) == route


def test_a_host_with_its_default_port_is_found_with_and_without_it() -> None:
    assert detect_route("https://llm.internal/v1/chat/completions", {"llm.internal:443": "openai-compatible"}) == \
        "openai-compatible"
    assert detect_route("http://llm.internal/v1/chat/completions", {"llm.internal:443": "openai-compatible"}) is None


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_hosts_are_read_from_the_pyproject_in_lower_case(tmp_path: Path) -> None:
    pyproject = write(tmp_path, '[tool.dsh_replay.hosts]\n"My-VLLM.internal:8000" = "openai-compatible"\n'
                                '"localhost" = "ollama"\n')
    assert host_routes(pyproject) == {"my-vllm.internal:8000": "openai-compatible", "localhost": "ollama"}
    assert RouteTable.load(pyproject=pyproject).hosts == host_routes(pyproject)
    assert host_routes(tmp_path / "missing.toml") == {}
    assert host_routes(write(tmp_path, "[project]\nname = 'x'\n")) == {}


def test_a_route_of_the_pyprojects_own_routes_may_be_named(tmp_path: Path) -> None:
    pyproject = write(tmp_path, '[tool.dsh_replay.routes]\n"cohere" = "cohere_adapter:CohereAdapter"\n'
                                '[tool.dsh_replay.hosts]\n"api.cohere.com" = "cohere"\n')
    assert host_routes(pyproject) == {"api.cohere.com": "cohere"}


def test_an_unknown_route_names_the_pyproject_the_key_and_the_known_routes(tmp_path: Path) -> None:
    pyproject = write(tmp_path, '[tool.dsh_replay.hosts]\n"my-vllm.internal:8000" = "openai-compatibel"\n')
    with pytest.raises(ConfigError) as caught:
        host_routes(pyproject)
    assert str(caught.value) == (
        f"{pyproject} [tool.dsh_replay.hosts] 'my-vllm.internal:8000' names the route 'openai-compatibel', which is "
        "not a known route; the known routes are anthropic, deepseek, gemini, ollama, openai, openai-compatible, "
        "openai-responses")


@pytest.mark.parametrize("key", ["http://my-vllm.internal:8000", "my-vllm.internal:8000/v1", "user@host",
                                 "host:99999", "host:"])
def test_a_key_that_is_no_host_is_refused(tmp_path: Path, key: str) -> None:
    pyproject = write(tmp_path, f'[tool.dsh_replay.hosts]\n"{key}" = "openai"\n')
    with pytest.raises(ConfigError, match=r"is not a host or host:port"):
        host_routes(pyproject)


def test_a_hosts_entry_that_is_no_table_is_refused(tmp_path: Path) -> None:
    pyproject = write(tmp_path, '[tool.dsh_replay]\nhosts = "my-vllm"\n')
    with pytest.raises(ConfigError, match=r"\[tool\.dsh_replay\.hosts\] must be a table"):
        host_routes(pyproject)
