"""``dsh-replay import``: cassettes other tools recorded, made into cases ``check`` replays through an adapter.

For each file under the given paths (vcrpy / pytest-recording YAML or JSON,
pydantic-ai's ``parsed_body`` cassettes, cassetter's typed bodies; see
:mod:`.import_formats`), every **streamed LLM interaction** (an SSE or NDJSON
response to a route's endpoint) is:

1. given its route, base URL and :class:`GenerateOptions`, read back from the
   request and checked by rebuilding the request with the route's adapter
   (:mod:`.import_requests`); what the options do not hold is carried as extra
   provider parameters and named in the report, never dropped;
2. written, scrubbed, into a dsh-replay cassette with the response body
   byte-exact and its fragments **inferred**: one per SSE event or NDJSON line,
   at 0 ms, since a vcrpy cassette keeps no network fragmentation or timing.
   The metadata says so (``fragments: inferred``), and ``show`` prints it;
3. replayed through the adapter, the rules P1-P12 run, and the golden written.

Interactions of one file that share a route and base URL make one case, in
recorded order (the first call's options in ``options``, the others in
``follow_ups``). Output layout::

    OUT/<route>/<path of the input under the folder given, or its name>.yaml
    OUT/<route>/<same>.chunks.jsonl            (<same>.2.chunks.jsonl: second call...)

The originals are only read. An interaction that is not streamed (a token
fetch, a non-streamed call) is listed as skipped; a streamed one that cannot
be imported is listed with the reason, and makes the import fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from ..adapters.route_table import RouteTable
from ..errors import ConfigError, DshReplayError
from .files import cassette_kind
from .import_formats import ForeignCassette, ForeignInteraction, read_foreign
from .inferred import INFERRED, Planned, case_metadata, endpoint, plan_interaction
from .replay import AdapterCache, CaseResult, replay_case
from .store import Cassette

__all__ = ["INFERRED", "ImportReport", "ImportedCase", "Line", "import_cassettes"]

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class Line:
    """What the report says about one interaction of an input file (``interaction`` None: the whole file)."""

    source: Path
    interaction: int | None
    #: "note" (imported, with a remark), "skipped" (not a streamed LLM call) or "failed"
    kind: str
    message: str

    def __str__(self) -> str:
        where = f" interaction {self.interaction}" if self.interaction is not None else ""
        label = {"note": "", "skipped": "skipped: ", "failed": "not importable: "}[self.kind]
        return f"cassette {self.source}{where}: {label}{self.message}"


@dataclass
class ImportedCase:
    """One cassette written: where from, which interactions, and how its replay went."""

    source: Path
    cassette: Path
    route: str
    interactions: tuple[int, ...]
    result: CaseResult | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok


@dataclass
class ImportReport:
    """Everything ``import`` did: the cases written and a line per remark, skip or failure."""

    files: int = 0
    cases: list[ImportedCase] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)

    @property
    def failures(self) -> list[Line]:
        return [line for line in self.lines if line.kind == "failed"]

    @property
    def ok(self) -> bool:
        """Every streamed LLM interaction imported and replayed, and there was at least one."""
        return bool(self.cases) and not self.failures and all(case.ok for case in self.cases)


async def import_cassettes(
    paths: Sequence[Path], out: Path, *, route: str | None = None, routes: RouteTable | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> ImportReport:
    """Import the cassettes under ``paths`` into ``out`` (see the module docstring); ``route`` forces one.

    ``progress(done, total, label)`` is told of each file read, then of each case replayed.
    """
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    if route is not None:
        table.adapter(route, base_url="http://dsh-replay.invalid")  # an unknown route fails here, listing them
    step = progress or (lambda done, total, label: None)
    report = ImportReport()
    taken: set[Path] = set()
    inputs = _inputs(paths, out)
    for path, relative in inputs:
        report.files += 1
        step(report.files, len(inputs), str(path))
        foreign = _read(path, report)
        if foreign is None:
            continue
        groups: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[Planned]] = {}
        for item in foreign.interactions:
            planned = _plan(item, foreign.path, route, table, report)
            if planned is not None:
                groups.setdefault(endpoint(planned.mapped), []).append(planned)
        for (group_route, _, _), planned_calls in groups.items():
            case = _write(foreign, relative, out, group_route, planned_calls, taken, report)
            if case is not None:
                report.cases.append(case)
    adapters = AdapterCache(table)
    try:
        for done, case in enumerate(report.cases, start=1):
            step(done, len(report.cases), str(case.cassette))
            case.result = await replay_case(case.cassette, table, update_golden=True, adapters=adapters)
    finally:
        await adapters.aclose()
    return report


def _inputs(paths: Sequence[Path], out: Path) -> list[tuple[Path, PurePath]]:
    """(file, its name under the output folder) for every cassette-like file under ``paths``."""
    found: list[tuple[Path, PurePath]] = []
    skip = out.resolve()
    for path in paths:
        if path.is_file():
            found.append((path, PurePath(path.name)))
        elif path.is_dir():
            for root, folders, names in os.walk(path):
                folders[:] = sorted(f for f in folders if Path(root, f).resolve() != skip)
                found += ((Path(root, name), Path(root, name).relative_to(path))
                          for name in sorted(names) if _cassette_name(name))
        else:
            raise ConfigError(f"{path}: no such file or folder")
    return found


def _cassette_name(name: str) -> bool:
    return name.removesuffix(".gz").endswith(_SUFFIXES) and not name.endswith(".chunks.jsonl")


def _read(path: Path, report: ImportReport) -> ForeignCassette | None:
    try:
        foreign = read_foreign(path)
    except DshReplayError as exc:
        report.lines.append(Line(path, None, "failed", f"cannot be read: {exc}"))
        return None
    if foreign is None:
        report.lines.append(Line(path, None, "skipped", "not a cassette (no 'interactions' list)"))
    elif foreign.style == "dsh-replay":
        report.lines.append(Line(path, None, "skipped", "already a dsh-replay cassette (it has dsh_replay metadata)"))
        return None
    return foreign


def _plan(item: ForeignInteraction, source: Path, forced: str | None, routes: RouteTable,
          report: ImportReport) -> Planned | None:
    planned, remarks = plan_interaction(item, route=forced, routes=routes)
    report.lines += (Line(source, remark.position, remark.kind, remark.message) for remark in remarks)
    return planned


def _write(foreign: ForeignCassette, relative: PurePath, out: Path, route: str, calls: list[Planned],
           taken: set[Path], report: ImportReport) -> ImportedCase | None:
    """Write one case; ``None`` (and a failure line per interaction) if it cannot be written."""
    path = _output_path(out, route, relative, taken)
    metadata = case_metadata(foreign, route, calls)
    cassette = Cassette(path=path, interactions=[call.interaction for call in calls], metadata=metadata)
    try:
        _refuse_overwrite(path)
        cassette.save()  # scanned for credentials first; written atomically
    except DshReplayError as exc:
        report.lines += [Line(foreign.path, call.position, "failed", str(exc)) for call in calls]
        return None
    return ImportedCase(source=foreign.path, cassette=path, route=route,
                        interactions=tuple(call.position for call in calls))


def _output_path(out: Path, route: str, relative: PurePath, taken: set[Path]) -> Path:
    """``out/route/relative`` as a ``.yaml`` file, made unique within this run (``-2``, ``-3``...)."""
    name = relative.name.removesuffix(".gz")
    for suffix in _SUFFIXES:
        name = name.removesuffix(suffix)
    folder = out / route / relative.parent
    path, number = folder / f"{name}.yaml", 2
    while path in taken:
        path, number = folder / f"{name}-{number}.yaml", number + 1
    taken.add(path)
    return path


def _refuse_overwrite(path: Path) -> None:
    """An earlier import's cassette may be replaced; a recorded cassette or any other file may not."""
    kind = cassette_kind(path)
    if kind is None and not path.exists():
        return
    if kind == "dsh_replay" and "imported_from" in Cassette.load(path).metadata:
        return
    what = {"dsh_replay": "a recorded dsh-replay cassette", "vcrpy": "a vcrpy cassette"}.get(kind or "", "a file")
    raise ConfigError(f"{path} exists and is {what}, not one an import wrote; it is kept: remove it or "
                      "choose another --out")
