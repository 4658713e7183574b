"""Re-record a cassette's calls against the live provider and compare shapes: drift detection.

``dsh-replay drift`` and ``pytest --record-mode=verify`` share this. The old
side is the cassette replayed offline; the new side is the same requests sent
to the provider (the adapter the caller built: the cassette's base URL, the
test's adapter) and recorded into a *separate* file, never over the cassette.
Both sides are measured with deep wire coverage, so the comparison
(:func:`~dsh_replay.wire.drift.compare_streams`) sees event kinds, field paths
and the chunk shape.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..adapters.route_table import RouteTable
from ..errors import ConfigError, DshReplayError, ProviderError
from ..protocol.adapter import LlmAdapter
from ..protocol.chunks import StreamChunk
from ..protocol.options import GenerateOptions
from ..wire.coverage import WireCoverage, collect_coverage
from ..wire.drift import ChunkShape, StreamDrift, compare_streams
from .replay import Outcome, replay_case, run_adapter
from .session import use_cassette

__all__ = ["CaseDrift", "Side", "key_variable", "live_adapter", "recorded_side", "rerecord", "rerecord_heard",
           "side_of"]

#: local servers take no key
_KEY_OPTIONAL = frozenset(("ollama", "openai-compatible"))


def key_variable(route: str) -> str:
    """The environment variable the key of ``route`` is read from (plugin routes get theirs from the YAML)."""
    from ..adapters import BUILTIN_ROUTES

    return BUILTIN_ROUTES[route][2] if route in BUILTIN_ROUTES else f"{route.upper().replace('-', '_')}_API_KEY"


def live_adapter(routes: RouteTable, route: str, base_url: str | None, *, drop_reasoning: bool = False,
                 default_query: Mapping[str, str] | None = None) -> LlmAdapter:
    """The route's adapter for the live provider, its key from :func:`key_variable` (as ``record`` takes it)."""
    if route in routes.registry:
        return routes.registry.resolve(route)  # a plugin's adapter: its own key and URL
    factory = routes.factories.get(route)
    if factory is None:
        return routes.adapter(route)  # raises the unknown-route error listing the routes
    key = os.environ.get(key_variable(route), "")
    if not key and route not in _KEY_OPTIONAL:
        raise ConfigError(f"route {route!r} needs its key in the environment variable {key_variable(route)}")
    kwargs: dict[str, object] = {"base_url": base_url} if base_url else {}
    if drop_reasoning:
        kwargs["drop_reasoning"] = True
    if default_query:  # the live endpoint needs them as much as the replayed one (Azure's api-version)
        kwargs["default_query"] = dict(default_query)
    adapter: LlmAdapter = factory(api_key=key, **kwargs)
    return adapter


@dataclass(frozen=True, slots=True)
class Side:
    """One call as one side saw it: its chunk shape and its (deep) wire coverage."""

    shape: ChunkShape
    coverage: WireCoverage | None


def side_of(outcome: Outcome, coverage: WireCoverage | None) -> Side:
    return Side(ChunkShape.of(outcome.chunks, outcome.raised), coverage)


def _streams_per_call(outcomes: Sequence[Outcome], streams: Sequence[WireCoverage]) -> list[WireCoverage | None]:
    # an HttpAdapter translates one stream per call; any other adapter none we can see
    return list(streams) if len(streams) == len(outcomes) else [None] * len(outcomes)


async def recorded_side(path: Path, routes: RouteTable) -> tuple[list[Side], str]:
    """Every call of the cassette at ``path``, replayed offline: (sides, problem or "")."""
    with collect_coverage(fields=True) as seen:
        result = await replay_case(path, routes)
    streams = _streams_per_call(result.outcomes, seen.streams)
    return [side_of(o, s) for o, s in zip(result.outcomes, streams, strict=True)], result.problem


async def rerecord(adapter: LlmAdapter, calls: Sequence[GenerateOptions], target: Path, *,
                   route: str | None) -> list[Side]:
    """Send ``calls`` through ``adapter`` live, recording them into ``target`` (rewritten); one side per call."""
    outcomes: list[Outcome] = []
    with collect_coverage(fields=True) as seen:
        async with use_cassette(target, "rewrite", route=route, options=calls[0]) as session:
            base_url = getattr(adapter, "base_url", None)
            if isinstance(base_url, str):
                session.cassette.metadata["base_url"] = base_url
            for options in calls:
                outcomes.append(await run_adapter(adapter, options))
            if len(calls) > 1:
                session.cassette.metadata["follow_ups"] = [options.to_json() for options in calls[1:]]
    streams = _streams_per_call(outcomes, seen.streams)
    return [side_of(o, s) for o, s in zip(outcomes, streams, strict=True)]


