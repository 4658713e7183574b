"""What SPEC §5 asks of every shipped adapter, checked across all of them."""

from __future__ import annotations

import inspect

import pytest

from dsh_replay import GenerateOptions, LlmAdapter, Message
from dsh_replay.adapters import BUILTIN_ROUTES, HttpAdapter, adapter_class

KEY = "sk-test-ContractKey0123456789abcdef"
BASE = "https://provider.example/v1"
OPTIONS = GenerateOptions(model="some-model", messages=[Message(role="user", content="hi")])


@pytest.mark.parametrize("route", sorted(BUILTIN_ROUTES))
def test_api_key_is_explicit_and_stays_in_headers(route: str) -> None:
    cls = adapter_class(route)
    assert issubclass(cls, HttpAdapter) and issubclass(cls, LlmAdapter)
    assert cls.route == route
    # no default key: a caller must say which key (or None, for local servers)
    assert inspect.signature(cls).parameters["api_key"].default is inspect.Parameter.empty
    adapter = cls(KEY, base_url=BASE)
    request = adapter.build_request(OPTIONS)
    assert KEY not in request.url
    assert any(KEY in value for value in request.headers.values())
    assert KEY not in repr(adapter)


@pytest.mark.parametrize("route", sorted(BUILTIN_ROUTES))
def test_a_given_client_and_base_url_are_used(route: str) -> None:
    import httpx

    client = httpx.AsyncClient()
    adapter = adapter_class(route)(KEY, base_url=BASE + "/", client=client)
    assert adapter.client is client
    assert adapter.build_request(OPTIONS).url.startswith(BASE + "/")
