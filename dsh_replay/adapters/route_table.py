"""Which adapter serves a route, when a cassette is replayed without its test.

Routes come from, in order of precedence: a plugin YAML (``load_plugins``),
``[tool.dsh_replay.routes]`` in ``pyproject.toml`` (``"route" =
"pkg.module:AdapterClass"``), and the built-in adapters. An adapter built
here for replay gets a placeholder key: replay never sends it anywhere and
cassettes never match on credentials.

``[tool.dsh_replay.hosts]`` (``"my-vllm.internal:8000" = "openai-compatible"``)
says which route a recorded request to a host went to, for hosts the built-in
detection does not know (``dsh-replay import``): :func:`host_routes`.
"""

from __future__ import annotations

import difflib
import re
import reprlib
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..protocol.adapter import LlmAdapter, LlmRegistry, unknown_route_message
from ..protocol.fields import shown
from ..seed_config import import_config_module, load_plugins, read_config_text

__all__ = ["OFFLINE_KEY", "RouteTable", "host_routes", "pyproject_table"]

#: the key given to adapters built for replay; shaped so no scanner mistakes it
OFFLINE_KEY = "dsh-replay-offline"

#: the tables leading to the routes, outermost first
_ROUTES_TABLE = ("tool", "dsh_replay", "routes")
_HOSTS_TABLE = ("tool", "dsh_replay", "hosts")
#: a host name, or an IPv6 address in brackets, and an optional port: no scheme, user or path
_HOST = re.compile(r"(?:[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?|\[[0-9a-f:.]+\])(?::(?P<port>\d{1,5}))?")


