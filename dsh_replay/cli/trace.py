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
from .common import FRAGMENTATION_HELP, add_plugins, fragmentation_type, route_table

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
              routes: RouteTable | None = None) -> int:
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
    outcome = asyncio.run(trace_body(body, route=route, routes=table, fragmentation=fragmentation,
                                     drop_reasoning=drop_reasoning))
    _write_bytes(out, outcome.golden_bytes())
    return print_verdict(outcome, err)


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
    "Exit 0 when the chunks obey the rules and nothing was raised, 1 otherwise."
)
EXAMPLE = "curl -sN ... | dsh-replay trace --route openai -"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--route", required=True)
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--fragmentation", type=fragmentation_type, default="single", help=FRAGMENTATION_HELP)
    parser.add_argument("--drop-reasoning", action="store_true", help="tell the adapter to drop reasoning blocks")
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_trace(args.route, args.file, out, err, fragmentation=args.fragmentation,
                     drop_reasoning=args.drop_reasoning, routes=route_table(args))
