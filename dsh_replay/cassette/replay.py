"""Run an adapter and judge its chunks: the shared core of the fixture, the
cassette-driven test items, ``dsh-replay check`` and ``dsh-replay trace``.
"""

from __future__ import annotations

import re
import time
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ..adapters._base import HttpAdapter
from ..adapters.route_table import RouteTable
from ..errors import CassetteError, ConfigError, DshReplayError
from ..protocol.adapter import LlmAdapter
from ..protocol.chunks import BlockStart, StreamChunk
from ..protocol.jsonl import dump_jsonl, load_golden
from ..protocol.options import GenerateOptions, Message
from ..protocol.validator import SequenceValidator, Violation
from ..wire.transport import RetryPolicy
from .adapter_settings import AdapterSettings, adapter_settings
from .files import atomic_write
from .golden import golden_path_for, judge_golden_file
from .intercept import answer_async, current_handler, install, replay_response, uninstall
from .pacing import Fragmentation
from .session import use_cassette
from .store import Cassette, Interaction

__all__ = ["AdapterCache", "AdapterSettings", "CaseResult", "Outcome", "adapter_settings", "replay_case", "run_adapter",
           "trace_body"]


@dataclass
class Outcome:
    """What one adapter run produced: its chunks, what it raised, the rules it broke."""

    chunks: list[StreamChunk] = field(default_factory=list)
    raised: BaseException | None = None
    violations: list[Violation] = field(default_factory=list)

    def golden_bytes(self) -> bytes:
        return dump_jsonl(self.chunks, self.raised)

    @property
    def blocks(self) -> int:
        return sum(1 for chunk in self.chunks if type(chunk) is BlockStart)


async def run_adapter(
    adapter: LlmAdapter,
    options: GenerateOptions,
    *,
    allow_interleaving: bool = False,
    json_arguments: bool = True,
    capture: type[BaseException] | tuple[type[BaseException], ...] = Exception,
    on_violation: Callable[[Violation], None] | None = None,
) -> Outcome:
    """Iterate ``adapter.stream(options)``, checking each chunk as it arrives.

    An exception of a ``capture`` type ends the run and is kept in ``raised``
    (the chunks yielded before it are kept too); anything else propagates.
    """
    outcome = Outcome()
    validator = SequenceValidator(allow_interleaving=allow_interleaving, json_arguments=json_arguments)
    chunks = outcome.chunks
    try:
        async for chunk in adapter.stream(options):
            chunks.append(chunk)
            if on_violation is not None:
                for violation in validator.feed(chunk):
                    on_violation(violation)
    except capture as exc:
        if isinstance(exc, CassetteError):
            raise  # a cassette problem is never the adapter's answer
        outcome.raised = exc
    if on_violation is None:  # nobody to tell as they happened: the rules run over the whole sequence at once
        validator.feed_all(chunks)
    if outcome.raised is None:
        validator.finish()
    outcome.violations = list(validator.violations)
    return outcome


# -- cassette cases ------------------------------------------------------------


@dataclass
class CaseResult:
    """One cassette replayed through its route's adapter and judged (every call of it)."""

    cassette: Path
    route: str = "?"
    fragments: int = 0
    #: one outcome per recorded call, in order
    outcomes: list[Outcome] = field(default_factory=list)
    golden: str = ""  # "matched" | "written" | "updated" | "differs" | "missing" | "unreadable" (the last judged)
    problem: str = ""
    #: the problem in a few words, for a table cell
    short: str = ""
    #: (file, 1-based line) where the problem shows: the golden line of the first difference or
    #: of the chunk that broke a rule; None when no line is known
    where: tuple[Path, int] | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problem

    @property
    def chunks(self) -> int:
        return sum(len(outcome.chunks) for outcome in self.outcomes)

    @property
    def blocks(self) -> int:
        return sum(outcome.blocks for outcome in self.outcomes)

    @property
    def verdict(self) -> str:
        if self.problem:
            return f"FAIL {self.short or 'error'}"
        raised = [type(o.raised).__name__ for o in self.outcomes if o.raised is not None]
        suffix = f" (raised {', '.join(raised)})" if raised else ""
        written = f", golden {self.golden}" if self.golden in ("written", "updated") else ""
        return f"ok{suffix}{written}"


