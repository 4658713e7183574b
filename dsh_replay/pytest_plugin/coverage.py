"""Wire coverage and drift in the plugin: what each test's streams carried, in the summary.

The fixture and the collected cassette items collect the coverage of every
stream they replay (``collect_coverage``) and hand it to :meth:`CoverageTally.add`;
with ``--dsh-strict-coverage`` an unmapped kind fails the test
(:func:`strict_failure`). With ``--record-mode=verify`` the fixture then sends
each request again to the live provider (:func:`verify_call`), records the
answer under pytest's temporary folder — never over the cassette — and fails
the test when the chunks changed shape or a new kind is unmapped. The summary
names the cassettes with unmapped kinds and the drifts found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..adapters.route_table import RouteTable
from ..cassette.replay import Outcome
from ..protocol.adapter import LlmAdapter
from ..protocol.options import GenerateOptions
from ..wire.coverage import TIMES, CoverageCollector, KindCount, WireCoverage, unmapped_of

if TYPE_CHECKING:  # verify is imported by --record-mode=verify alone: a replayed suite never needs it
    from ..cassette.verify import CaseDrift

__all__ = ["VERIFY_FOLDER", "CoverageTally", "strict_failure", "verify_call", "verify_case", "verify_failure",
           "verify_target"]

#: the folder, under pytest's temporary one, that ``--record-mode=verify`` records into
VERIFY_FOLDER = "dsh-replay-verify"


@dataclass
class CoverageTally:
    """The run's coverage (every worker's, under xdist): streams seen, unmapped kinds and drift by cassette."""

    streams: int = 0
    undeclared: int = 0
    #: cassette -> kind -> [count, first body line or None]
    unmapped: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    #: cassette -> (breaking, what changed)
    drift: dict[str, tuple[bool, list[str]]] = field(default_factory=dict)
    verify_dirs: set[str] = field(default_factory=set)

    def add_collected(self, cassette: Path, seen: CoverageCollector) -> list[KindCount]:
        """Count one call's streams as ``seen`` collected them; return their unmapped kinds."""
        clean = seen.clean_count()
        if clean is None:
            return self.add(cassette, seen.streams)
        self.streams += clean  # every kind mapped or ignored: counted without building each stream's report
        return []

    def add(self, cassette: Path, streams: Sequence[WireCoverage]) -> list[KindCount]:
        """Count one call's streams; return their unmapped kinds."""
        self.streams += sum(stream.declared for stream in streams)
        self.undeclared += sum(not stream.declared for stream in streams)
        unmapped = unmapped_of(streams)
        if unmapped:
            kinds = self.unmapped.setdefault(str(cassette), {})
            for kind in unmapped:
                count, line = kinds.get(kind.kind, [0, kind.first_line])
                kinds[kind.kind] = [count + kind.count, line]
        return unmapped

    def add_drift(self, cassette: Path, drift: CaseDrift, target: Path) -> None:
        """One call of ``cassette`` re-recorded into ``target`` (see :func:`verify_target`) and compared."""
        breaking, lines = self.drift.get(str(cassette), (False, []))
        self.drift[str(cassette)] = (breaking or drift.breaking, lines + drift.lines())
        self.verify_dirs.add(str(next((p for p in target.parents if p.name == VERIFY_FOLDER), target.parent)))

    def to_json(self) -> dict[str, Any]:
        return {"streams": self.streams, "undeclared": self.undeclared, "unmapped": self.unmapped,
                "drift": {path: [breaking, lines] for path, (breaking, lines) in self.drift.items()},
                "verify_dirs": sorted(self.verify_dirs)}

    def merge(self, data: dict[str, Any]) -> None:
        self.streams += int(data.get("streams", 0))
        self.undeclared += int(data.get("undeclared", 0))
        for cassette, kinds in data.get("unmapped", {}).items():
            mine = self.unmapped.setdefault(cassette, {})
            for kind, (count, line) in kinds.items():
                mine[kind] = [mine.get(kind, [0, line])[0] + count, mine.get(kind, [0, line])[1]]
        for cassette, (breaking, lines) in data.get("drift", {}).items():
            self.drift[cassette] = (bool(breaking), list(lines))
        self.verify_dirs.update(data.get("verify_dirs", ()))

    def lines(self, root: Path) -> list[str]:
        """The summary's lines; none when no stream of a translator that declares its kinds was seen."""
        out: list[str] = []
        if self.streams:
            if self.unmapped:
                out.append(f"wire coverage: {self.streams} stream(s), unmapped kinds in {len(self.unmapped)} cassette(s):")
                out += [f"  {_relative(Path(path), root)}: {_kinds(kinds)}" for path, kinds in sorted(self.unmapped.items())]
            else:
                out.append(f"wire coverage: {self.streams} stream(s), every kind mapped or ignored on purpose")
        if self.drift:
            breaking = sum(flag for flag, _ in self.drift.values())
            where = ", ".join(sorted(self.verify_dirs))
            out.append(f"drift: {len(self.drift)} cassette(s) re-recorded into {where}; {breaking} with a breaking change")
            for path, (flag, lines) in sorted(self.drift.items()):
                verdict = "BREAKING" if flag else ("drifted" if lines else "unchanged")
                out.append(f"  {_relative(Path(path), root)}: {verdict}")
                out += [f"    {line}" for line in lines]
        return out


