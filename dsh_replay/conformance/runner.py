"""Run one conformance case: the user's adapter against a recorded (or
fault-shaped) response, answered offline, judged by the rules and the golden.

Requests are answered by method and path only: an adapter of one's own may
shape its JSON body differently from ours and still be right, so body
differences are reported (and fail only under ``strict_requests``). Bodies are
served without pacing, and the replay's clock is virtual while a case runs: a
stalled stream times out at once, at the read timeout the adapter asked for,
instead of making the suite wait for it.
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson

from ..cassette import pacing
from ..cassette.golden import golden_diff
from ..cassette.intercept import install, replay_response, uninstall
from ..cassette.matching import changed_fields
from ..cassette.pacing import Clock
from ..errors import CassetteError, ConfigError
from ..protocol.adapter import LlmAdapter
from ..protocol.chunks import Finish
from ..protocol.jsonl import dump_jsonl, load_golden
from ..protocol.validator import SequenceValidator
from .cases import ConformanceCase

__all__ = ["CASE_TIMEOUT", "CaseVerdict", "Seen", "build_adapter", "judge_requests", "judge_runs", "run_case"]

#: seconds one case may take before it counts as a hang (generous: a loaded CI machine)
CASE_TIMEOUT = 30.0


@dataclass
class CaseVerdict:
    """What one case found: ``problem`` empty means it passed; notes never fail it."""

    case: ConformanceCase
    problem: str = ""
    notes: list[str] = field(default_factory=list)
    chunks: int = 0
    raised: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


class _VirtualClock(Clock):
    """Time moves only when a replay sleeps; nothing really waits."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.time += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.time += seconds
        await anyio.sleep(0)


@contextlib.contextmanager
def _virtual_time() -> Iterator[None]:
    saved = pacing.CLOCK
    pacing.CLOCK = _VirtualClock()
    try:
        yield
    finally:
        pacing.CLOCK = saved


@dataclass
class Seen:
    """A request the adapter sent, and the interaction that answered it (None: none did)."""

    method: str
    path: str
    body: bytes
    read_timeout: float | None
    answered_by: int | None


class _Answerer:
    """An interception handler serving a case's interactions by method and path, in order."""

    def __init__(self, case: ConformanceCase) -> None:
        self.case = case
        self.played = [False] * len(case.interactions)
        self.seen: list[Seen] = []

    def _pick(self, method: str, path: str) -> int | None:
        same = [n for n, i in enumerate(self.case.interactions)
                if i.request.method == method and i.request.path == path]
        for position in same:
            if not self.played[position]:
                return position
        # a retried error gets the same error again, as a provider that keeps failing would answer
        return same[-1] if same and self.case.repeat_last else None

    def handle(self, request: Any, inner: Any, lib: types.ModuleType, is_async: bool) -> Any:
        method, path = request.method, request.url.path
        position = self._pick(method, path)
        timeout = (request.extensions.get("timeout") or {}).get("read")
        self.seen.append(Seen(method, path, bytes(request.content), timeout, position))
        if position is None:
            recorded = ", ".join(sorted({f"{i.request.method} {i.request.path}" for i in self.case.interactions}))
            raise CassetteError(
                f"{self.case.cassette}: the adapter sent {method} {path}, which no recorded request answers "
                f"(recorded: {recorded or 'nothing left'}); requests are matched on method and path",
                path=str(self.case.cassette),
            )
        self.played[position] = True
        interaction = self.case.interactions[position]
        return replay_response(
            lib, request, interaction, fragmentation=self.case.fragmentation, speed=0.0,
            fault=self.case.fault if self.case.fault and position == self.case.fault_interaction else None,
            path=str(self.case.cassette), is_async=is_async,
        )


def build_adapter(factory: Callable[..., Any], case: ConformanceCase) -> LlmAdapter:
    """``factory(api_key=..., base_url=...)``, as the route table builds adapters."""
    kwargs: dict[str, Any] = {"api_key": "sk-test-conformance-0000000000000000"}
    if case.base_url:
        kwargs["base_url"] = case.base_url
    if case.settings.drop_reasoning:
        kwargs["drop_reasoning"] = True
    if case.settings.default_query:
        kwargs["default_query"] = dict(case.settings.default_query)
    try:
        adapter = factory(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"cannot build the adapter as {_name(factory)}({', '.join(kwargs)}=...): {exc}") from None
    if not callable(getattr(adapter, "stream", None)):
        raise ConfigError(f"{_name(factory)}(...) gave {type(adapter).__name__}, which has no stream(options) method")
    return adapter  # type: ignore[no-any-return]


def _name(factory: Callable[..., Any]) -> str:
    return f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', repr(factory))}"


async def _drive(adapter: LlmAdapter, case: ConformanceCase, verdict: CaseVerdict) -> list[tuple[list[Any], BaseException | None]]:
    runs: list[tuple[list[Any], BaseException | None]] = []
    for options in case.calls:
        chunks: list[Any] = []
        raised: BaseException | None = None
        try:
            async for chunk in adapter.stream(options):
                chunks.append(chunk)
        except CassetteError:
            raise
        except Exception as exc:  # the adapter's answer to the fault, judged below
            raised = exc
        runs.append((chunks, raised))
        verdict.chunks += len(chunks)
        if raised is not None:
            break
    return runs


