"""``dsh-replay drift``: re-send each cassette's requests to the live provider and compare shapes, not text."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
from pathlib import Path
from typing import TextIO

from ..adapters.route_table import RouteTable
from ..errors import ConfigError
from .common import add_plugins, route_table

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "run", "run_drift"]


def run_drift(paths: list[str], out: TextIO, *, routes: RouteTable | None = None, out_dir: str | None = None,
              base_url: str | None = None) -> int:
    """Exit 2 when a cassette could not be checked (as validate does for a file it cannot read), else 1 on drift."""
    from ..cassette.verify import CaseDrift
    from .check_cases import find_cases

    if os.environ.get("CI"):
        raise ConfigError("drift is refused because CI is set: it calls the live provider, and CI only replays")
    cassettes, _, _ = find_cases(paths)
    if not cassettes:
        out.write(f"no cassettes with dsh_replay metadata under {', '.join(paths)}\n")
        return 1
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    folder = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="dsh-replay-drift-"))
    breaking = unchecked = recorded = 0
    for number, cassette in enumerate(cassettes, start=1):
        target = folder / f"{number:03d}-{cassette.parent.name}-{cassette.name}"
        case = asyncio.run(CaseDrift.of(cassette, target, table, base_url=base_url))
        if case.problem:
            unchecked += 1
            out.write(f"{cassette}: not checked: {case.problem}\n")
            continue
        breaking += case.breaking
        lines = case.lines()
        verdict = "BREAKING" if case.breaking else ("drifted" if lines else "unchanged")
        kept = case.recorded is not None and case.recorded.is_file()
        recorded += kept
        out.write(f"{cassette}: {verdict}" + (f" (fresh recording: {case.recorded})" if kept else "") + "\n")
        out.write("".join(f"  {line}\n" for line in lines))
    if not out_dir:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: a temporary folder nothing was recorded into
    out.write(f"{len(cassettes)} cassette(s): {breaking} with a breaking change"
              + (f", {unchecked} not checked" if unchecked else "")
              + (f"; fresh recordings in {folder}" if recorded else "") + "\n")
    return 2 if unchecked else 1 if breaking else 0


DESCRIPTION = (
    "Re-send each recorded request under PATHS to the live provider (the cassette's base URL, else\n"
    "the adapter's; the key from the route's environment variable, as for record), record the fresh\n"
    "stream into --out (a temporary folder by default; never over the cassette) and compare shapes,\n"
    "not text: event kinds new or vanished, field paths new or removed per kind, and the chunks'\n"
    "shape (block types and order, tool names, finish kind, usage fields). Exit 1 when the chunk\n"
    "shape changed or the provider sends a kind the adapter does not map. A cassette that could not\n"
    "be checked (provider unreachable, an error status before any stream, a missing key, a cassette\n"
    "that does not replay) gets one 'not checked' line saying why, and exit 2. Refused when CI is set."
)
EXAMPLE = "dsh-replay drift cassettes/openai --out /tmp/fresh"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["cassettes"], metavar="PATHS")
    parser.add_argument("--out", default=None, metavar="DIR", help="where the fresh recordings go (default: a temp folder)")
    parser.add_argument("--base-url", default=None, metavar="URL", help="send every request here instead")
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_drift(args.paths, out, routes=route_table(args), out_dir=args.out, base_url=args.base_url)
