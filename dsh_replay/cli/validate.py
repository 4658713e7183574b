"""``dsh-replay validate``: the rules on chunk files, one line per violation as linters print them."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import yaml

from ..errors import DshReplayError
from ..protocol.bounds import read_bounded
from ..protocol.jsonl import BadLine, Raised, parse_golden_lines
from ..protocol.validator import SequenceValidator, Violation

__all__ = ["DESCRIPTION", "EXAMPLE", "FileReport", "add_arguments", "run", "run_validate", "validate_file"]


@dataclass(frozen=True, slots=True)
class FileReport:
    """The rule check of one chunk file: its violations, each with a 1-based line."""

    path: Path
    chunks: int
    blocks: int
    violations: list[tuple[int, Violation]]
    raised: str | None = None


def validate_file(path: Path, data: bytes | None = None) -> FileReport:
    """Run the rules over a JSONL chunk file; a line that is not a chunk is a P1 violation.

    ``data``: the file's bytes, already read (stdin's, say); else the file is read
    as :func:`~dsh_replay.protocol.bounds.read_bounded` bounds it. A file that is not
    chunks at all (a cassette, a raw provider body) raises ``DshReplayError``
    saying what it is and which command reads it, instead of a P1 line for
    each of its lines.
    """
    if data is None:
        try:
            with path.open("rb") as source:
                data = read_bounded(source, str(path))
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


DESCRIPTION = (
    "Run rules P1-P12 on JSONL chunk files (goldens, or logs of any harness). One line per\n"
    "violation, FILE:LINE: RULE message. A line that is not a chunk is a P1 violation. Exit 1 on any.\n"
    "A file that is no chunk file at all (a cassette, a raw SSE/NDJSON body) gets one line saying\n"
    "which command reads it instead, and exit 2."
)
EXAMPLE = "dsh-replay validate cassettes/openai/text.chunks.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_validate(args.files, out, err)
