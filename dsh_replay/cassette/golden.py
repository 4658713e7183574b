"""Golden files: where they live, how they are compared, how a difference reads.

A golden is the chunk JSONL of one adapter run (see ``_jsonl``). Comparison is
byte-for-byte on the canonical serialization, so a golden is either exactly
right or shown as a line diff: the first differing chunk position, ``-``
golden / ``+`` actual, a few lines of context, long lines shortened.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

import orjson

from .files import atomic_write

__all__ = ["GOLDEN_SUFFIX", "golden_diff", "golden_path_for", "judge_golden_file"]

GOLDEN_SUFFIX = ".chunks.jsonl"
_MAX_LINE = 160


def golden_path_for(cassette: Path, call: int = 1) -> Path:
    """``case.yaml`` → ``case.chunks.jsonl`` (``case.2.chunks.jsonl`` for a second call)."""
    stem = cassette.name[: -len(cassette.suffix)] if cassette.suffix else cassette.name
    middle = "" if call == 1 else f".{call}"
    return cassette.with_name(f"{stem}{middle}{GOLDEN_SUFFIX}")


def _short(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 12] + f"… (+{len(line) - _MAX_LINE + 12} chars)"


def _lines(data: bytes) -> list[str]:
    # split on \n only: str.splitlines() would also split inside a chunk whose text
    # holds U+2028 or U+0085, which JSON keeps raw, and shift every position after it
    lines = data.decode("utf-8", "replace").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def golden_diff(expected: bytes, actual: bytes, *, name: str, context: int = 3,
                accept: str = "pytest --update-golden") -> str:
    """A readable explanation of how ``actual`` differs from the golden ``expected``.

    ``accept``: the command that writes the new chunks, as the caller's user runs it.
    """
    old, new = _lines(expected), _lines(actual)
    if [line.removesuffix("\r") for line in old] == new:
        # same chunks, other bytes: CRLF line ends or a missing final newline
        return (
            f"golden {name} holds the adapter's chunks but not in the canonical bytes "
            "(it differs only in line ends or the final newline; goldens use \\n and end with one)\n"
            f"Rewrite it with: {accept}"
        )
    first = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    lines = [
        f"golden {name} differs from the adapter's chunks; first difference at chunk {first} (line {first + 1})",
        f"  golden: {len(old)} line(s), actual: {len(new)} line(s)",
    ]
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(context):
        lines.append(f"@@ chunk {group[0][1]} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [f"  {_short(line)}" for line in old[i1:i2]]
                continue
            lines += [f"- {_short(line)}" for line in old[i1:i2]]
            lines += [f"+ {_short(line)}" for line in new[j1:j2]]
    lines.append(f"If the new chunks are right, accept them with: {accept}")
    return "\n".join(lines)


def judge_golden_file(
    golden: Path,
    actual: bytes,
    *,
    update: bool,
    write_missing: bool = False,
    write: Callable[[Path, bytes], None] = atomic_write,
    accept: str | None = None,
) -> tuple[str, str]:
    """(golden status, problem) after comparing ``actual`` with the golden file ``golden`` — or writing it.

    ``write`` puts a new or changed golden on disk; a golden that would hold a
    credential is refused (an adapter's error message can quote a URL with its
    key). ``accept``: the command that updates the golden, named in a missing
    golden's or a difference's message (default: ours, ``--update-golden``).
    """
    try:
        expected = golden.read_bytes()
    except FileNotFoundError:
        expected = None
        if not (update or write_missing):
            how = accept or "--update-golden (dsh-replay check --update)"
            return "missing", f"golden {golden} is missing; write it with {how}"
    except OSError as exc:  # a folder in its place, no permission...
        return "unreadable", f"golden {golden} cannot be read ({exc.strerror or exc}); make it a readable file"
    if expected == actual:
        return "matched", ""
    if expected is not None and not update:
        if accept is None:
            diff = golden_diff(expected, actual, name=str(golden))
        else:
            diff = golden_diff(expected, actual, name=str(golden), accept=accept)
        return "differs", _not_json(expected, golden) or diff
    from .secrets import find_secrets  # a write only: a replay that compares never scans

    leaks = [str(hit) for hit in find_secrets(actual.decode("utf-8", "replace"))]
    if leaks:
        return "refused", (
            f"golden {golden} was not written: it would hold {', '.join(leaks)}; the adapter's output "
            "quotes a credential (an error message with a URL?); keep keys out of what it raises"
        )
    write(golden, actual)
    return ("written" if expected is None else "updated"), ""


def _not_json(golden_bytes: bytes, golden: Path) -> str:
    """Why a golden is no chunk file at all (a line that is not JSON), or "": a diff would only confuse."""
    for number, line in enumerate(golden_bytes.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            return (f"golden {golden}: line {number} is not valid JSON ({exc}); mend it, or delete the golden "
                    "and write it again with --update-golden (dsh-replay check --update)")
    return ""
