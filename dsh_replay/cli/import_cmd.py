"""``dsh-replay import``: vcrpy / pytest-recording cassettes of streamed LLM calls, made into replayable cases."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .check_outputs import Progress
from .common import add_plugins, route_table

if TYPE_CHECKING:
    from ..cassette.importer import ImportedCase, ImportReport

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "render_report", "run"]

DESCRIPTION = (
    "Read cassettes recorded by vcrpy, pytest-recording (a folder per test module), pydantic-ai's\n"
    "serializer (parsed_body) or cassetter, and turn every streamed LLM interaction (SSE or NDJSON\n"
    "from a route's endpoint) into a dsh-replay case: the route from the host and path (or --route),\n"
    "the GenerateOptions read back from the request and checked by rebuilding it with the adapter\n"
    "(fields the options do not hold are kept as extra parameters and named below), the body kept\n"
    "byte-exact with fragments inferred (one per event: the original timing is unknown), then the\n"
    "golden written by replaying it and running the rules P1-P12.\n"
    "\n"
    "Output: OUT/<route>/<the input's path under the folder given>.yaml and its golden(s). The\n"
    "originals are only read. Exit 1 if a streamed LLM interaction could not be imported, or a\n"
    "case does not replay; other interactions (token fetches, non-streamed calls) are listed as skipped."
)
EXAMPLE = "dsh-replay import tests/cassettes --out cassettes/imported"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATHS", help="cassette files or folders of them")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="the folder to write the cases into")
    parser.add_argument("--route", default=None,
                        help="the route of every streamed interaction, instead of telling it from host and path")
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..cassette.files import unwritable_reason
    from ..cassette.importer import import_cassettes
    from ..errors import ConfigError

    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a file; name a folder for the imported cases")
    # found before any file is read, not as one failure per interaction at the end
    if reason := unwritable_reason(args.out / "case.yaml"):
        raise ConfigError(f"--out {args.out} cannot be written: {reason}")
    meter = _Meter(err)
    try:
        report = asyncio.run(import_cassettes([Path(p) for p in args.paths], args.out, route=args.route,
                                              routes=route_table(args), progress=meter))
    finally:
        meter.clear()
    render_report(report, out)
    return 0 if report.ok else 1


class _Meter:
    """A progress line on a terminal (nothing when piped): files read, then cases replayed."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.progress: Progress | None = None

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.progress is None or self.progress.total != total:
            self.clear()
            self.progress = Progress(self.stream, total)
        self.progress.update(done, label)

    def clear(self) -> None:
        if self.progress is not None:
            self.progress.clear()


def render_report(report: ImportReport, out: TextIO) -> None:
    """One line per case written, one per remark, skip or failure, then the counts."""
    for case in report.cases:
        out.write(f"{_case_line(case)}\n")
    for line in report.lines:
        out.write(f"{line}\n")
    for case in report.cases:
        if case.result is not None and case.result.problem:
            out.write(f"\n{case.cassette}:\n{case.result.problem}\n")
    imported = sum(len(case.interactions) for case in report.cases)
    skipped = sum(1 for line in report.lines if line.kind == "skipped")
    unreplayed = sum(1 for case in report.cases if not case.ok)
    out.write(f"\n{report.files} file(s) read: {len(report.cases)} case(s) written from {imported} streamed "
              f"interaction(s); {len(report.failures)} could not be imported; {skipped} skipped"
              f"{f'; {unreplayed} case(s) fail their replay' if unreplayed else ''}"
              f"{'' if report.cases or report.failures else '; nothing to import'}\n")


def _case_line(case: ImportedCase) -> str:
    calls = len(case.interactions)
    verdict = case.result.verdict if case.result is not None else "not replayed"
    return (f"imported {case.source} -> {case.cassette} (route {case.route}, {calls} call{'s' if calls > 1 else ''}, "
            f"fragments inferred): {verdict}")
