"""The cases of the conformance suite for one route, built from its cassettes.

Every cassette is replayed under four fragmentations (``recorded``, ``bytes``
and two seeded ``random`` cuts) and judged against its golden. The fault
matrix is derived from the route's plain text cassette (its first complete,
successful, single-call recording): the body cut short at three points, a
connection reset, a stall past the read timeout, each HTTP error status with
the provider's own error body, and the route's recorded mid-stream error event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..cassette.adapter_settings import AdapterSettings, adapter_settings
from ..cassette.files import has_metadata
from ..cassette.golden import golden_path_for
from ..cassette.interaction import Interaction
from ..cassette.pacing import Fault, Fragmentation
from ..cassette.replay import case_options
from ..cassette.store import Cassette
from ..errors import (
    ConfigError,
    MalformedStreamError,
    ProviderError,
    StreamInterruptedError,
    StreamTimeoutError,
)
from ..protocol.jsonl import load_golden
from ..protocol.options import GenerateOptions
from .faults import (
    EXPECTED_BY_STATUS,
    STATUSES,
    error_body,
    event_starts,
    family_of,
    last_needed_event,
)

__all__ = ["FRAGMENTATIONS", "ConformanceCase", "build_cases", "bundled_cassettes"]

#: the cuts every cassette is replayed under: as recorded, byte by byte, two seeded random cuts
FRAGMENTATIONS = ("recorded", "bytes", "random:1", "random:2")

_CUT_SHORT = (StreamInterruptedError, MalformedStreamError)


@dataclass(frozen=True)
class ConformanceCase:
    """One run of the adapter against one scripted exchange, and what it must yield."""

    id: str
    route: str
    cassette: Path
    interactions: tuple[Interaction, ...]
    calls: tuple[GenerateOptions, ...]
    goldens: tuple[Path, ...] = ()
    fragmentation: Fragmentation = field(default_factory=lambda: Fragmentation.parse("recorded"))
    fault: Fault | None = None
    fault_interaction: int = 0
    #: the error classes the case must end in; empty: the golden decides
    expect_raise: tuple[type[ProviderError], ...] = ()
    #: a request after the last interaction gets the last one again (a provider that keeps failing)
    repeat_last: bool = False
    base_url: str | None = None
    #: the adapter settings of the case's cassette (drop_reasoning, default_query)
    settings: AdapterSettings = field(default_factory=AdapterSettings)
    #: why the case cannot run for this route (it is reported as skipped)
    skip: str = ""


def bundled_cassettes(route: str) -> list[Path]:
    """The cassettes this project ships for ``route`` (``cassettes/<route>`` of the source tree)."""
    folder = Path(__file__).resolve().parents[2] / "cassettes" / route
    if not folder.is_dir():
        raise ConfigError(
            f"no bundled cassettes for route {route!r} (looked in {folder}); give the cassettes to run as PATHS"
        )
    return sorted(folder.glob("*.yaml"))


def _cassette_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.y*ml") if has_metadata(p))
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"{path}: no such file or folder; give cassette files or folders of them")
    return files


@dataclass
class _Loaded:
    path: Path
    cassette: Cassette
    route: str
    calls: list[GenerateOptions]
    base_url: str | None
    settings: AdapterSettings

    @property
    def label(self) -> str:
        return self.path.name.removesuffix(self.path.suffix)

    def goldens(self) -> tuple[Path, ...]:
        return tuple(golden_path_for(self.path, call) for call in range(1, len(self.calls) + 1))


def _load(path: Path) -> _Loaded:
    cassette = Cassette.load(path)
    route, calls, base_url = case_options(cassette)
    return _Loaded(path, cassette, route, calls, base_url, adapter_settings(cassette))


def build_cases(route: str, paths: Sequence[str | Path] = ()) -> list[ConformanceCase]:
    """The golden cases of every cassette of ``route`` under ``paths`` (default: the bundled ones), then the faults."""
    files = _cassette_files([Path(p) for p in paths]) if paths else bundled_cassettes(route)
    loaded = [case for case in map(_load, files) if case.route == route]
    if not loaded:
        where = ", ".join(str(p) for p in paths) if paths else "the bundled cassettes"
        raise ConfigError(f"no cassette of route {route!r} in {where}; record one, or name the route its cassettes have")
    cases: list[ConformanceCase] = []
    for item in loaded:
        for spelling in FRAGMENTATIONS:
            cases.append(ConformanceCase(
                id=f"{item.label}[{spelling.replace(':', '-')}]", route=route, cassette=item.path,
                interactions=tuple(item.cassette.interactions), calls=tuple(item.calls), goldens=item.goldens(),
                fragmentation=Fragmentation.parse(spelling), base_url=item.base_url,
                settings=item.settings,
            ))
    return cases + fault_cases(route, loaded)


def _golden_ends(item: _Loaded) -> str:
    """How the first call's golden ends: ``finished``, ``raised``, or ``none`` without a golden."""
    golden = item.goldens()[0]
    if not golden.is_file():
        return "none"
    return "finished" if load_golden(golden).raised is None else "raised"