def case_options(cassette: Cassette) -> tuple[str, list[GenerateOptions], str | None]:
    """(route, the options of every recorded call, base_url) from a cassette's metadata."""
    metadata = cassette.metadata
    route = metadata.get("route")
    for name, value, wanted in (("route", route, "a route name"), ("options", metadata.get("options"), "a mapping")):
        if value is not None and not isinstance(value, str if name == "route" else dict):
            # there, but not what it must be: saying it is missing would send the reader looking elsewhere
            raise CassetteError(
                f"cassette {cassette.path}: dsh_replay.{name} must be {wanted}, not {type(value).__name__} "
                f"({value!r:.60}); fix it or re-record the cassette", path=str(cassette.path))
    if not isinstance(route, str) or not isinstance(metadata.get("options"), dict):
        raise CassetteError(
            f"cassette {cassette.path} has no dsh_replay route/options metadata, so it cannot be "
            "replayed without its test; record it through the dsh_replay fixture or `dsh-replay record`",
            path=str(cassette.path),
        )
    follow_ups = metadata.get("follow_ups") or []
    if not isinstance(follow_ups, list):
        raise CassetteError(f"cassette {cassette.path}: dsh_replay.follow_ups must be a list of options",
                            path=str(cassette.path))
    located = [("dsh_replay.options", metadata["options"])]
    located += [(f"dsh_replay.follow_ups[{n}]", data) for n, data in enumerate(follow_ups)]
    try:
        calls = [GenerateOptions.from_json(data, where) for where, data in located]
    except ConfigError as exc:
        raise CassetteError(f"cassette {cassette.path}: {exc}; fix it or re-record the cassette",
                            path=str(cassette.path)) from None
    base_url = metadata.get("base_url")
    return route, calls, base_url if isinstance(base_url, str) else None


