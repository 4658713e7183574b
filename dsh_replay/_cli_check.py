"""``dsh-replay check`` and ``validate``: the main job and the rule checker."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx
import orjson
import yaml

from ._collection import has_metadata
from ._exceptions import ConfigError, DshReplayError
from ._golden import GOLDEN_SUFFIX
from ._jsonl import BadLine, Raised, parse_golden_lines
from ._replay import CaseResult, replay_case
from ._routes import RouteTable
from ._transport import _tls_context
from ._validator import SequenceValidator, Violation

__all__ = ["FileReport", "find_cases", "render_table", "run_check", "run_validate", "validate_file"]


@dataclass(frozen=True, slots=True)
class FileReport:
    """The rule check of one chunk file: its violations, each with a 1-based line."""

    path: Path
    chunks: int
    blocks: int
    violations: list[tuple[int, Violation]]
    raised: str | None = None


def validate_file(path: Path) -> FileReport:
    """Run the rules over a JSONL chunk file; a line that is not a chunk is a P1 violation.

    A file that is not chunks at all (a cassette, a raw provider body) raises
    ``DshReplayError`` saying what it is and which command reads it, instead of
    a P1 line for each of its lines.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DshReplayError(f"{path}: cannot read ({exc.strerror or exc})") from None
    parsed = parse_golden_lines(data)
    if what := _not_a_chunk_file(path, data, parsed):
        raise DshReplayError(what)
    validator = SequenceValidator()
    lines: list[int] = []
    found: list[tuple[int, Violation]] = []
    raised: str | None = None
    blocks = 0
    for number, value in parsed:
        if raised is not None:
            found.append((number, Violation("P11", len(lines), "nothing may follow the 'raised' line")))
            continue
        try:
            raised_line = Raised.from_line(value)
        except ValueError as exc:
            found.append((number, Violation("P1", len(lines), str(exc))))
            continue
        if raised_line is not None:
            raised = raised_line.error
            continue
        lines.append(number)
        if isinstance(value, BadLine):
            validator.feed_unreadable(f"is {value.reason}")
        else:
            blocks += isinstance(value, dict) and value.get("type") == "block-start"
            validator.feed(value)  # type: ignore[arg-type]
    if raised is None:
        validator.finish()
    last_line = lines[-1] if lines else 1
    for violation in validator.violations:
        line = lines[violation.position] if violation.position < len(lines) else last_line
        found.append((line, violation))
    found.sort(key=lambda item: item[0])
    return FileReport(path=path, chunks=len(lines), blocks=blocks, violations=found, raised=raised)


# A cassette's top-level keys at the start of a line: YAML (vcrpy's own format),
# or JSON as vcrpy's json serializer writes it. No chunk line starts so; a hit is
# confirmed by parsing (a README can quote a cassette).
_CASSETTE_KEY = re.compile(rb'^(?:(?:interactions|dsh_replay)[ \t]*:|[ \t]*\{?[ \t]*"(?:interactions|dsh_replay)"[ \t]*:)', re.M)
_SSE_LINE = re.compile(rb"(?:data|event|id|retry)[ \t]*:|:")


def _not_a_chunk_file(path: Path, data: bytes, parsed: Sequence[tuple[int, object]]) -> str | None:
    """What ``path`` is, in one line naming the command to use, when it is clearly not a chunk file.

    A chunk file is one JSON object per line, so a file is judged by its lines
    taken together, never by one of them: a golden whose first line (or any one
    line) is broken is still a chunk file, and gets its P1 violations. It is not
    one when it holds a cassette's top-level keys, or when most of its lines do
    not even start like a JSON object, or when its objects are all without a
    ``type`` (a provider's own NDJSON).
    """
    if not parsed:
        return None  # empty: the rules say what is missing
    objects = [value for _, value in parsed if isinstance(value, dict)]
    cassette = _cassette_keys(data) if _CASSETTE_KEY.search(data) else None
    if cassette is not None:
        kind = "JSON" if data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{") else "YAML"
        if "dsh_replay" in cassette:
            return f"{path}: this is a cassette ({kind}), not a chunk file; use {_command('check', path)}"
        return (f"{path}: this is a plain vcrpy cassette ({kind}), not a chunk file; "
                f"use {_command('show', path)} for its timeline")
    raw = data.split(b"\n")
    starts = [raw[number - 1].lstrip(b"\xef\xbb\xbf \t") for number, _ in parsed]
    if 2 * sum(start.startswith(b"{") for start in starts) >= len(starts):
        if objects and not any("type" in value for value in objects):
            return (f"{path}: this looks like a raw NDJSON provider body (no line has a chunk \"type\"), not a "
                    f"chunk file; turn it into chunks with {_command('trace --route ROUTE', path)}")
        return None
    if _SSE_LINE.match(starts[0]):
        return (f"{path}: this is a raw SSE body, not a chunk file; "
                f"turn it into chunks with {_command('trace --route ROUTE', path)}")
    others = [number for (number, _), start in zip(parsed, starts, strict=True) if not start.startswith(b"{")]
    return (f"{path}: this is not a JSONL chunk file: {len(others)} of {len(starts)} line(s) are not JSON objects "
            f"(the first is line {others[0]}); validate reads one chunk per line, as in a golden")


def _command(words: str, path: Path) -> str:
    """``'dsh-replay WORDS PATH'``, quoted so that it can be pasted into a shell as it stands."""
    command = f"dsh-replay {words} {shlex.quote(str(path))}"
    return f'"{command}"' if "'" in command else f"'{command}'"


def _cassette_keys(data: bytes) -> set[str] | None:
    """The cassette keys of a YAML/JSON document (``None``: it is no cassette, or does not parse)."""
    try:
        document = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    keys = set(document) & {"interactions", "dsh_replay"} if isinstance(document, dict) else set()
    return keys or None


def run_validate(files: Sequence[str], out: TextIO, err: TextIO | None = None) -> int:
    """Report every violation of every file; a file that cannot be validated is named on ``err`` (exit 2)."""
    failed = unusable = False
    for name in files:
        try:
            report = validate_file(Path(name))
        except DshReplayError as exc:
            unusable = True
            (err or sys.stderr).write(f"dsh-replay: error: {exc}\n")
            continue
        for line, violation in report.violations:
            failed = True
            out.write(f"{report.path}:{line}: {violation.rule} {violation.message}\n")
    return 2 if unusable else 1 if failed else 0


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
    from .adapters import BUILTIN_ROUTES, adapter_class

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
