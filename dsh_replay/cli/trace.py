"""``dsh-replay trace``: a raw provider body through a route's adapter, offline; stdout is the golden it would give."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TextIO

from ..adapters.route_table import RouteTable
from ..cassette.replay import Outcome, trace_body
from ..errors import DshReplayError
from ..wire.coverage import collect_coverage
from .common import FRAGMENTATION_HELP, add_plugins, fragmentation_type, route_table
from .coverage_text import coverage_table, unmapped_lines

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "print_verdict", "run", "run_trace"]


def print_verdict(outcome: Outcome, err: TextIO) -> int:
    for violation in outcome.violations:
        err.write(f"{violation.rule} at chunk {violation.position}: {violation.message}\n")
    if outcome.raised is not None:
        err.write(f"raised {type(outcome.raised).__name__}: {outcome.raised}\n")
    if not outcome.violations and outcome.raised is None:
        err.write(f"ok: {len(outcome.chunks)} chunks, {outcome.blocks} block(s); rules P1-P12 hold\n")
        return 0
    if not outcome.violations:
        err.write(f"{len(outcome.chunks)} chunks before the error; rules hold for them\n")
    return 1


def run_trace(route: str, source: str, out: TextIO, err: TextIO, *, fragmentation: str, drop_reasoning: bool,
              routes: RouteTable | None = None, coverage: bool = False) -> int:
    if source == "-":
        if sys.stdin.isatty():
            err.write("reading the body from stdin; end it with Ctrl-D\n")
        body = sys.stdin.buffer.read()
    else:
        try:
            body = Path(source).read_bytes()
        except OSError as exc:
            raise DshReplayError(f"{source}: cannot read ({exc.strerror or exc})") from None
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    with collect_coverage(fields=coverage, detail=True) as seen:
        outcome = asyncio.run(trace_body(body, route=route, routes=table, fragmentation=fragmentation,
                                         drop_reasoning=drop_reasoning))
    _write_bytes(out, outcome.golden_bytes())
    code = print_verdict(outcome, err)
    # what the provider sent and no one decided about: a valid stream may still have lost it
    for line in unmapped_lines(seen.streams):
        err.write(line + "\n")
    if coverage:
        for stream in seen.streams:
            err.write("".join(line + "\n" for line in coverage_table(stream)))
    return code


def _write_bytes(out: TextIO, data: bytes) -> None:
    """``data`` exactly: through the binary buffer when there is one (no newline or encoding translation)."""
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        out.write(data.decode("utf-8"))
        return
    out.flush()
    buffer.write(data)
    buffer.flush()


DESCRIPTION = (
    "Answer every request of ROUTE's adapter with the body in FILE (- for stdin), status 200.\n"
    "stdout is exactly what a golden for it would hold; the rule verdict goes to stderr.\n"
    "Exit 0 when the chunks obey the rules and nothing was raised, 1 otherwise.\n"
    "stderr also names the provider's event kinds the adapter neither maps nor ignores on purpose\n"
    "(unmapped: KIND ×N (first at body line L)); --coverage lists every kind and the JSON fields of\n"  # noqa: RUF001
    "mapped events the adapter never reads."
)
EXAMPLE = "curl -sN ... | dsh-replay trace --route openai -"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--route", required=True)
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--fragmentation", type=fragmentation_type, default="single", help=FRAGMENTATION_HELP)
    parser.add_argument("--drop-reasoning", action="store_true", help="tell the adapter to drop reasoning blocks")
    parser.add_argument("--coverage", action="store_true",
                        help="list every event kind (mapped, ignored, unmapped) and the fields never read")
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_trace(args.route, args.file, out, err, fragmentation=args.fragmentation,
                     drop_reasoning=args.drop_reasoning, routes=route_table(args), coverage=args.coverage)