async def run_case(factory: Callable[..., Any], case: ConformanceCase, *, strict_requests: bool = False) -> CaseVerdict:
    """Run ``case`` through the adapter ``factory`` builds and judge it."""
    verdict = CaseVerdict(case)
    if case.skip:
        return verdict
    answerer = _Answerer(case)
    install(answerer)
    try:
        with _virtual_time(), anyio.move_on_after(CASE_TIMEOUT) as scope:
            runs = await _drive(build_adapter(factory, case), case, verdict)
    except CassetteError as exc:
        verdict.problem = str(exc)
        return verdict
    finally:
        uninstall(answerer)
    if scope.cancelled_caught:
        verdict.problem = f"hang: no result after {CASE_TIMEOUT:.0f} s (the adapter must end or raise on its own)"
        return verdict
    judge_requests(answerer.seen, case, verdict, strict=strict_requests)
    if not verdict.problem:
        judge_runs(runs, case, verdict)
    return verdict


def judge_requests(seen_requests: Sequence[Seen], case: ConformanceCase, verdict: CaseVerdict, *,
                   strict: bool) -> None:
    """Note (or with ``strict`` fail on) request bodies that differ from the recorded ones; a stall needs a timeout."""
    for seen in seen_requests:
        if seen.answered_by is None:
            continue
        recorded = case.interactions[seen.answered_by].request.body or b""
        fields = _body_changes(recorded, seen.body)
        if fields:
            message = f"request body of {seen.method} {seen.path} differs from the recorded one in: {', '.join(fields[:8])}"
            if strict:
                verdict.problem = message + " (strict requests)"
                return
            if message not in verdict.notes:
                verdict.notes.append(message)
    stalled = case.fault is not None and case.fault.kind == "stall"
    if stalled and any(s.read_timeout is None or math.isinf(s.read_timeout) for s in seen_requests):
        verdict.problem = "the adapter sets no read timeout: a stalled stream would hang it; give its client one"


def _body_changes(recorded: bytes, sent: bytes) -> list[str]:
    if recorded == sent:
        return []
    try:
        return changed_fields(orjson.loads(recorded), orjson.loads(sent))
    except orjson.JSONDecodeError:
        return ["<body>"]


def judge_runs(runs: Sequence[tuple[list[Any], BaseException | None]], case: ConformanceCase, verdict: CaseVerdict) -> None:
    """Judge each call's chunks and error: the rules, the golden, or the typed error a fault must give."""
    for call, (chunks, raised) in enumerate(runs, start=1):
        validator = SequenceValidator()
        for chunk in chunks:
            validator.feed(chunk)
        if raised is None:
            validator.finish()
        broken = ""
        if validator.violations:
            first = validator.violations[0]
            broken = f"{first.rule} at chunk {first.position}: {first.message}"
        if case.expect_raise and raised is None:
            # the fault is the point of the case: name what the adapter hid before what it broke on the way
            _judge_raise(raised, chunks, case, verdict)
            verdict.problem += f"; and {broken}" if broken else ""
            return
        if broken:
            verdict.problem = broken
            return
        if raised is not None:
            verdict.raised = type(raised).__name__
            if case.expect_raise and any(isinstance(c, Finish) for c in chunks):
                verdict.problem = f"forged finish: the stream failed ({verdict.raised}) but a Finish chunk was yielded"
                return
        if case.expect_raise:
            _judge_raise(raised, chunks, case, verdict)
        else:
            _judge_golden(chunks, raised, case, call, verdict)
        if verdict.problem:
            return


def _judge_raise(raised: BaseException | None, chunks: list[Any], case: ConformanceCase, verdict: CaseVerdict) -> None:
    wanted = " or ".join(cls.__name__ for cls in case.expect_raise)
    if raised is None:
        finish = next((c for c in chunks if isinstance(c, Finish)), None)
        if finish is not None:
            verdict.problem = f"forged finish: the stream finished ({finish.reason.kind}) where {wanted} was expected"
        else:
            verdict.problem = f"the stream ended without an error where {wanted} was expected"
    elif not isinstance(raised, case.expect_raise):
        verdict.problem = f"raised {type(raised).__name__} ({str(raised)[:160]}) where {wanted} was expected"


def _judge_golden(chunks: list[Any], raised: BaseException | None, case: ConformanceCase, call: int,
                  verdict: CaseVerdict) -> None:
    golden_path = case.goldens[call - 1] if call <= len(case.goldens) else None
    if golden_path is None or not golden_path.is_file():
        verdict.notes.append(f"no golden for call {call}: chunks checked against the rules only")
        return
    recorded = golden_path.read_bytes()
    expected = load_golden(recorded)
    actual = load_golden(dump_jsonl(chunks, raised))
    if [*expected.chunks] != [*actual.chunks]:
        # the diff shows the raised line only when the golden has one to compare it with
        # the golden is the route's reference, written by replaying its cassette through the route's
        # own adapter: conform has no flag to rewrite it from the adapter under test
        diff = golden_diff(recorded, dump_jsonl(chunks, None if expected.raised is None else raised),
                           name=str(golden_path),
                           accept=f"dsh-replay check --update {case.cassette} (with your adapter as the route's)")
        verdict.problem = f"chunks differ from the golden {golden_path}:\n{diff}"
        return
    want = expected.raised.error if expected.raised else "a finished stream"
    got = actual.raised.error if actual.raised else "a finished stream"
    if want != got:
        verdict.problem = f"the golden {golden_path} ends in {want}, the adapter gave {got}"
    elif expected.raised is not None and actual.raised is not None and expected.raised.message != actual.raised.message:
        verdict.notes.append(f"{actual.raised.error}'s message differs from the golden's (not compared)")