def _kinds(kinds: dict[str, list[Any]]) -> str:
    return ", ".join(f"{kind} {TIMES}{count}" + (f" (first at body line {line})" if line else "")
                     for kind, (count, line) in kinds.items())


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def strict_failure(cassette: Path, unmapped: Sequence[KindCount]) -> str:
    """The failure of a test whose streams carried unmapped kinds under ``--dsh-strict-coverage``."""
    listing = "\n".join(f"  unmapped: {kind.describe()}" for kind in unmapped)
    return (f"cassette {cassette}: the provider sent event kinds the adapter neither maps nor ignores on purpose "
            f"(--dsh-strict-coverage):\n{listing}\nmap them in the adapter's translator, or declare them in its "
            "ignored_kinds with a reason")


def verify_target(config: pytest.Config, cassette: Path, call: int) -> Path:
    """Where ``--record-mode=verify`` records call ``call`` of ``cassette``: under pytest's temporary folder."""
    factory = getattr(config, "_tmp_path_factory", None)
    base = factory.getbasetemp() if factory is not None else config.rootpath / ".pytest-dsh-replay"
    try:
        relative = cassette.resolve().relative_to(config.rootpath.resolve())
    except ValueError:
        relative = Path(cassette.name)
    name = relative.name if call == 1 else f"{relative.stem}.{call}{relative.suffix}"
    return base / VERIFY_FOLDER / relative.parent / name


async def verify_call(adapter: LlmAdapter, options: GenerateOptions, route: str | None, recorded: Outcome,
                      recorded_streams: Sequence[WireCoverage], target: Path, cassette: Path) -> CaseDrift:
    """Send ``options`` live through ``adapter``, record into ``target`` and compare with the replayed call."""
    from ..cassette.verify import CaseDrift, rerecord_heard, side_of

    (fresh,), unheard = await rerecord_heard(adapter, [options], target, route=route)
    if unheard:  # a provider never heard has no stream to compare: not a change of shape
        return CaseDrift(cassette=cassette, problem=unheard)
    old = side_of(recorded, recorded_streams[0] if len(recorded_streams) == 1 else None)
    return CaseDrift.compare(cassette, target, [old], [fresh])


def verify_failure(cassette: Path, target: Path, drift: CaseDrift) -> str:
    """Why ``--record-mode=verify`` fails a test: the live answer changed shape, or it could not be compared."""
    if drift.problem:
        return f"cassette {cassette}: not checked against the live provider (--record-mode=verify): {drift.problem}"
    return (f"cassette {cassette}: the live answer changed shape (--record-mode=verify; recorded into {target}):\n"
            + "\n".join(f"  {line}" for line in drift.lines()))


def verify_case(config: pytest.Config, tally: Any, cassette: Path, routes: RouteTable) -> None:
    """``--record-mode=verify`` for a collected cassette: its calls re-sent through its route's adapter
    (its base URL, the key from the route's environment variable); fails the item on a breaking change."""
    import asyncio

    from ..cassette.verify import CaseDrift

    target = verify_target(config, cassette, 1)
    drift = asyncio.run(CaseDrift.of(cassette, target, routes))
    tally.coverage.add_drift(cassette, drift, target)
    if drift.breaking:
        pytest.fail(verify_failure(cassette, target, drift), pytrace=False)