@dataclass
class CaseDrift:
    """One cassette's calls, recorded and fresh, compared."""

    cassette: Path
    recorded: Path | None = None
    calls: list[StreamDrift] = field(default_factory=list)
    problem: str = ""

    @property
    def breaking(self) -> bool:
        return bool(self.problem) or any(call.breaking for call in self.calls)

    @classmethod
    async def of(cls, cassette: Path, target: Path, routes: RouteTable, *, base_url: str | None = None) -> CaseDrift:
        """Replay ``cassette``, re-record its calls live into ``target``, compare; a problem is kept, not raised."""
        from .replay import adapter_settings, case_options
        from .store import Cassette

        try:
            loaded = Cassette.load(cassette)
            route, calls, recorded_base = case_options(loaded)
            settings = adapter_settings(loaded)
            del loaded
            old, problem = await recorded_side(cassette, routes)
            if problem and not old:
                return cls(cassette=cassette, problem=f"the cassette does not replay: {problem}")
            adapter = live_adapter(routes, route, base_url or recorded_base, **settings.kwargs())
            new, unheard = await rerecord_heard(adapter, calls, target, route=route)
            if unheard:  # nothing of the provider's stream to compare
                return cls(cassette=cassette, problem=unheard)
            return cls.compare(cassette, target, old, new)
        except ConfigError as exc:
            return cls(cassette=cassette, problem=f"configuration error: {exc}")
        except DshReplayError as exc:
            return cls(cassette=cassette, problem=f"{type(exc).__name__}: {exc}")

    @staticmethod
    def compare(cassette: Path, recorded: Path, old: Sequence[Side], new: Sequence[Side]) -> CaseDrift:
        if len(old) != len(new):
            raise DshReplayError(f"{cassette}: {len(old)} recorded call(s) but {len(new)} fresh one(s)")
        calls = [compare_streams(n, a.coverage, b.coverage, a.shape, b.shape)
                 for n, (a, b) in enumerate(zip(old, new, strict=True), start=1)]
        return CaseDrift(cassette=cassette, recorded=recorded, calls=calls)

    def lines(self) -> list[str]:
        """``call N: ...`` for each change (a cassette of one call says no ``call 1``)."""
        if self.problem:
            return [self.problem]
        many = len(self.calls) > 1
        return [f"call {call.call}: {line}" if many else line for call in self.calls for line in call.lines()]


async def rerecord_heard(adapter: LlmAdapter, calls: Sequence[GenerateOptions], target: Path, *,
                         route: str | None) -> tuple[list[Side], str]:
    """:func:`rerecord`, and why no stream was heard when a call got an error status or no connection ("" if all were)."""
    live = _LiveAdapter(adapter)
    new = await rerecord(live, calls, target, route=route)
    if live.unheard is None:
        return new, ""
    return new, _not_heard(live.unheard, str(live.base_url or "the adapter's default URL"), route or "?")


class _LiveAdapter(LlmAdapter):
    """The route's live adapter, keeping the first error it raised before any chunk from a provider never heard.

    Such a call says nothing of the provider's stream: comparing it would report
    every recorded kind as vanished and the chunk shape as broken.
    """

    def __init__(self, adapter: LlmAdapter) -> None:
        self.adapter = adapter
        self.base_url = getattr(adapter, "base_url", None)  # the fresh recording keeps it, as for the adapter itself
        self.unheard: ProviderError | None = None

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        heard = False
        chunks = self.adapter.stream(options)
        try:
            async for chunk in chunks:
                heard = True
                yield chunk
        except ProviderError as exc:
            if not heard and self.unheard is None and _unheard(exc):
                self.unheard = exc
            raise
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()


def _unheard(exc: ProviderError) -> bool:
    """An error status (401, 403, 404, 429, 5xx...) or a connection that failed: no stream was read."""
    import httpx

    return exc.status is not None or isinstance(exc.__cause__, httpx.TransportError)


def _not_heard(exc: ProviderError, url: str, route: str) -> str:
    what = f"{url} answered status {exc.status}" if exc.status is not None else f"{url} could not be reached"
    return f"{what} (route {route!r}), so no stream was compared: {type(exc).__name__}: {exc}"
