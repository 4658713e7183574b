"""``dsh-replay check`` and ``validate``: the main job and the rule checker."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

from ._collection import has_metadata
from ._exceptions import ConfigError, DshReplayError
from ._golden import GOLDEN_SUFFIX
from ._jsonl import BadLine, Raised, parse_golden_lines
from ._replay import CaseResult, replay_case
from ._routes import RouteTable
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
    """Run the rules over a JSONL chunk file; a line that is not a chunk is a P1 violation."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DshReplayError(f"{path}: cannot read ({exc.strerror or exc})") from None
    validator = SequenceValidator()
    lines: list[int] = []
    found: list[tuple[int, Violation]] = []
    raised: str | None = None
    blocks = 0
    for number, value in parse_golden_lines(data):
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


def run_validate(files: Sequence[str], out: TextIO) -> int:
    failed = False
    for name in files:
        report = validate_file(Path(name))
        for line, violation in report.violations:
            failed = True
            out.write(f"{report.path}:{line}: {violation.rule} {violation.message}\n")
    return 1 if failed else 0


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


async def _check_all(
    cassettes: list[Path], goldens: list[Path], routes: RouteTable, fragmentation: str, update: bool, progress: TextIO
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    total = len(cassettes) + len(goldens)
    for done, path in enumerate(cassettes, start=1):
        _progress(progress, done, total, str(path))
        result: CaseResult = await replay_case(path, routes, fragmentation=fragmentation, update_golden=update)
        rows.append({
            "case": _case_label(path), "route": result.route, "path": str(path), "fragments": result.fragments,
            "chunks": result.chunks, "blocks": result.blocks,
            "ok": result.ok, "verdict": result.verdict, "seconds": result.seconds,
            # the golden diff ends with the pytest way to accept; here it is this command's
            "problem": result.problem.replace("with: pytest --update-golden", "with: dsh-replay check --update"),
        })
    for done, path in enumerate(goldens, start=len(cassettes) + 1):
        _progress(progress, done, total, str(path))
        started = time.perf_counter()
        report = validate_file(path)
        problem = verdict = ""
        if report.violations:
            line, first = report.violations[0]
            problem = "\n".join(f"{path}:{n}: {v.rule} {v.message}" for n, v in report.violations)
            verdict = f"FAIL {first.rule} (line {line})"
        verdict = verdict or ("ok" if report.raised is None else f"ok (raised {report.raised})")
        rows.append({
            "case": _case_label(path), "route": path.parent.name, "path": str(path), "fragments": 0,
            "chunks": report.chunks, "blocks": report.blocks, "ok": not problem, "verdict": verdict,
            "problem": problem, "seconds": time.perf_counter() - started,
        })
    if total and progress.isatty():
        progress.write("\r\033[K")
    return rows


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
        [(r["case"], r["route"], str(r["fragments"]), str(r["chunks"]), str(r["blocks"]), r["verdict"],
          f"{r['seconds'] * 1000:.0f} ms") for r in rows],
    ))
    total_chunks = sum(r["chunks"] for r in rows)
    out.write(f"\n{len(rows)} case(s), {total_chunks} chunks: {len(rows) - len(failures)} passed, {len(failures)} failed"
              f"{_skipped_note(skipped)}\n")
    for row in failures:
        out.write(f"\n{row['path']}:\n{row['problem']}\n")
    return 1 if failures else 0
