"""``dsh-replay check``: replay every cassette through its route's adapter, run the rules, compare goldens, print a table."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import orjson

from ..adapters.route_table import RouteTable
from ..cassette.files import unwritable_reason
from ..cassette.replay import AdapterCache, CaseResult
from ..cassette.shard import Shard
from ..cassette.timeouts import within
from ..errors import ConfigError, DshReplayError
from ..wire.coverage import collect_coverage
from .check_cases import (
    claim_goldens,
    collect_cases,
    find_cases,
    read_plain_cases,
    sorted_paths,
    uncovered,
)
from .check_outputs import Progress, github_annotations, write_junit_xml
from .check_replay import replay_streamed
from .check_rows import case_label, case_row, golden_only, golden_row, skipped_note, unreadable_row
from .check_shard import SHARD_HELP, parse_shard, shard_cases
from .common import (
    FORCE_HELP,
    FRAGMENTATION_HELP,
    add_plugins,
    add_route,
    clean_stale_temp_files,
    config_inputs,
    fragmentation_type,
    inference,
    refuse_output,
    route_table,
)
from .coverage_text import coverage_fields, strict_rows, unmapped_section

if TYPE_CHECKING:
    from ..cassette.inferred import Inference
    from ..cassette.store import Cassette

__all__ = ["find_cases", "render_table", "run_check"]


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain, aligned text table (stable when piped: no colour, no width guessing)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)]) + "\n"


#: the cases the warm-up replay is chosen from, and the size of the biggest it replays
_WARM_UP_CHOICE, _WARM_UP_BYTES = 16, 1 << 20


def _warm_up_case(cassettes: Sequence[Path]) -> Path | None:
    """The first case that is small, among the first few: a dry replay of a 200 MB case would cost 10 s."""
    for path in cassettes[:_WARM_UP_CHOICE]:
        try:
            if path.stat().st_size <= _WARM_UP_BYTES:
                return path
        except OSError:  # its row will say why
            continue
    return None


async def _warm_up(first: Path | None, routes: RouteTable, fragmentation: str) -> None:
    """Pay, before any row is timed, what only the first replay would pay (~200 ms, more than a whole case).

    The built-in adapters' imports (each route's first row would pay its own),
    then one dry replay of a small case, for whatever else is imported or
    built on first use (the cassette reader's vcrpy types, a configured
    adapter's own imports). The built-in adapters share one offline client, so
    no connection pool or TLS context is built at all. It is never an update:
    nothing is written, and its result is dropped. Workers (``-n``) are forks
    made after it, so they start warm.
    """
    from ..adapters import BUILTIN_ROUTES, adapter_class

    for route in BUILTIN_ROUTES:
        adapter_class(route)
    if first is None:  # only big cases: what their first replay pays is lost in its own time
        return
    adapters = AdapterCache(routes)
    try:
        await replay_streamed(first, routes, fragmentation=fragmentation, update_golden=False, adapters=adapters)
    finally:
        await adapters.aclose()


#: seconds one case may take before it counts as hung
CASE_SECONDS = 120.0


class _BatchRunner:
    """Replays batches of cases with adapters shared across the batches of one process (and its event loop)."""

    def __init__(self, routes: RouteTable, fragmentation: str, update: bool,
                 plain: Mapping[Path, Cassette | DshReplayError] | None = None) -> None:
        self.routes, self.fragmentation, self.update = routes, fragmentation, update
        #: plain vcrpy cassettes read as cases: path -> the case, or why it cannot be one
        self.plain = plain or {}
        self._adapters: AdapterCache | None = None

    async def __call__(self, batch: list[Path], report: Callable[[Path, dict[str, Any]], None]) -> None:
        if self._adapters is None:
            self._adapters = AdapterCache(self.routes)
        for path in batch:
            case = self.plain.get(path)
            if isinstance(case, DshReplayError):
                report(path, case_row(path, CaseResult(cassette=path, short=type(case).__name__, problem=str(case))))
                continue
            # the chunks are judged as they come and not kept (check_replay says why)
            replay = replay_streamed(path, self.routes, fragmentation=self.fragmentation, update_golden=self.update,
                                     adapters=self._adapters, cassette=case)
            try:
                with collect_coverage() as seen:
                    result = await within(CASE_SECONDS, replay)
            except (TimeoutError, asyncio.TimeoutError):  # one class from 3.11 on
                # an adapter awaiting what never comes: this case fails, the run goes on
                result = CaseResult(cassette=path, short="hung", problem=(
                    f"no result after {CASE_SECONDS:.0f} s: the adapter waits for something a replay never "
                    "sends (a replay takes milliseconds)"))
            report(path, case_row(path, result) | coverage_fields(seen.streams))

    async def aclose(self) -> None:
        if self._adapters is not None:
            await self._adapters.aclose()
            self._adapters = None


def _can_fork() -> bool:
    """Workers are forks (they inherit the warmed-up process); where there is no fork, one process."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _check_all(
    cassettes: list[Path], goldens: list[Path], run_batch: _BatchRunner, progress: Progress, jobs: int,
) -> list[dict[str, Any]]:
    # What is alive now (modules, the route table) lives to the end of the run. Left
    # out of the collector, each collection walks only what the cases make; and a
    # worker forked meanwhile does not touch, and so copy page by page, the heap it
    # inherits whenever it collects. A host program that froze objects of its own
    # keeps them as they are: unfreezing would release its objects too.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        rows = _check_cases(cassettes, run_batch, progress, jobs)
    finally:
        if freeze:
            gc.unfreeze()
    for done, path in enumerate(goldens, start=len(cassettes) + 1):
        rows.append(golden_row(path))
        progress.update(done, str(path))
    progress.clear()
    return rows