class _Offline(httpx.AsyncBaseTransport):
    """The shared replay client's own transport: what the cassette does not answer never leaves."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise CassetteError(f"{request.method} {request.url} was not answered by a cassette: "
                            "a replay never reaches the network")


class _ReplayClient(httpx.AsyncClient):
    """The shared replay client: each request goes straight to the active cassette session.

    What ``AsyncClient.send`` does around a transport — auth, redirects, cookies,
    logging — has nothing to act on in an offline replay, and costs about as
    much as replaying a short cassette; the adapter's own path (its request,
    ``send(stream=True)``, the streamed body, closing) is the same as live.
    """

    def __init__(self) -> None:
        # no connection pool, no TLS context: nothing is ever sent through it
        self._offline = _Offline()
        super().__init__(transport=self._offline)

    async def send(self, request: httpx.Request, *, stream: bool = False, **_: Any) -> httpx.Response:
        if self.is_closed:
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        session = current_handler()  # the calling task's: concurrent replays share this client
        if session is None:
            return await self._offline.handle_async_request(request)
        response: httpx.Response = await answer_async(session, request, self._offline, httpx)
        response.request = request
        if not stream:
            await response.aread()
        return response


@dataclass(frozen=True, slots=True, kw_only=True)
class _InstantRetry(RetryPolicy):
    """The same decisions to retry or give up, without the wait: a replayed 429 is answered at once."""

    def delay(self, attempt: int, retry_after: float | None = None, *, jitter: float | None = None) -> float | None:
        waited = RetryPolicy.delay(self, attempt, retry_after, jitter=jitter)
        return None if waited is None else 0.0


class AdapterCache:
    """Replay adapters built once per (route, base_url, drop_reasoning, default_query), over one shared client.

    Building an adapter and, for one without a client of its own, an httpx
    client per stream cost more than replaying a short cassette; a run of many
    cases shares them. The shared client never reaches the network: every
    request it sends is answered by the active cassette session, which is also
    why the adapters do not wait between retries.
    """

    def __init__(self, routes: RouteTable) -> None:
        self.routes = routes
        self._adapters: dict[tuple[str, str | None, bool, tuple[tuple[str, str], ...]], LlmAdapter] = {}
        self._client: httpx.AsyncClient | None = None

    def adapter(self, route: str, *, base_url: str | None, drop_reasoning: bool = False,
                default_query: Mapping[str, str] | None = None) -> LlmAdapter:
        query = dict(default_query or {})
        key = (route, base_url, drop_reasoning, tuple(sorted(query.items())))
        adapter = self._adapters.get(key)
        if adapter is None:
            adapter = self.routes.adapter(route, base_url=base_url, drop_reasoning=drop_reasoning, default_query=query)
            # a plugin's adapter is its registry's own instance, used elsewhere too: left as it is
            if isinstance(adapter, HttpAdapter) and route not in self.routes.registry:
                if adapter.client is None:
                    adapter.client = self._shared_client()
                if type(adapter.retry) is RetryPolicy:
                    adapter.retry = _InstantRetry(max_retries=adapter.retry.max_retries,
                                                  base_delay=adapter.retry.base_delay,
                                                  max_delay=adapter.retry.max_delay)
            self._adapters[key] = adapter
        return adapter

    def _shared_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = _ReplayClient()
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def replay_case(
    path: Path,
    routes: RouteTable,
    *,
    fragmentation: str | Fragmentation = "recorded",
    speed: float = 0.0,
    update_golden: bool = False,
    allow_unplayed: bool = False,
    adapters: AdapterCache | None = None,
    cassette: Cassette | None = None,
) -> CaseResult:
    """Replay one cassette offline through its route's adapter, call by call, and judge each golden.

    ``adapters``: reuse adapters across cases (a fresh one per case without it). ``cassette``: the
    case already read (a plain vcrpy cassette read as a case is never on disk as one); its goldens
    are beside ``path``.
    """
    started = time.perf_counter()
    result = CaseResult(cassette=path)
    try:
        if cassette is None:
            cassette = Cassette.load(path)
        result.route, calls, base_url = case_options(cassette)
        result.fragments = sum(len(i.fragment_sizes()) for i in cassette.interactions)
        pick = adapters.adapter if adapters is not None else routes.adapter
        adapter = pick(result.route, base_url=base_url, **adapter_settings(cassette).kwargs())
        # the cassette read above is the one replayed: a second read would double the cost
        async with use_cassette(path, "none", fragmentation=fragmentation, speed=speed,
                                cassette=cassette) as session:
            for options in calls:
                result.outcomes.append(await run_adapter(adapter, options))
        _judge_case(result, path, update_golden=update_golden, unplayed=len(session.unplayed) if not allow_unplayed else 0)
    except DshReplayError as exc:
        result.short = type(exc).__name__
        result.problem = str(exc)
    result.seconds = time.perf_counter() - started
    return result


def _judge_case(result: CaseResult, path: Path, *, update_golden: bool, unplayed: int) -> None:
    for call, outcome in enumerate(result.outcomes, start=1):
        if outcome.violations:
            first = outcome.violations[0]
            more = f" (+{len(outcome.violations) - 1} more)" if len(outcome.violations) > 1 else ""
            result.short = f"{first.rule} (chunk {first.position})"
            result.problem = f"{first.rule} at chunk {first.position}: {first.message}{more}"
            golden = golden_path_for(path, call)
            # a golden holds one chunk per line, so the chunk's line is known when there is one
            result.where = (golden, first.position + 1) if golden.is_file() else None
            return
    if unplayed:
        result.short = "unplayed interactions"
        result.problem = f"{unplayed} recorded interaction(s) were not played"
        return
    for call, outcome in enumerate(result.outcomes, start=1):
        if update_golden and outcome.raised is not None and _golden_finished(path, call):
            # an update would turn a stream that finished into the adapter's crash: that
            # is a regression to look at, not an expected error to write down
            golden = golden_path_for(path, call)
            result.golden, result.short = "kept", "golden kept"
            result.problem = (
                f"golden {golden} was not updated: the adapter now raises {type(outcome.raised).__name__} "
                f"({outcome.raised}) where the golden finished; if that error is intended, delete the golden "
                "and run --update again"
            )
            return
        result.golden, result.problem = judge_golden(path, outcome.golden_bytes(), update=update_golden, call=call)
        if result.problem:
            result.short = f"golden {result.golden}"
            if result.golden == "differs":
                found = _FIRST_DIFFERENCE.search(result.problem)
                result.where = (golden_path_for(path, call), int(found.group(1)) if found else 1)
            return


_FIRST_DIFFERENCE = re.compile(r"first difference at chunk \d+ \(line (\d+)\)")


def _golden_finished(cassette: Path, call: int) -> bool:
    """Whether the golden of ``call`` exists and ends in a finished stream, not a raised line."""
    try:
        return load_golden(golden_path_for(cassette, call)).raised is None
    except (OSError, DshReplayError):
        return False


def judge_golden(
    cassette: Path,
    actual: bytes,
    *,
    update: bool,
    call: int = 1,
    write_missing: bool = False,
    write: Callable[[Path, bytes], None] = atomic_write,
) -> tuple[str, str]:
    """(golden status, problem) after comparing — or writing — the golden of ``cassette``.

    ``write`` puts a new or changed golden on disk (the fixture defers it to the
    end of a test that passed). A golden that would hold a credential is refused:
    an adapter's error message can quote a URL with its key.
    """
    return judge_golden_file(golden_path_for(cassette, call), actual, update=update, write_missing=write_missing,
                             write=write)


# -- trace ----------------------------------------------------------------------

TRACE_BASE_URL = "http://dsh-replay.invalid"


class _AnswerEverything:
    """An interception handler that answers every request with one body."""

    def __init__(self, interaction: Interaction, fragmentation: Fragmentation) -> None:
        self.interaction = interaction
        self.fragmentation = fragmentation

    def handle(self, request: object, inner: object, lib: types.ModuleType, is_async: bool) -> object:
        return replay_response(
            lib, request, self.interaction, fragmentation=self.fragmentation, speed=0.0,
            fault=None, path="<trace>", is_async=is_async,
        )


async def trace_body(
    body: bytes,
    *,
    route: str,
    routes: RouteTable | None = None,
    fragmentation: str | Fragmentation = "single",
    drop_reasoning: bool = False,
) -> Outcome:
    """Feed a raw provider body through a route's adapter, offline.

    Every request the adapter makes is answered with ``body`` (status 200), cut
    as ``fragmentation`` says; the adapter gets a placeholder key and base URL.
    """
    content_type = "application/x-ndjson" if route == "ollama" else "text/event-stream"
    interaction = Interaction(
        request=None, status=200, reason="OK", headers=[("content-type", content_type)], body=body,
    )
    adapter = (routes or RouteTable.load()).adapter(route, base_url=TRACE_BASE_URL, drop_reasoning=drop_reasoning)
    handler = _AnswerEverything(interaction, Fragmentation.parse(fragmentation))
    install(handler)
    try:
        options = GenerateOptions(model="trace", messages=[Message(role="user", content="trace")])
        return await run_adapter(adapter, options)
    finally:
        uninstall(handler)
