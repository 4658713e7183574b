"""``HttpAdapter(default_query=...)``: query parameters sent on every request (Azure OpenAI's ``api-version``).

Checked at construction (a credential, a parameter the request mapping sets
itself, anything but str to str), merged into the URL of every request the
adapter sends, and passed on by the route table when a case needs them.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import httpx
import pytest

from dsh_replay import ConfigError, GenerateOptions, Message, ProviderError
from dsh_replay.adapters import (
    BUILTIN_ROUTES,
    HttpAdapter,
    OpenAIChatAdapter,
    StreamRequest,
    adapter_class,
)
from dsh_replay.adapters.route_table import RouteTable

KEY = "sk-test-DefaultQuery0123456789abcdef"
BASE = "https://provider.example/v1"
OPTIONS = GenerateOptions(model="some-model", messages=[Message(role="user", content="hi")])
QUERY = {"api-version": "2024-06-01"}


def sent_url(adapter: HttpAdapter[Any]) -> httpx.URL:
    """The URL ``adapter.stream`` requests (answered with a 400, which ends the stream at once)."""
    seen: list[httpx.URL] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(400, json={"error": {"message": "no"}})

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            adapter.client = client
            with pytest.raises(ProviderError):
                async for _ in adapter.stream(OPTIONS):
                    pass

    asyncio.run(go())
    [url] = seen
    return url


@pytest.mark.parametrize("route", sorted(BUILTIN_ROUTES))
def test_every_request_carries_the_default_query_beside_the_adapters_own(route: str) -> None:
    plain = adapter_class(route)(KEY, base_url=BASE)
    adapter = adapter_class(route)(KEY, base_url=BASE, default_query=QUERY)
    url = sent_url(adapter)
    assert url.params["api-version"] == "2024-06-01"
    assert url.path == httpx.URL(plain.build_request(OPTIONS).url).path
    # the request mapping itself is left as it is: request_for is what is sent
    assert dict(httpx.URL(adapter.build_request(OPTIONS).url).params) == dict(httpx.URL(plain.build_request(OPTIONS).url).params)
    assert adapter.request_for(OPTIONS).json == plain.build_request(OPTIONS).json
    assert "api-version" not in sent_url(plain).params


def test_the_default_query_follows_the_mappings_own_parameters() -> None:
    adapter = adapter_class("gemini")(KEY, default_query={"x": "a b"})
    assert adapter.request_for(OPTIONS).url.endswith(":streamGenerateContent?alt=sse&x=a+b")


def test_a_parameter_the_request_mapping_sets_itself_is_refused_at_construction_naming_both() -> None:
    with pytest.raises(ConfigError) as caught:
        adapter_class("gemini")(KEY, default_query={"alt": "json"})
    assert str(caught.value) == ("GeminiAdapter: default_query sets alt=json, but the adapter's request mapping sends "
                                 "alt=sse itself; leave 'alt' out of default_query")


@pytest.mark.parametrize("name", ["key", "api-key", "API_KEY", "sig"])
def test_a_credential_is_never_a_default_query_parameter(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAIChatAdapter(KEY, default_query={name: "sk-test-in-the-url-0123456789"})
    assert f"default_query[{name!r}] would send a credential in the URL" in str(caught.value)
    assert "sk-test-in-the-url" not in str(caught.value)


@pytest.mark.parametrize("query", [["api-version", "1"], {"api-version": 1}, {"": "x"}, {1: "x"}, "api-version=1"])
def test_a_default_query_must_map_names_to_strings(query: object) -> None:
    with pytest.raises(ConfigError, match="OpenAIChatAdapter: default_query must"):
        OpenAIChatAdapter(KEY, default_query=query)  # type: ignore[arg-type]


class _LateAdapter(OpenAIChatAdapter):
    """A request mapping that reads what its own constructor sets after HttpAdapter's."""

    route: ClassVar[str] = "late"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flag = "v"

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        request = super().build_request(options)
        return StreamRequest(route=self.route, url=f"{request.url}?mode={self.flag}", headers=request.headers,
                             json=request.json)


def test_a_mapping_not_ready_at_construction_is_checked_at_its_first_request() -> None:
    fine = _LateAdapter(KEY, default_query=QUERY)
    assert fine.request_for(OPTIONS).url.endswith("/chat/completions?mode=v&api-version=2024-06-01")
    clashing = _LateAdapter(KEY, default_query={"mode": "w"})
    with pytest.raises(ConfigError, match=r"default_query sets mode=w, but the adapter's request mapping sends mode=v"):
        clashing.request_for(OPTIONS)


# -- the route table -----------------------------------------------------------------------------------------


def test_the_route_table_passes_the_default_query_only_when_there_is_one() -> None:
    table = RouteTable.load()
    adapter = table.adapter("openai", base_url=BASE, default_query=QUERY)
    assert isinstance(adapter, HttpAdapter) and adapter.default_query == QUERY
    calls: list[dict[str, Any]] = []

    def plain_factory(*, api_key: str, base_url: str | None = None) -> OpenAIChatAdapter:
        calls.append({"api_key": api_key, "base_url": base_url})
        return OpenAIChatAdapter(api_key, base_url=base_url)

    table.factories["plain"] = plain_factory
    table.sources["plain"] = "tests: plain_factory"
    assert isinstance(table.adapter("plain", base_url=BASE, default_query={}), OpenAIChatAdapter)
    with pytest.raises(ConfigError) as caught:
        table.adapter("plain", base_url=BASE, default_query=QUERY)
    assert str(caught.value) == (
        "route 'plain': its adapter (tests: plain_factory) takes no default_query, and this case needs the query "
        "parameter(s) api-version=2024-06-01 on every request; give the adapter a default_query keyword argument "
        "(HttpAdapter has one)")


def test_a_plugins_adapter_instance_cannot_be_given_a_default_query_it_was_not_built_with() -> None:
    table = RouteTable.load()
    table.registry.register_adapter(["mine"], OpenAIChatAdapter(KEY, base_url=BASE))
    table.sources["mine"] = "plugin plugins.yml"
    with pytest.raises(ConfigError, match=r"route 'mine' is served by the adapter instance of plugin plugins\.yml, "
                                          r"which is used as it was built: it cannot be given the default query "
                                          r"api-version=2024-06-01"):
        table.adapter("mine", default_query=QUERY)
    table.registry.register_adapter(["built"], OpenAIChatAdapter(KEY, base_url=BASE, default_query=QUERY))
    assert table.adapter("built", default_query=QUERY) is table.registry.resolve("built")