def _toml() -> Any:
    """The TOML reader, imported when a pyproject.toml is read (most runs read none: a start-up saved)."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # type: ignore[import-not-found,unused-ignore]  # pytest depends on it there

    return tomli


def import_target(spec: str, where: str) -> Callable[..., Any]:
    """The class or factory ``module:attribute`` names; a bad one is a ``ConfigError`` that starts with ``where``."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{where} must name 'package.module:AdapterClass'; got {spec!r}")
    try:
        module = import_config_module(module_name, where)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import {module_name!r} ({exc})") from None
    try:
        target = getattr(module, attribute)
    except AttributeError:
        public = [name for name in dir(module) if not name.startswith("_")]
        close = difflib.get_close_matches(attribute, public, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{where}: module {module_name} has no {attribute!r}{hint}") from None
    if not callable(target):
        raise ConfigError(f"{where}: {spec} is not a class or factory")
    return target  # type: ignore[no-any-return]


def pyproject_table(path: Path, keys: tuple[str, ...] = _ROUTES_TABLE) -> Mapping[str, Any]:
    """The table ``keys`` names (``[tool.dsh_replay.routes]``) in the pyproject at ``path``, empty when absent."""
    toml = _toml()
    try:
        table: Mapping[str, Any] = toml.loads(read_config_text(path, str(path)))
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    for depth, key in enumerate(keys, 1):
        node = table.get(key, {})
        if not isinstance(node, Mapping):
            hint = ('. Routes are configured as [tool.dsh_replay.routes] "route" = "package.module:AdapterClass"'
                    if keys == _ROUTES_TABLE else "")
            raise ConfigError(f"{path}: [{'.'.join(keys[:depth])}] must be a table; got {reprlib.repr(node)}{hint}")
        table = node
    return table


def host_routes(pyproject: Path, known: Iterable[str] | None = None) -> dict[str, str]:
    """``[tool.dsh_replay.hosts]`` of ``pyproject``: host or ``host:port`` (lower case) -> route; ``{}`` without one.

    ``"my-vllm.internal:8000" = "openai-compatible"`` says that recorded requests to
    that host went to that route. ``known``: the routes it may name (by default the
    built-in ones and those of the file's own ``[tool.dsh_replay.routes]``); any other
    is a ConfigError naming the file, the key and the known routes.
    """
    if not pyproject.is_file():
        return {}
    table = pyproject_table(pyproject, _HOSTS_TABLE)
    if known is None:
        from . import BUILTIN_ROUTES

        known = [*BUILTIN_ROUTES, *pyproject_table(pyproject)]
    routes = sorted(set(known))
    hosts: dict[str, str] = {}
    for key, route in table.items():
        where = f"{pyproject} [tool.dsh_replay.hosts] {key!r}"
        host = key.strip().lower()
        found = _HOST.fullmatch(host)
        if found is None or (found["port"] is not None and not 0 < int(found["port"]) < 65536):
            raise ConfigError(f"{where} is not a host or host:port (e.g. \"my-vllm.internal:8000\"): "
                              "no scheme, user or path")
        if route not in routes:
            raise ConfigError(f"{where} names the route {shown(route)}, which is not a known route; the known "
                              f"routes are {', '.join(routes)}")
        hosts[host] = route
    return hosts


@dataclass
class RouteTable:
    """Route → how to build its adapter for offline replay."""

    factories: dict[str, Callable[..., Any]] = field(default_factory=dict)
    registry: LlmRegistry = field(default_factory=LlmRegistry)
    sources: dict[str, str] = field(default_factory=dict)
    #: ``[tool.dsh_replay.hosts]``: host or host:port -> route (:func:`host_routes`)
    hosts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, *, pyproject: Path | None = None, plugins: Path | None = None) -> RouteTable:
        from . import BUILTIN_ROUTES, adapter_class

        table = cls()
        for route in BUILTIN_ROUTES:
            table.factories[route] = _lazy_builtin(route, adapter_class)
            table.sources[route] = f"built-in ({BUILTIN_ROUTES[route][1]})"
        if pyproject is not None and pyproject.is_file():
            table._add_pyproject(pyproject)
        if plugins is not None:
            load_plugins(plugins, registry=table.registry)
            for route in table.registry.routes():
                table.sources[route] = f"plugin {plugins}"
        if pyproject is not None:
            table.hosts = host_routes(pyproject, table.routes())
        return table

    def _add_pyproject(self, path: Path) -> None:
        routes = pyproject_table(path)
        folder = str(path.parent.resolve())
        if folder not in sys.path:
            # routes name the project's own modules, importable from its root
            sys.path.insert(0, folder)
        for route, spec in routes.items():
            self.factories[route] = import_target(str(spec), f"{path} [tool.dsh_replay.routes]: route {route!r}")
            self.sources[route] = f"{path}: {spec}"

    def routes(self) -> list[str]:
        return sorted(set(self.factories) | set(self.registry.routes()))

    def adapter(self, route: str, *, base_url: str | None = None, drop_reasoning: bool = False,
                default_query: Mapping[str, str] | None = None) -> LlmAdapter:
        """An adapter for replaying ``route`` offline (``default_query``: passed on only when there is one)."""
        if route in self.registry:
            adapter = self.registry.resolve(route)
            if default_query and getattr(adapter, "default_query", None) != dict(default_query):
                raise ConfigError(
                    f"route {route!r} is served by the adapter instance of {self.sources.get(route, 'a plugin')}, "
                    f"which is used as it was built: it cannot be given the default query "
                    f"{_shown_query(default_query)}; build it with default_query={dict(default_query)!r}"
                )
            return adapter
        factory = self.factories.get(route)
        if factory is None:
            raise ConfigError(unknown_route_message(route, self.routes()))
        kwargs: dict[str, Any] = {"api_key": OFFLINE_KEY}
        if base_url:
            kwargs["base_url"] = base_url
        if drop_reasoning:
            kwargs["drop_reasoning"] = True
        if default_query:
            kwargs["default_query"] = dict(default_query)
        try:
            adapter = factory(**kwargs)
        except TypeError as exc:
            if default_query and "default_query" in str(exc):
                raise ConfigError(
                    f"route {route!r}: its adapter ({self.sources.get(route, route)}) takes no default_query, and "
                    f"this case needs the query parameter(s) {_shown_query(default_query)} on every request; give "
                    "the adapter a default_query keyword argument (HttpAdapter has one)"
                ) from None
            raise ConfigError(
                f"route {route!r}: cannot build its adapter as {self.sources.get(route, route)} "
                f"({', '.join(f'{name}=...' for name in kwargs)}): {exc}"
            ) from None
        if not isinstance(adapter, LlmAdapter):
            raise ConfigError(f"route {route!r}: {self.sources.get(route)} did not give an LlmAdapter")
        return adapter


def _shown_query(query: Mapping[str, str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in query.items())


def _lazy_builtin(route: str, adapter_class: Callable[[str], type[Any]]) -> Callable[..., Any]:
    def build(**kwargs: Any) -> Any:
        return adapter_class(route)(**kwargs)

    return build
