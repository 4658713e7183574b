"""The ``dsh-replay`` command line (also ``python -m dsh_replay``).

Every command reports bad input as one line naming the file and what to do,
and exits 2 for usage errors, 1 for failed checks, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ._exceptions import DshReplayError
from ._jsonl import BadLine, parse_golden_lines
from ._validator import SequenceValidator, Violation

__all__ = ["main"]

GOLDEN_SUFFIX = ".chunks.jsonl"


@dataclass(frozen=True, slots=True)
class FileReport:
    """The rule check of one chunk file: its violations, each with a 1-based line."""

    path: Path
    chunks: int
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
    for number, value in parse_golden_lines(data):
        if raised is not None:
            found.append((number, Violation("P11", len(lines), "nothing may follow the 'raised' line")))
            continue
        if isinstance(value, dict) and value.get("type") == "raised":
            raised = str(value.get("error"))
            continue
        lines.append(number)
        if isinstance(value, BadLine):
            validator.feed({"type": None})  # keeps positions aligned with lines
            validator.violations[-1] = Violation("P1", len(lines) - 1, f"line is {value.reason}")
        else:
            validator.feed(value)  # type: ignore[arg-type]
    if raised is None:
        validator.finish()
    last_line = lines[-1] if lines else 1
    for violation in validator.violations:
        line = lines[violation.position] if violation.position < len(lines) else last_line
        found.append((line, violation))
    found.sort(key=lambda item: item[0])
    return FileReport(path=path, chunks=len(lines), violations=found, raised=raised)


def _find_goldens(paths: Sequence[str]) -> list[Path]:
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found.extend(sorted(path.rglob(f"*{GOLDEN_SUFFIX}")))
        elif path.exists():
            found.append(path)
        else:
            raise DshReplayError(f"{path}: no such file or folder")
    return found


def _cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    failed = False
    for name in args.files:
        report = validate_file(Path(name))
        for line, violation in report.violations:
            failed = True
            out.write(f"{report.path}:{line}: {violation.rule} {violation.message}\n")
    return 1 if failed else 0


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain, aligned text table (stable when piped: no colour, no width guessing)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)]) + "\n"


def _case_name(path: Path, roots: Sequence[str]) -> tuple[str, str]:
    """(route, case) of a golden: ``<root>/<route>/<case>.chunks.jsonl``."""
    stem = path.name[: -len(GOLDEN_SUFFIX)] if path.name.endswith(GOLDEN_SUFFIX) else path.stem
    return path.parent.name, stem


def _cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    goldens = _find_goldens(args.paths)
    if not goldens:
        out.write(f"no cassettes or goldens found under {', '.join(args.paths)}\n")
        return 1
    rows = []
    failures = 0
    for path in goldens:
        report = validate_file(path)
        route, case = _case_name(path, args.paths)
        if report.violations:
            failures += 1
            first_line, first = report.violations[0]
            verdict = f"FAIL {first.rule} (line {first_line})"
        else:
            verdict = "ok" if report.raised is None else f"ok (raised {report.raised})"
        rows.append((case, route, str(report.chunks), verdict))
    out.write(render_table(("case", "route", "chunks", "verdict"), rows))
    out.write(f"\n{len(goldens)} case(s): {len(goldens) - failures} passed, {failures} failed\n")
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-replay",
        description="Record, replay and check LLM provider adapter streams.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser(
        "check",
        help="check every golden (and cassette) under PATHS; print a table",
        description="Check every golden chunk file under PATHS against the ordering rules and "
        "print one row per case. Exit 1 if any case fails.",
        epilog="example: dsh-replay check cassettes",
    )
    check.add_argument("paths", nargs="*", default=["cassettes"], metavar="PATHS")
    check.set_defaults(run=_cmd_check)

    validate = commands.add_parser(
        "validate",
        help="run the ordering rules on chunk files (FILE:LINE: RULE message)",
        description="Run rules P1–P12 on JSONL chunk files (goldens, or logs of any harness). "
        "One line per violation, FILE:LINE: RULE message. Exit 1 on any violation.",
        epilog="example: dsh-replay validate cassettes/openai/text.chunks.jsonl",
    )
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(run=_cmd_validate)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; return the exit code."""
    out = out if out is not None else sys.stdout
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args, out)
    except DshReplayError as exc:
        sys.stderr.write(f"dsh-replay: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    return code
