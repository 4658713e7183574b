"""The adapter contract and the route registry (the seed's ``ctx.llm``)."""

from __future__ import annotations

import abc
import contextlib
import difflib
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence

from ..errors import ConfigError
from .chunks import StreamChunk
from .options import GenerateOptions

__all__ = ["LlmAdapter", "LlmRegistry"]


class LlmAdapter(abc.ABC):
    """Translate a :class:`GenerateOptions` into a provider call, and its stream into chunks.

    Subclasses implement ``stream`` as an async generator::

        class MyAdapter(LlmAdapter):
            async def stream(self, options):
                ...
                yield BlockStart(index=0, block_type="text")

    An adapter only translates: it yields each increment as it arrives, raises
    a :class:`ProviderError` on failure and never forges a ``finish``.
    """

    @abc.abstractmethod
    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """Yield the chunks of one generation."""


def unknown_route_message(route: str, known: Sequence[str]) -> str:
    """The message for an unknown route: the known routes and the nearest match."""
    listing = ", ".join(sorted(known)) or "(none registered)"
    close = difflib.get_close_matches(route, list(known), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"unknown route {route!r}.{hint} Known routes: {listing}"


class LlmRegistry:
    """Maps provider routes to adapter instances; each route is bound once."""

    def __init__(self) -> None:
        self._adapters: dict[str, LlmAdapter] = {}

    def register_adapter(self, routes: Sequence[str], adapter: LlmAdapter) -> None:
        """Bind every route in ``routes`` to ``adapter`` (an instance, not a class)."""
        if isinstance(routes, str):
            raise ConfigError(
                f"routes must be a list of route names, not the string {routes!r}; "
                f"write [{routes!r}]"
            )
        if not isinstance(routes, Iterable):
            raise ConfigError(f"routes must be a list of route names, got {routes!r}")
        routes = list(routes)
        if not routes:
            raise ConfigError("register_adapter needs at least one route; got an empty list")
        if not isinstance(adapter, LlmAdapter):
            raise ConfigError(
                f"register_adapter needs an LlmAdapter instance; got {adapter!r} "
                "(pass an instance, not the class)"
            )
        for route in routes:
            if not isinstance(route, str) or not route:
                raise ConfigError(f"a route must be a non-empty string; got {route!r}")
        taken = [route for route in routes if route in self._adapters]
        duplicates = sorted({route for route in routes if routes.count(route) > 1})
        if taken or duplicates:
            which = ", ".join(repr(r) for r in (taken or duplicates))
            raise ConfigError(
                f"route {which} is already registered; each route is bound to one adapter. "
                f"Known routes: {', '.join(self.routes())}"
            )
        for route in routes:
            self._adapters[route] = adapter

    @contextlib.contextmanager
    def all_or_nothing(self) -> Iterator[None]:
        """Routes bound inside the block stay bound only if the block finishes."""
        before = dict(self._adapters)
        try:
            yield
        except BaseException:
            self._adapters = before
            raise

    def resolve(self, route: str) -> LlmAdapter:
        """The adapter bound to ``route``; ``ConfigError`` listing the known routes otherwise."""
        if not isinstance(route, str):
            raise ConfigError(f"a route is a name (a str), got {route!r}; known routes: {', '.join(self.routes())}")
        try:
            return self._adapters[route]
        except KeyError:
            raise ConfigError(unknown_route_message(route, self.routes())) from None

    def routes(self) -> list[str]:
        """Every registered route, sorted."""
        return sorted(self._adapters)

    def __contains__(self, route: object) -> bool:
        return route in self._adapters
