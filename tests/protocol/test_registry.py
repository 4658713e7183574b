from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dsh_replay import ConfigError, GenerateOptions, LlmAdapter, LlmRegistry, StreamChunk


class EchoAdapter(LlmAdapter):
    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        return
        yield  # an async generator that yields nothing


def test_register_and_resolve_several_routes_to_one_instance() -> None:
    registry = LlmRegistry()
    adapter = EchoAdapter()
    registry.register_adapter(["my-provider", "my-provider-eu"], adapter)
    assert registry.resolve("my-provider") is adapter
    assert registry.resolve("my-provider-eu") is adapter
    assert registry.routes() == ["my-provider", "my-provider-eu"]


def test_registering_a_route_twice_names_it() -> None:
    registry = LlmRegistry()
    registry.register_adapter(["a"], EchoAdapter())
    with pytest.raises(ConfigError, match=r"route 'a' is already registered"):
        registry.register_adapter(["b", "a"], EchoAdapter())
    # the failed call registered nothing
    assert registry.routes() == ["a"]


def test_duplicate_within_one_call() -> None:
    with pytest.raises(ConfigError, match="'x' is already registered"):
        LlmRegistry().register_adapter(["x", "x"], EchoAdapter())


def test_empty_route_list() -> None:
    with pytest.raises(ConfigError, match="at least one route"):
        LlmRegistry().register_adapter([], EchoAdapter())


def test_routes_given_as_a_string() -> None:
    with pytest.raises(ConfigError, match=r"not the string 'my-provider'; write \['my-provider'\]"):
        LlmRegistry().register_adapter("my-provider", EchoAdapter())


def test_class_instead_of_instance() -> None:
    with pytest.raises(ConfigError, match="pass an instance, not the class"):
        LlmRegistry().register_adapter(["a"], EchoAdapter)  # type: ignore[arg-type]


def test_unknown_route_lists_known_routes_and_nearest() -> None:
    registry = LlmRegistry()
    registry.register_adapter(["my-provider", "other"], EchoAdapter())
    with pytest.raises(ConfigError) as info:
        registry.resolve("my-provider-2")
    message = str(info.value)
    assert "unknown route 'my-provider-2'" in message
    assert "Did you mean 'my-provider'?" in message
    assert "Known routes: my-provider, other" in message


def test_adapter_is_abstract() -> None:
    with pytest.raises(TypeError):
        LlmAdapter()  # type: ignore[abstract]


@pytest.mark.parametrize("route", [["a"], None, 5])
def test_resolve_takes_a_route_name(route: object) -> None:
    registry = LlmRegistry()
    with pytest.raises(ConfigError, match=r"a route is a name \(a str\), got "):
        registry.resolve(route)  # type: ignore[arg-type]


def test_routes_must_be_a_list() -> None:
    with pytest.raises(ConfigError, match="routes must be a list of route names, got 5"):
        LlmRegistry().register_adapter(5, EchoAdapter())  # type: ignore[arg-type]
