"""The ``dsh-replay`` command line (also ``python -m dsh_replay``).

Every command reports bad input as one line naming the file and what to do
(never a traceback), and exits 2 for usage errors, 1 for failed checks, 0
otherwise.

Each command is a module of this package with ``DESCRIPTION``, ``EXAMPLE``,
``add_arguments(parser)`` and ``run(args, out, err)``; only the module of the
command being run is imported, so ``--help`` and ``routes`` stay quick (no
cassette engine, no provider adapters).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

from .._version import __version__
from ..errors import DshReplayError

__all__ = ["COMMANDS", "build_parser", "console_main", "main"]

#: command -> one-line summary, in the order ``--help`` lists them
COMMANDS: dict[str, str] = {
    "check": "replay every cassette through its adapter; check rules and goldens; print a table",
    "validate": "run the ordering rules on chunk files (FILE:LINE: RULE message)",
    "trace": "feed a raw provider body (SSE or NDJSON) through a route's adapter, offline",
    "diff": "compare two chunk files block by block",
    "show": "the timeline of a cassette: requests, fragments with timing, resulting chunks",
    "report": "write a self-contained HTML report: a timeline per cassette",
    "serve": "serve cassettes over HTTP on loopback, for clients in any language",
    "conform": "run the conformance suite (bundled cassettes, fault matrix) against your adapter",
    "golden": "check an adapter's chunk JSONL (any language) against its golden; --update writes it",
    "scan": "look for credentials in cassettes and goldens",
    "record": "record one live call into a cassette and its golden",
    "drift": "re-send recorded requests to the live provider; report changes of shape, not text",
    "import": "turn vcrpy / pytest-recording cassettes of streamed LLM calls into replayable cases",
    "routes": "list the routes known from built-ins and configuration",
}


def _module(command: str) -> ModuleType:
    # `import` is a keyword, so its module is import_cmd
    return importlib.import_module(f"{__package__}.{'import_cmd' if command == 'import' else command}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that command's options are built (the others are listed, not imported)."""
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
    for name, summary in COMMANDS.items():
        if only is not None and name != only:
            commands.add_parser(name, help=summary)
            continue
        module = _module(name)
        module.add_arguments(commands.add_parser(name, help=summary, **_help_of(module)))
    return parser


def _command_named(argv: Sequence[str]) -> str:
    """The command word of ``argv`` (the first word that is not an option), or "" when there is none."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else ""
    return ""


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command on its own (``dsh-replay NAME``)."""
    module = _module(name)
    parser = argparse.ArgumentParser(prog=f"dsh-replay {name}", **_help_of(module))
    module.add_arguments(parser)
    return parser


def _help_of(module: ModuleType) -> dict[str, Any]:
    return {"description": module.DESCRIPTION, "epilog": f"example:\n  {module.EXAMPLE}",
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def _parse(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code when argparse stopped (--help, --version, a usage error)."""
    words = list(sys.argv[1:] if argv is None else argv)
    command = _command_named(words)
    try:
        # argparse prints help to stdout and usage errors to stderr: send both where the caller wants
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if not command or words[0] != command:
                return build_parser(only=command).parse_args(words)
            # intermixed: paths may follow options (`conform X --route openai cassettes/mine`), as
            # they may in most command lines; a subparser could not take them after an option
            args = command_parser(command).parse_intermixed_args(words[1:])
            args.command = command
            return args
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line; return the exit code."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        args = _parse(argv, out, err)
        code = args if isinstance(args, int) else int(_module(args.command).run(args, out, err))
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


def console_main() -> int:
    """The ``dsh-replay`` program (and ``python -m dsh_replay``): :func:`main` in a process that ends with it.

    Everything the command built is dropped at once by the exit; left to the
    collector, the interpreter's shutdown walks it first (25 ms to 40 ms after
    checking a thousand cassettes, a fifth of the start-up). Frozen, it is freed by
    reference counts alone. Exit handlers still run; a program that calls
    :func:`main` itself keeps its collector as it was.
    """
    code = main()
    gc.freeze()
    gc.disable()
    return code
