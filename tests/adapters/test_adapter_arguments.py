"""Bad constructor arguments fail at once, as ConfigError naming the argument (adapters/_base.py).

Each case used to be accepted and fail later: inside httpx as an AttributeError
or TypeError, or mid-stream as a StreamInterruptedError that put the API key in
its message.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dsh_replay import ConfigError, GenerateOptions, Message
from dsh_replay.adapters import BUILTIN_ROUTES, HttpAdapter, RetryPolicy, adapter_class

KEY = "sk-test-Arguments0123456789abcdef"
BASE = "https://provider.example/v1"
ROUTES = sorted(BUILTIN_ROUTES)
OPTIONS = GenerateOptions(model="some-model", messages=[Message(role="user", content="hi")])


def build(route: str, api_key: Any = KEY, **kwargs: Any) -> HttpAdapter[Any]:
    kwargs.setdefault("base_url", BASE)
    adapter: HttpAdapter[Any] = adapter_class(route)(api_key, **kwargs)
    return adapter


def config_error(route: str, api_key: Any = KEY, **kwargs: Any) -> str:
    """The ConfigError message the constructor raises for these arguments."""
    with pytest.raises(ConfigError) as caught:
        build(route, api_key, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "base_url", [123, "not a url", "http://", "ftp://files.example/v1", "https://api.example/v1\n", "http://a b"]
)
def test_base_url_must_be_an_http_url_with_a_host(route: str, base_url: object) -> None:
    message = config_error(route, base_url=base_url)
    assert "base_url" in message and "http(s) URL with a host" in message


def test_a_mistyped_base_url_does_not_show_its_password() -> None:
    message = config_error("openai", base_url="htps://user:hunter2@proxy.example/v1")
    assert "hunter2" not in message and "proxy.example" in message


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("read_timeout", [float("nan"), float("inf"), "5", -1, 0, True, None, 10**400])
def test_read_timeout_must_be_a_finite_positive_number(route: str, read_timeout: object) -> None:
    message = config_error(route, read_timeout=read_timeout)
    assert "read_timeout" in message and "> 0" in message
    assert len(message) < 300  # a 400-digit int is shortened, not printed whole


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("retry", [3, None, "default", {"max_retries": 0}])
def test_retry_must_be_a_retry_policy(route: str, retry: object) -> None:
    message = config_error(route, retry=retry)
    assert "retry must be a RetryPolicy" in message and repr(retry) in message


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("client", ["x", httpx.Client])
def test_client_must_be_an_async_client(route: str, client: object) -> None:
    assert "client must be an httpx.AsyncClient" in config_error(route, client=client)


@pytest.mark.parametrize("route", ROUTES)
def test_drop_reasoning_must_be_a_bool(route: str) -> None:
    assert "drop_reasoning" in config_error(route, drop_reasoning="yes")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("headers", [["a"], "x-a: 1", {"x-a": 1}, {"x-a": b"1"}, {1: "x"}, {"x a": "1"}])
def test_headers_must_map_str_to_str(route: str, headers: object) -> None:
    assert "headers" in config_error(route, headers=headers)


@pytest.mark.parametrize("value", ["proxy-secret\r\nx-evil: 1", "proxy-secrét"])
def test_a_bad_header_value_is_named_but_not_shown(value: str) -> None:
    message = config_error("anthropic", headers={"x-proxy-key": value})
    assert "headers['x-proxy-key']" in message and "proxy-secr" not in message


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "api_key",
    ["sk-LeakMe\nevil: x", "sk-LeakMe\r\n", "sk-LeakMe é", "sk-LeakMe key", " sk-LeakMe", "sk-LeakMe\t"],
)
def test_a_malformed_api_key_fails_without_showing_the_key(route: str, api_key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build(route, api_key)
    message = str(caught.value)
    assert "api_key must be printable ASCII with no spaces or line breaks" in message
    assert "LeakMe" not in message and "LeakMe" not in repr(caught.value)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("api_key", [123, b"sk-bytes-key"])
def test_an_api_key_that_is_not_a_str_is_refused(route: str, api_key: object) -> None:
    message = config_error(route, api_key)
    assert "api_key must be a str" in message and "bytes-key" not in message


# -- what was valid stays valid ----------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_valid_arguments_are_kept(route: str) -> None:
    client = httpx.AsyncClient()
    policy = RetryPolicy(max_retries=0)
    adapter = build(
        route, base_url="http://[::1]:8000/v1/", client=client, retry=policy, read_timeout=5,
        drop_reasoning=True, headers={"X-Trace": "a b\tc", "x-empty": ""},
    )
    assert (adapter.base_url, adapter.client, adapter.retry, adapter.read_timeout) == (
        "http://[::1]:8000/v1", client, policy, 5,
    )
    assert adapter.drop_reasoning is True
    assert adapter.build_request(OPTIONS).headers["X-Trace"] == "a b\tc"


@pytest.mark.parametrize("route", ["ollama", "openai-compatible"])
@pytest.mark.parametrize("api_key", [None, ""])
def test_keyless_routes_still_take_no_key(route: str, api_key: str | None) -> None:
    request = build(route, api_key, base_url="http://localhost:11434").build_request(OPTIONS)
    assert not any(name.lower() == "authorization" for name in request.headers)


@pytest.mark.parametrize("route", sorted(set(ROUTES) - {"ollama", "openai-compatible"}))
def test_a_missing_key_is_still_refused(route: str) -> None:
    assert "needs an api_key" in config_error(route, "")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("options", [None, {"model": "m", "messages": []}, "m"])
@pytest.mark.asyncio
async def test_stream_refuses_options_that_are_not_generate_options(route: str, options: object) -> None:
    adapter = build(route)
    with pytest.raises(ConfigError, match=r"\.stream: options must be GenerateOptions, got "):
        async for _ in adapter.stream(options):  # type: ignore[arg-type]
            pass