def _check_cases(cassettes: list[Path], run_batch: _BatchRunner, progress: Progress, jobs: int,
                 ) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if not cassettes:
        return rows
    first = _warm_up_case([path for path in cassettes if path not in run_batch.plain])
    asyncio.run(_warm_up(first, run_batch.routes, run_batch.fragmentation))
    if jobs > 1 and len(cassettes) > 1 and _can_fork():
        from .check_parallel import check_in_workers

        return check_in_workers(cassettes, jobs, run_batch, case_label,
                                lambda done, row: progress.update(done, row["path"]))

    def collect(path: Path, row: dict[str, Any]) -> None:
        rows.append(row)
        progress.update(len(rows), str(path))

    async def run_all() -> None:
        try:
            await run_batch(cassettes, collect)
        finally:
            await run_batch.aclose()

    asyncio.run(run_all())
    return rows


def jobs_type(value: str) -> int:
    """An argparse type: ``auto`` (one worker per CPU this process may use) or a positive count."""
    if value == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"-n wants auto or a number of processes (1 or more), got {value!r}")
    return jobs


def run_check(
    paths: Sequence[str],
    out: TextIO,
    *,
    update: bool = False,
    fragmentation: str = "recorded",
    as_json: bool = False,
    routes: RouteTable | None = None,
    progress: TextIO | None = None,
    jobs: int = 1,
    quiet: bool = False,
    junit: Path | None = None,
    github: bool = False,
    force: bool = False,
    also_read: Mapping[str, Iterable[Path]] | None = None,
    shard: Shard | None = None,
    strict_coverage: bool = False,
    inference: Inference | None = None,
) -> int:
    if update and os.environ.get("CI"):
        raise ConfigError(
            "check --update is refused because CI is set: CI only replays committed cassettes and goldens. "
            "Update locally, review the diff, and commit."
        )
    if update:  # what a killed --update left beside the goldens; a concurrent run's file is newer
        clean_stale_temp_files([Path(p) for p in paths], older_than=time.time())
    if junit is not None and (reason := unwritable_reason(junit)):
        # found before the run, not after every case was paid for
        raise ConfigError(f"--junit-xml {junit} cannot be written: {reason}")
    # a folder that cannot be listed is a failing row, as a cassette that cannot be read is
    cassettes, goldens, skipped, unreadable = collect_cases(paths)
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    plain, claimed = claim_goldens(read_plain_cases(skipped, table, inference), goldens)
    if plain.cases or claimed:
        read_too = [*plain.cases, *claimed]
        cassettes, goldens = sorted_paths([*cassettes, *read_too]), uncovered(goldens, read_too)
    skipped = plain.skipped
    if junit is not None:
        refuse_output(junit, what="JUnit XML", force=force, inputs={
            "one of the cassettes being read": cassettes, "one of the goldens being read": goldens, **(also_read or {})})
    if not cassettes and not goldens and not unreadable:
        out.write(f"no cassettes with dsh_replay metadata and no goldens under {', '.join(paths)}"
                  f"{skipped_note(skipped)}\n")
        return 1
    # a shard that got no case (more jobs than cases) or only goldens is no failure: the others replay
    whole, replayed_elsewhere = len(cassettes) + len(goldens), shard is not None and bool(cassettes)
    if shard is not None:  # unreadable folders stay in every shard: each of them could be missing cases
        cassettes, goldens = shard_cases(paths, cassettes, goldens, shard)
    meter = Progress(progress or sys.stderr, len(cassettes) + len(goldens))
    rows = _check_all(cassettes, goldens, _BatchRunner(table, fragmentation, update, plain.cases), meter, jobs)
    rows += (unreadable_row(folder, reason) for folder, reason in unreadable)
    if strict_coverage:
        strict_rows(rows)
    failures = [row for row in rows if not row["ok"]]
    if junit is not None:
        write_junit_xml(junit, rows)
    if as_json:
        # "where" serves the annotations; the JSON rows keep their documented fields
        cases = [{key: value for key, value in row.items() if key != "where"} for row in rows]
        alone = golden_only(rows)
        counts: dict[str, Any] = {"passed": len(rows) - len(failures) - alone, "failed": len(failures), "golden_only": alone}
        if shard is not None:
            counts["shard"] = {"index": shard.index, "total": shard.total, "cases": len(rows), "all_cases": whole}
        out.write(orjson.dumps({"cases": cases, **counts}, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        _write_table(out, rows, failures, skipped, quiet=quiet,
                     counted=shard.describe(len(rows), whole) if shard is not None else None)
        out.write(unmapped_section(rows))
    if github:
        # after JSON they would make stdout unparseable; the runner reads commands from stderr too
        ((progress or sys.stderr) if as_json else out).write(github_annotations(rows))
    # goldens alone test no adapter: a run that replayed nothing is no pass
    return 1 if failures or (len(rows) == golden_only(rows) and not replayed_elsewhere) else 0


def _write_table(out: TextIO, rows: list[dict[str, Any]], failures: list[dict[str, Any]],
                 skipped: Sequence[Path], *, quiet: bool, counted: str | None = None) -> None:
    shown = failures if quiet else rows
    if shown:
        out.write(render_table(
            ("case", "route", "fragments", "chunks", "blocks", "verdict", "time"),
            [(r["case"], r["route"] or "-", str(r["fragments"]), str(r["chunks"]), str(r["blocks"]), r["verdict"],
              f"{r['seconds'] * 1000:.0f} ms") for r in shown],
        ))
        out.write("\n")
    total_chunks = sum(r["chunks"] for r in rows)
    alone = golden_only(rows)
    passed = len(rows) - len(failures) - alone
    out.write(f"{counted or f'{len(rows)} case(s)'}, {total_chunks} chunks: {passed} passed, {len(failures)} failed"
              f"{f', {alone} golden(s) only (rules checked, nothing replayed)' if alone else ''}"
              f"{skipped_note(skipped)}\n")
    if alone and not passed and not failures:
        out.write("nothing was replayed: give the goldens their cassettes (dsh-replay import turns vcrpy "
                  "cassettes into cases)\n")
    if not quiet:
        for row in failures:
            out.write(f"\n{row['path']}:\n{row['problem']}\n")


DESCRIPTION = (
    "Replay every cassette with dsh_replay metadata under PATHS through its route's adapter, run the\n"
    "rules P1-P12, compare the chunks with the golden, and print one row per case. Goldens without a\n"
    "cassette are checked against the rules. Exit 1 if any case fails.\n"
    "\n"
    "-n spreads the cases over processes (rows stay in input order); -q prints only the failing rows\n"
    "and the summary; --junit-xml and --github write what CI shows. On a terminal, stderr shows a\n"
    "progress line (done/total, rate, ETA)."
)
EXAMPLE = "dsh-replay check -n auto --junit-xml check.xml cassettes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["cassettes"], metavar="PATHS")
    parser.add_argument("--update", action="store_true", help="write missing and differing goldens")
    parser.add_argument("--fragmentation", type=fragmentation_type, default="recorded", help=FRAGMENTATION_HELP)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("-n", dest="jobs", type=jobs_type, default=1, metavar="auto|N",
                        help="replay in N processes (auto: one per CPU); default 1, in this process")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the failing rows and the summary")
    parser.add_argument("--junit-xml", type=Path, default=None, metavar="FILE",
                        help="also write a JUnit XML report: one testcase per case, classname = route")
    parser.add_argument("--github", action="store_true",
                        help="also print a GitHub Actions ::error annotation per failing case")
    parser.add_argument("--force", action="store_true", help=FORCE_HELP.replace("FILE", "the --junit-xml FILE"))
    parser.add_argument("--strict-coverage", action="store_true",
                        help="fail a case whose provider stream has event kinds the adapter neither maps nor ignores")
    parser.add_argument("--shard", default=None, metavar="K/N", help=SHARD_HELP)
    add_route(parser)
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    routes = route_table(args)
    return run_check(args.paths, out, update=args.update, fragmentation=args.fragmentation, as_json=args.json,
                     routes=routes, inference=inference(args, routes), progress=err, jobs=args.jobs, quiet=args.quiet,
                     junit=args.junit_xml, github=args.github, force=args.force, also_read=config_inputs(args),
                     shard=parse_shard(args.shard), strict_coverage=args.strict_coverage)
