"""``dsh-replay golden check``: an adapter's chunk JSONL, from any language, against its golden as pytest judges it."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
from pathlib import Path
from typing import TextIO

from ..errors import ConfigError

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "run", "run_golden_check"]

DESCRIPTION = (
    "Check the chunks an adapter wrote (JSONL, one chunk per line, an error it raised as a last\n"
    "'raised' line) as the pytest plugin checks a Python adapter's: rules P1-P12 first (one line per\n"
    "violation, FILE:LINE: RULE message), then the golden, compared byte for byte in its canonical\n"
    "form (key order and spacing of the adapter's lines do not count), a difference shown as pytest\n"
    "shows it. Exit 0 when both hold, 1 otherwise. --update writes the golden when it is missing or\n"
    "differs (atomically; never a golden that would hold a credential); refused when CI is set."
)
EXAMPLE = "dsh-replay golden check out/text.chunks.jsonl --golden cassettes/node/text.chunks.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("check",), help="check (the only action)")
    parser.add_argument("output", metavar="ADAPTER_OUT.jsonl", help="the adapter's chunks ('-': stdin)")
    parser.add_argument("--golden", required=True, metavar="G.chunks.jsonl", help="the golden to compare with")
    parser.add_argument("--update", action="store_true",
                        help="write the golden when it is missing or differs (refused when CI is set)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_golden_check(args.output, Path(args.golden), out, update=args.update)


def run_golden_check(output: str, golden: Path, out: TextIO, *, update: bool = False) -> int:
    from ..cassette.golden import judge_golden_file
    from ..protocol.bounds import read_bounded
    from ..protocol.jsonl import dump_jsonl, load_golden
    from .validate import validate_file

    if update and os.environ.get("CI"):
        raise ConfigError("golden check --update is refused because CI is set: CI only compares. Update locally, "
                          "review the diff, and commit.")
    shown = Path("<stdin>") if output == "-" else Path(output)
    try:
        with contextlib.nullcontext(sys.stdin.buffer) if output == "-" else shown.open("rb") as source:
            data = read_bounded(source, str(shown))
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read ({exc.strerror or exc})") from None
    report = validate_file(shown, data)
    for line, violation in report.violations:
        out.write(f"{report.path}:{line}: {violation.rule} {violation.message}\n")
    if report.violations:
        out.write(f"{shown}: {len(report.violations)} rule violation(s); the golden was not compared"
                  f"{' nor written' if update else ''}\n")
        return 1
    # the rules passed, so every line is a chunk (or the raised line): the canonical bytes can be made
    chunks = load_golden(data)
    actual = dump_jsonl(chunks.chunks, chunks.raised)
    accept = f"dsh-replay golden check {shlex.quote(output)} --golden {shlex.quote(str(golden))} --update"
    status, problem = judge_golden_file(golden, actual, update=update, accept=accept)
    if problem:
        out.write(problem + "\n")
        return 1
    raised = f", raised {chunks.raised.error}" if chunks.raised else ""
    out.write(f"{golden}: {status} ({report.chunks} chunks{raised})\n")
    return 0
