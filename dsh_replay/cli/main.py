"""The ``dsh-replay`` command line (also ``python -m dsh_replay``).

Every command reports bad input as one line naming the file and what to do
(never a traceback), and exits 2 for usage errors, 1 for failed checks, 0
otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .._version import __version__
from ..adapters.route_table import RouteTable
from ..cassette.pacing import Fragmentation
from ..errors import DshReplayError
from .check import run_check
from .diff import run_diff
from .record import run_record
from .routes import run_routes
from .scan import run_scan
from .show import run_show
from .trace import run_trace
from .validate import run_validate

__all__ = ["build_parser", "main"]

_FRAGMENTATION_HELP = "how bodies are cut into fragments: recorded, single, bytes, random[:SEED]"
_PLUGINS_HELP = "a plugin YAML (cordis.yml shape) whose plugins register more routes"


def _fragmentation(value: str) -> str:
    try:
        return str(Fragmentation.parse(value))
    except DshReplayError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _command(commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str,
             description: str, example: str) -> argparse.ArgumentParser:
    return commands.add_parser(
        name, help=summary, description=description, epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsh-replay",
        description="Record, replay and check the StreamChunk streams of LLM provider adapters.\n\n"
        "Routes come from the built-in adapters, [tool.dsh_replay.routes] in ./pyproject.toml\n"
        "and, with --plugins, a plugin YAML.",
        epilog="example:\n  dsh-replay check cassettes\n\nrun 'dsh-replay COMMAND --help' for the options of a command",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dsh-replay {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = _command(
        commands, "check", "replay every cassette through its adapter; check rules and goldens; print a table",
        "Replay every cassette with dsh_replay metadata under PATHS through its route's adapter, run the\n"
        "rules P1-P12, compare the chunks with the golden, and print one row per case. Goldens without a\n"
        "cassette are checked against the rules. Exit 1 if any case fails.",
        "dsh-replay check cassettes",
    )
    check.add_argument("paths", nargs="*", default=["cassettes"], metavar="PATHS")
    check.add_argument("--update", action="store_true", help="write missing and differing goldens")
    check.add_argument("--fragmentation", type=_fragmentation, default="recorded", help=_FRAGMENTATION_HELP)
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.add_argument("--plugins", default=None, metavar="YAML", help=_PLUGINS_HELP)

    validate = _command(
        commands, "validate", "run the ordering rules on chunk files (FILE:LINE: RULE message)",
        "Run rules P1-P12 on JSONL chunk files (goldens, or logs of any harness). One line per\n"
        "violation, FILE:LINE: RULE message. A line that is not a chunk is a P1 violation. Exit 1 on any.\n"
        "A file that is no chunk file at all (a cassette, a raw SSE/NDJSON body) gets one line saying\n"
        "which command reads it instead, and exit 2.",
        "dsh-replay validate cassettes/openai/text.chunks.jsonl",
    )
    validate.add_argument("files", nargs="+", metavar="FILE")

    trace = _command(
        commands, "trace", "feed a raw provider body (SSE or NDJSON) through a route's adapter, offline",
        "Answer every request of ROUTE's adapter with the body in FILE (- for stdin), status 200.\n"
        "stdout is exactly what a golden for it would hold; the rule verdict goes to stderr.\n"
        "Exit 0 when the chunks obey the rules and nothing was raised, 1 otherwise.",
        "curl -sN ... | dsh-replay trace --route openai -",
    )
    trace.add_argument("--route", required=True)
    trace.add_argument("file", metavar="FILE")
    trace.add_argument("--fragmentation", type=_fragmentation, default="single", help=_FRAGMENTATION_HELP)
    trace.add_argument("--drop-reasoning", action="store_true", help="tell the adapter to drop reasoning blocks")
    trace.add_argument("--plugins", default=None, metavar="YAML", help=_PLUGINS_HELP)

    diff = _command(
        commands, "diff", "compare two chunk files block by block",
        "Compare two chunk JSONL files by block (text, tool calls, reasoning), usage and finish, then\n"
        "show the line diff. Exit 0 when identical, 1 otherwise.",
        "dsh-replay diff old.chunks.jsonl new.chunks.jsonl",
    )
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")

    show = _command(
        commands, "show", "the timeline of a cassette: requests, fragments with timing, resulting chunks",
        "Print each interaction's request (scrubbed) and response, then every fragment with its arrival\n"
        "time and size and the chunks the adapter produced from it; time to first byte and first chunk.",
        "dsh-replay show cassettes/anthropic/text.yaml",
    )
    show.add_argument("cassette", metavar="CASSETTE")
    show.add_argument("--plugins", default=None, metavar="YAML", help=_PLUGINS_HELP)

    scan = _command(
        commands, "scan", "look for credentials in cassettes and goldens",
        "Scan YAML/JSON(L) files for credential-shaped strings (OpenAI, Anthropic, Google, AWS keys,\n"
        "bearer tokens): every parsed value, by field, and the raw text, by line (comments, escaped JSON,\n"
        "base64 and gzip bodies decoded). Each sighting once, masked. Exit 1 on any hit.",
        "dsh-replay scan cassettes",
    )
    scan.add_argument("paths", nargs="*", default=["cassettes"], metavar="PATHS")

    record = _command(
        commands, "record", "record one live call into a cassette and its golden",
        "Call the real provider once and record the exchange into CASSETTE (+ its golden). The key\n"
        "comes from the route's environment variable: OPENAI_API_KEY (openai, openai-responses),\n"
        "OPENAI_COMPATIBLE_API_KEY, DEEPSEEK_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY,\n"
        "OLLAMA_API_KEY (optional), or <ROUTE>_API_KEY for configured routes. Refused when CI is set.\n"
        "An existing CASSETTE or golden is kept unless --force is given.",
        "dsh-replay record --route openai --options options.json --out cassettes/openai/hello.yaml",
    )
    record.add_argument("--route", required=True)
    record.add_argument("--options", required=True, metavar="FILE", help="GenerateOptions as JSON")
    record.add_argument("--out", required=True, metavar="CASSETTE")
    record.add_argument("--base-url", default=None, metavar="URL", help="the provider's root URL (a proxy, a local server)")
    record.add_argument("--force", action="store_true", help="overwrite an existing CASSETTE and its golden")
    record.add_argument("--plugins", default=None, metavar="YAML", help=_PLUGINS_HELP)

    routes = _command(
        commands, "routes", "list the routes known from built-ins and configuration",
        "List every route: the built-in adapters, [tool.dsh_replay.routes] in ./pyproject.toml, and\n"
        "the routes a plugin YAML registers.",
        "dsh-replay routes --plugins dsh.yml",
    )
    routes.add_argument("--plugins", default=None, metavar="YAML", help=_PLUGINS_HELP)
    return parser


def _routes(args: argparse.Namespace) -> RouteTable:
    plugins = getattr(args, "plugins", None)
    return RouteTable.load(pyproject=Path("pyproject.toml"), plugins=Path(plugins) if plugins else None)


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    command = args.command
    if command == "check":
        return run_check(args.paths, out, update=args.update, fragmentation=args.fragmentation, as_json=args.json,
                         routes=_routes(args), progress=err)
    if command == "validate":
        return run_validate(args.files, out, err)
    if command == "trace":
        return run_trace(args.route, args.file, out, err, fragmentation=args.fragmentation,
                         drop_reasoning=args.drop_reasoning, routes=_routes(args))
    if command == "diff":
        return run_diff(args.a, args.b, out)
    if command == "show":
        return run_show(args.cassette, out, routes=_routes(args))
    if command == "scan":
        return run_scan(args.paths, out)
    if command == "record":
        return run_record(args.route, args.options, args.out, args.base_url, out, routes=_routes(args),
                          force=args.force)
    return run_routes(out, _routes(args))


def _parse(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code when argparse stopped (--help, --version, a usage error)."""
    try:
        # argparse prints help to stdout and usage errors to stderr: send both where the caller wants
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line; return the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        args = _parse(argv, out, err)
        code = args if isinstance(args, int) else _run(args, out, err)
        out.flush()  # here, where a reader that went away is caught below, not at exit
        return code
    except DshReplayError as exc:
        err.write(f"dsh-replay: error: {exc}\n")
        return 2
    except BrokenPipeError:
        # The reader went away (`dsh-replay show X | head`): stop quietly, with the
        # status a SIGPIPE gives, and keep the interpreter's last flush from failing.
        if out is sys.stdout:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        # a file the command reads or writes: say which, and why, without a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        err.write(f"dsh-replay: error: {where}{exc.strerror or exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130
