"""One ``dsh-replay check`` case: replayed, judged as it streams, its chunks not kept.

``replay_case`` (the core the fixture and the report share) keeps every chunk
an adapter yields: a test is handed them. ``check`` only judges them, and for
that it needs, per call, the rules run chunk by chunk as they arrive, the
golden bytes written chunk by chunk into one buffer, and two counts. So this
replay keeps those, and drops each chunk once it is judged and written: a
200 MB body is about 1.7 M chunks, and a chunk object with its golden line kept
apart costs more than the body's bytes it came from.

The rest — reading the cassette, choosing the adapter, judging rules, golden and
unplayed interactions — is ``replay_case``'s own, so the verdicts are the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..adapters.route_table import RouteTable
from ..cassette.replay import AdapterCache, CaseResult, Outcome, _judge_case, case_options
from ..cassette.session import use_cassette
from ..cassette.store import Cassette
from ..errors import CassetteError, DshReplayError
from ..protocol.adapter import LlmAdapter
from ..protocol.chunks import BlockStart
from ..protocol.jsonl import JsonlWriter
from ..protocol.options import GenerateOptions
from ..protocol.validator import SequenceValidator

__all__ = ["StreamedOutcome", "replay_streamed", "run_streamed"]


@dataclass
class StreamedOutcome(Outcome):
    """An adapter run without its chunks (``chunks`` stays empty): their golden bytes and counts instead."""

    written: JsonlWriter = field(default_factory=JsonlWriter)
    block_count: int = 0

    def golden_bytes(self) -> bytes:
        return self.written.getvalue(self.raised)

    @property
    def blocks(self) -> int:
        return self.block_count


@dataclass
class _StreamedCase(CaseResult):
    @property
    def chunks(self) -> int:
        return sum(o.written.count if isinstance(o, StreamedOutcome) else len(o.chunks) for o in self.outcomes)


async def run_streamed(adapter: LlmAdapter, options: GenerateOptions) -> StreamedOutcome:
    """``run_adapter`` with its defaults, each chunk validated and written as it arrives, then dropped."""
    outcome = StreamedOutcome()
    validator = SequenceValidator()
    try:
        async for chunk in adapter.stream(options):
            outcome.written.add(chunk)
            outcome.block_count += type(chunk) is BlockStart
            validator.feed(chunk)
    except Exception as exc:
        if isinstance(exc, CassetteError):
            raise  # a cassette problem is never the adapter's answer
        outcome.raised = exc
    if outcome.raised is None:
        validator.finish()
    outcome.violations = list(validator.violations)
    return outcome


async def replay_streamed(
    path: Path,
    routes: RouteTable,
    *,
    fragmentation: str = "recorded",
    update_golden: bool = False,
    adapters: AdapterCache | None = None,
) -> CaseResult:
    """``replay_case(path, routes, ...)``, with the outcomes of :func:`run_streamed`."""
    started = time.perf_counter()
    result = _StreamedCase(cassette=path)
    try:
        cassette = Cassette.load(path)
        result.route, calls, base_url = case_options(cassette)
        result.fragments = sum(len(i.fragment_sizes()) for i in cassette.interactions)
        drop_reasoning = bool((cassette.metadata.get("adapter") or {}).get("drop_reasoning", False))
        pick = adapters.adapter if adapters is not None else routes.adapter
        adapter = pick(result.route, base_url=base_url, drop_reasoning=drop_reasoning)
        async with use_cassette(path, "none", fragmentation=fragmentation, cassette=cassette) as session:
            for options in calls:
                result.outcomes.append(await run_streamed(adapter, options))
        unplayed = len(session.unplayed)
        # the recorded bodies are done with: the golden comparison reads the golden beside them
        del cassette, session
        _judge_case(result, path, update_golden=update_golden, unplayed=unplayed)
    except DshReplayError as exc:
        result.short = type(exc).__name__
        result.problem = str(exc)
    result.seconds = time.perf_counter() - started
    return result