def _single_success(item: _Loaded) -> bool:
    interactions = item.cassette.interactions
    return (len(item.calls) == 1 and len(interactions) == 1 and interactions[0].status == 200
            and interactions[0].complete and interactions[0].error is None)


def fault_cases(route: str, loaded: Sequence[_Loaded]) -> list[ConformanceCase]:
    """The fault matrix of ``route``, shaped from its plain text cassette."""
    text = next((item for item in loaded if item.label == "text" and _single_success(item)), None)
    text = text or next((item for item in loaded if _single_success(item) and _golden_ends(item) == "finished"), None)
    names = [*(f"fault-truncate-{where}" for where in ("early", "middle", "last-event")), "fault-reset",
             "fault-stall", *(f"fault-{status}" for status in STATUSES), "fault-error-event"]
    if text is None:
        reason = "no cassette of one successful, complete call to shape the faults from"
        return [_skipped(name, route, loaded[0], reason) for name in names]
    base = _case(text, "", ())
    interaction = text.cassette.interactions[0]
    ndjson = "ndjson" in dict((k.lower(), v) for k, v in interaction.headers).get("content-type", "")
    starts = event_starts(interaction.body, ndjson)
    last = last_needed_event(interaction.body, ndjson)
    middle = starts[len(starts) // 2] if starts else len(interaction.body) // 2
    cuts = {"early": starts[1] if len(starts) > 1 else 1, "middle": middle, "last-event": last}
    cases = [
        dataclasses.replace(base, id=f"fault-truncate-{where}", fault=Fault("truncate", at), expect_raise=_CUT_SHORT)
        for where, at in cuts.items()
    ]
    cases.append(dataclasses.replace(base, id="fault-reset", fault=Fault("reset", middle),
                                     expect_raise=(StreamInterruptedError,)))
    cases.append(dataclasses.replace(base, id="fault-stall", fault=Fault("stall", middle),
                                     expect_raise=(StreamTimeoutError,)))
    cases += [_status_case(route, base, interaction, loaded, status) for status in STATUSES]
    cases.append(_error_event_case(route, loaded, base))
    return cases


def _case(item: _Loaded, case_id: str, expect: tuple[type[ProviderError], ...]) -> ConformanceCase:
    return ConformanceCase(
        id=case_id, route=item.route, cassette=item.path, interactions=tuple(item.cassette.interactions),
        calls=tuple(item.calls[:1]), goldens=item.goldens()[:1], base_url=item.base_url,
        settings=item.settings, expect_raise=expect,
    )


def _skipped(case_id: str, route: str, item: _Loaded, reason: str) -> ConformanceCase:
    return dataclasses.replace(_case(item, case_id, ()), route=route, skip=reason)


def _status_case(route: str, base: ConformanceCase, interaction: Interaction, loaded: Sequence[_Loaded],
                 status: int) -> ConformanceCase:
    family = family_of(route)
    if family is not None:
        body = error_body(family, status)
    else:
        # a route of one's own: its recorded error response, with the status swapped
        recorded = next((i for item in loaded for i in item.cassette.interactions if i.status >= 400), None)
        if recorded is None:
            return dataclasses.replace(base, id=f"fault-{status}",
                                       skip="no recorded HTTP error response of this route to shape the body from")
        body = recorded.body
    answer = Interaction(
        request=interaction.request, status=status, reason="", body=body,
        headers=[("content-type", "application/json"), ("retry-after", "0")],
    )
    return dataclasses.replace(base, id=f"fault-{status}", interactions=(answer,), repeat_last=True,
                               expect_raise=EXPECTED_BY_STATUS[status])


def _error_event_case(route: str, loaded: Sequence[_Loaded], base: ConformanceCase) -> ConformanceCase:
    recorded = next((item for item in loaded if len(item.calls) == 1 and len(item.cassette.interactions) == 1
                     and item.cassette.interactions[0].status == 200 and _golden_ends(item) == "raised"), None)
    if recorded is None:
        return dataclasses.replace(base, id="fault-error-event",
                                   skip=f"no cassette of route {route!r} records an error event inside a stream")
    return dataclasses.replace(_case(recorded, "fault-error-event", (ProviderError,)), goldens=())
