"""``dsh-replay diff``: two chunk files compared block by block, then line by line."""

from __future__ import annotations

import argparse
import difflib
from typing import Any, TextIO

import orjson

from ..protocol.chunks import Finish, FinishReason, Usage, UsageChunk
from ..protocol.jsonl import block_to_json, chunk_to_json, dump_jsonl, load_golden
from ..protocol.turn import collect

__all__ = ["DESCRIPTION", "EXAMPLE", "add_arguments", "run", "run_diff"]


def _block_label(position: int, block: Any) -> str:
    data = block_to_json(block)
    name = f" {data['name']}" if "name" in data else ""
    return f"block {position} ({data['type']}{name})"


def _mark_span(old: str, new: str) -> tuple[str, str]:
    """Both strings with the differing middle bracketed: ``abc[XY]def``."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    def mark(text: str) -> str:
        return repr(text[:start] + "[" + text[start:len(text) - end] + "]" + text[len(text) - end:])
    return mark(old), mark(new)


def run_diff(a: str, b: str, out: TextIO) -> int:
    left, right = load_golden(a), load_golden(b)
    old_turn, new_turn = collect(left.chunks), collect(right.chunks)
    lines: list[str] = []
    for position in range(max(len(old_turn.blocks), len(new_turn.blocks))):
        if position >= len(old_turn.blocks):
            lines.append(f"{_block_label(position, new_turn.blocks[position])}: only in {b}")
            continue
        if position >= len(new_turn.blocks):
            lines.append(f"{_block_label(position, old_turn.blocks[position])}: only in {a}")
            continue
        old, new = block_to_json(old_turn.blocks[position]), block_to_json(new_turn.blocks[position])
        if old == new:
            continue
        label = _block_label(position, old_turn.blocks[position])
        if old["type"] != new["type"]:
            lines.append(f"{label}: type differs ({old['type']} vs {new['type']})")
            continue
        for field in ("text", "arguments", "id", "name", "signature"):
            if old.get(field) != new.get(field):
                lines.append(f"{label}: {field} differs")
                marked_old, marked_new = _mark_span(str(old.get(field, "")), str(new.get(field, "")))
                lines += [f"  - {marked_old}", f"  + {marked_new}"]
    for what, old_value, new_value in (
        ("usage", _usage_json(old_turn.usage), _usage_json(new_turn.usage)),
        ("finish", _reason_json(old_turn.finish_reason), _reason_json(new_turn.finish_reason)),
        ("raised", left.raised and left.raised.to_json(), right.raised and right.raised.to_json()),
    ):
        if old_value != new_value:
            lines += [f"{what} differs:", f"  - {_json_text(old_value)}", f"  + {_json_text(new_value)}"]
    old_bytes, new_bytes = dump_jsonl(left.chunks, left.raised), dump_jsonl(right.chunks, right.raised)
    if old_bytes == new_bytes:
        out.write("identical\n")
        return 0
    if not lines:
        lines.append("the blocks are the same; the chunking differs")
    out.write("\n".join(lines) + "\n\n")
    out.write(_line_diff(old_bytes, new_bytes, a, b))
    return 1


def _usage_json(usage: Usage | None) -> Any:
    return None if usage is None else chunk_to_json(UsageChunk(usage=usage))["usage"]


def _reason_json(reason: FinishReason | None) -> Any:
    return None if reason is None else chunk_to_json(Finish(reason=reason))["reason"]


def _json_text(value: Any) -> str:
    return "(none)" if value is None else orjson.dumps(value).decode()


def _line_diff(old_bytes: bytes, new_bytes: bytes, a: str, b: str) -> str:
    """The chunk-by-chunk line diff, ``-`` for A and ``+`` for B."""
    # split on \n only: a chunk's text may hold U+2028 or U+0085, which splitlines() would cut at
    old, new = old_bytes.decode().split("\n")[:-1], new_bytes.decode().split("\n")[:-1]
    lines = [f"--- {a} ({len(old)} line(s))", f"+++ {b} ({len(new)} line(s))"]
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(2):
        lines.append(f"@@ line {group[0][1] + 1} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [f"  {line}" for line in old[i1:i2]]
            else:
                lines += [f"- {line}" for line in old[i1:i2]] + [f"+ {line}" for line in new[j1:j2]]
    return "\n".join(lines) + "\n"


DESCRIPTION = (
    "Compare two chunk JSONL files by block (text, tool calls, reasoning), usage and finish, then\n"
    "show the line diff. Exit 0 when identical, 1 otherwise."
)
EXAMPLE = "dsh-replay diff old.chunks.jsonl new.chunks.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A")
    parser.add_argument("b", metavar="B")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_diff(args.a, args.b, out)
