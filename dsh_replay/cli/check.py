"""``dsh-replay check``: replay every cassette through its route's adapter, run the rules, compare goldens, print a table."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx
import orjson

from ..adapters.route_table import RouteTable
from ..cassette.files import has_metadata
from ..cassette.golden import GOLDEN_SUFFIX
from ..cassette.replay import CaseResult, replay_case
from ..errors import ConfigError, DshReplayError
from ..wire.transport import _tls_context
from .common import FRAGMENTATION_HELP, add_plugins, fragmentation_type, route_table
from .validate import validate_file

__all__ = ["find_cases", "render_table", "run_check"]


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain, aligned text table (stable when piped: no colour, no width guessing)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)]) + "\n"


def find_cases(paths: Sequence[str]) -> tuple[list[Path], list[Path], list[Path]]:
    """(cassettes with metadata, goldens without a cassette, YAML files without metadata) under ``paths``.

    A YAML file given by name is a case even without metadata: its row then says what is missing.
    """
    cassettes: list[Path] = []
    goldens: list[Path] = []
    skipped: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            for found in sorted(p for suffix in ("*.yaml", "*.yml") for p in path.rglob(suffix) if p.is_file()):
                (cassettes if has_metadata(found) else skipped).append(found)
            goldens += sorted(path.rglob(f"*{GOLDEN_SUFFIX}"))
        elif path.is_file():
            (goldens if path.name.endswith(GOLDEN_SUFFIX) else cassettes).append(path)
        else:
            raise DshReplayError(f"{path}: no such file or folder")
    covered = {p.with_suffix("") for p in cassettes}
    lone = [g for g in goldens if Path(str(g)[: -len(GOLDEN_SUFFIX)]).with_suffix("") not in covered
            and Path(str(g)[: -len(GOLDEN_SUFFIX)]) not in covered]
    return cassettes, lone, skipped


def _case_label(path: Path) -> str:
    name = path.name
    for suffix in (GOLDEN_SUFFIX, ".yaml", ".yml"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _progress(stream: TextIO, done: int, total: int, label: str) -> None:
    if stream.isatty():
        stream.write(f"\r\033[K[{done}/{total}] {label}")
        stream.flush()


async def _warm_up(first: Path, routes: RouteTable, fragmentation: str) -> None:
    """Pay, before any row is timed, what only the first replay would pay (~300 ms, more than a whole case).

    The built-in adapters' imports (each route's first row would pay its own),
    httpx's transport (httpcore is imported with the first client) and the TLS
    context the adapters share; then one dry replay of the first case, for
    whatever else is imported or built on first use (the cassette reader's vcrpy
    types, a configured adapter's own imports). It is never an update: nothing
    is written, and its result is dropped.
    """
    from ..adapters import BUILTIN_ROUTES, adapter_class

    for route in BUILTIN_ROUTES:
        adapter_class(route)
    async with httpx.AsyncClient(verify=_tls_context()):
        pass
    await replay_case(first, routes, fragmentation=fragmentation, update_golden=False)


async def _check_all(
    cassettes: list[Path], goldens: list[Path], routes: RouteTable, fragmentation: str, update: bool, progress: TextIO
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    total = len(cassettes) + len(goldens)
    if cassettes:
        await _warm_up(cassettes[0], routes, fragmentation)
    for done, path in enumerate(cassettes, start=1):
        _progress(progress, done, total, str(path))
        result: CaseResult = await replay_case(path, routes, fragmentation=fragmentation, update_golden=update)
        rows.append({
            # "?": the cassette could not be read far enough to know its route
            "case": _case_label(path), "route": None if result.route == "?" else result.route, "path": str(path),
            "fragments": result.fragments, "chunks": result.chunks, "blocks": result.blocks,
            "ok": result.ok, "verdict": result.verdict, "seconds": result.seconds,
            # the golden diff ends with the pytest way to accept; here it is this command's
            "problem": result.problem.replace("with: pytest --update-golden", "with: dsh-replay check --update"),
        })
    for done, path in enumerate(goldens, start=len(cassettes) + 1):
        _progress(progress, done, total, str(path))
        rows.append(_golden_row(path))
    if total and progress.isatty():
        progress.write("\r\033[K")
    return rows


def _golden_row(path: Path) -> dict[str, Any]:
    """The row of a golden without a cassette: the rules only, no route (nothing was replayed)."""
    started = time.perf_counter()
    row: dict[str, Any] = {"case": _case_label(path), "route": None, "path": str(path), "fragments": 0}
    try:
        report = validate_file(path)
    except DshReplayError as exc:  # unreadable (a folder of that name), or not a chunk file at all
        verdict = "FAIL not a chunk file" if path.is_file() else "FAIL unreadable"
        return row | {"chunks": 0, "blocks": 0, "ok": False, "verdict": verdict, "problem": str(exc),
                      "seconds": time.perf_counter() - started}
    problem = verdict = ""
    if report.violations:
        line, first = report.violations[0]
        problem = "\n".join(f"{path}:{n}: {v.rule} {v.message}" for n, v in report.violations)
        verdict = f"FAIL {first.rule} (line {line})"
    verdict = verdict or ("ok" if report.raised is None else f"ok (raised {report.raised})")
    return row | {"chunks": report.chunks, "blocks": report.blocks, "ok": not problem, "verdict": verdict,
                  "problem": problem, "seconds": time.perf_counter() - started}


def _skipped_note(skipped: Sequence[Path]) -> str:
    if not skipped:
        return ""
    return (f"; skipped {len(skipped)} YAML file(s) without dsh_replay metadata (plain vcrpy cassettes "
            "cannot be replayed without their test; record through the dsh_replay fixture or dsh-replay record)")


def run_check(
    paths: Sequence[str],
    out: TextIO,
    *,
    update: bool = False,
    fragmentation: str = "recorded",
    as_json: bool = False,
    routes: RouteTable | None = None,
    progress: TextIO | None = None,
) -> int:
    if update and os.environ.get("CI"):
        raise ConfigError(
            "check --update is refused because CI is set: CI only replays committed cassettes and goldens. "
            "Update locally, review the diff, and commit."
        )
    cassettes, goldens, skipped = find_cases(paths)
    if not cassettes and not goldens:
        out.write(f"no cassettes with dsh_replay metadata and no goldens under {', '.join(paths)}"
                  f"{_skipped_note(skipped)}\n")
        return 1
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    rows = asyncio.run(_check_all(cassettes, goldens, table, fragmentation, update, progress or sys.stderr))
    failures = [row for row in rows if not row["ok"]]
    if as_json:
        out.write(orjson.dumps({"cases": rows, "passed": len(rows) - len(failures), "failed": len(failures)},
                               option=orjson.OPT_INDENT_2).decode() + "\n")
        return 1 if failures else 0
    out.write(render_table(
        ("case", "route", "fragments", "chunks", "blocks", "verdict", "time"),
        [(r["case"], r["route"] or "-", str(r["fragments"]), str(r["chunks"]), str(r["blocks"]), r["verdict"],
          f"{r['seconds'] * 1000:.0f} ms") for r in rows],
    ))
    total_chunks = sum(r["chunks"] for r in rows)
    out.write(f"\n{len(rows)} case(s), {total_chunks} chunks: {len(rows) - len(failures)} passed, {len(failures)} failed"
              f"{_skipped_note(skipped)}\n")
    for row in failures:
        out.write(f"\n{row['path']}:\n{row['problem']}\n")
    return 1 if failures else 0


DESCRIPTION = (
    "Replay every cassette with dsh_replay metadata under PATHS through its route's adapter, run the\n"
    "rules P1-P12, compare the chunks with the golden, and print one row per case. Goldens without a\n"
    "cassette are checked against the rules. Exit 1 if any case fails."
)
EXAMPLE = "dsh-replay check cassettes"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["cassettes"], metavar="PATHS")
    parser.add_argument("--update", action="store_true", help="write missing and differing goldens")
    parser.add_argument("--fragmentation", type=fragmentation_type, default="recorded", help=FRAGMENTATION_HELP)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_check(args.paths, out, update=args.update, fragmentation=args.fragmentation, as_json=args.json,
                     routes=route_table(args), progress=err)
