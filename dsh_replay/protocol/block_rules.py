"""The block rules of the StreamChunk protocol: P2-P7j and P12 (SPEC §3).

Each rule is a small *check* ``(state, chunk, position) -> Found``: it reads the
:class:`StreamState` and one chunk, changes nothing, and returns ``OK`` when its
rule holds, else the violations it found (at the chunk's own position, but for
a tool-call delta's id or name, which only its ``block-end`` can judge). A check
guards itself: one that judges only some chunks (P6 text blocks, P7 tool calls)
finds nothing in the others, and one that needs an open block leaves a
misplaced delta or a refused ``block-end`` to P4/P5 alone.

The *records* (``record_*``) are what a chunk changes in the state once its
checks have run: a block opened, a delta added, a block closed. Which check
judges which chunk, under which rule id, is the table in ``_rules``.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from .chunks import (
    Block,
    BlockEnd,
    BlockStart,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
)
from .jsonl import loads_json
from .validator_state import CHUNK_TYPE, OK, Found, OpenBlock, StreamState, found

__all__ = [
    "BLOCK_KIND",
    "add_call_delta",
    "arguments_json_object",
    "block_kind",
    "call_block",
    "call_id_unique",
    "closes_open_block",
    "delta_not_empty",
    "delta_placement",
    "no_interleaving",
    "record_block_end",
    "record_block_start",
    "record_call_delta",
    "record_delta",
    "text_block",
    "unique_index",
]


# -- P2, P3: block-start -------------------------------------------------------------


def unique_index(state: StreamState, chunk: BlockStart, position: int) -> Found:
    """P2: a block-start index is never reused in one stream."""
    if chunk.index not in state.used_indexes:
        return OK
    return found(
        position,
        f"block-start at position {position} reuses index {chunk.index}; "
        "every block-start needs an index not used before in the stream",
    )


def no_interleaving(state: StreamState, chunk: BlockStart, position: int) -> Found:
    """P3: no block-start while another block is open (unless ``allow_interleaving``)."""
    if not state.open or state.allow_interleaving:
        return OK
    return found(
        position,
        f"block-start {chunk.index} at position {position} while block {state.describe_open()} "
        "is still open; close it first",
    )


def record_block_start(state: StreamState, chunk: BlockStart, position: int) -> None:
    state.used_indexes.add(chunk.index)
    if chunk.block_type == "tool-call":
        state.tool_blocks += 1
    if chunk.index not in state.open:  # a reused open index (P2) keeps its block
        state.open[chunk.index] = OpenBlock(chunk.block_type, position)


# -- P4, P6: deltas ------------------------------------------------------------------

#: the block type each delta type adds to
_DELTA_BLOCK: Final[dict[type, str]] = {TextDelta: "text", ReasoningDelta: "reasoning", ToolCallDelta: "tool-call"}


def _target(state: StreamState, chunk: Any) -> OpenBlock | None:
    """The open block a delta adds to; None when the delta is misplaced (P4)."""
    block = state.open.get(chunk.index)
    return block if block is not None and block.block_type == _DELTA_BLOCK[type(chunk)] else None


def delta_placement(state: StreamState, chunk: Any, position: int) -> Found:
    """P4: a delta targets an open block with the same index, and of its own kind."""
    index, wanted, kind = chunk.index, _DELTA_BLOCK[type(chunk)], CHUNK_TYPE[type(chunk)]
    block = state.open.get(index)
    if block is None:
        opened = f"open: {state.describe_open()}" if state.open else "no block is open"
        return found(
            position,
            f"{kind} at position {position} targets block {index}, which is not open ({opened}); "
            f"a {kind} must target an open {wanted} block",
        )
    if block.block_type != wanted:
        return found(
            position,
            f"{kind} at position {position} targets block {index}, a {block.block_type} block; "
            f"a {kind} must target a {wanted} block",
        )
    return OK


def delta_not_empty(state: StreamState, chunk: Any, position: int) -> Found:
    """P6: a text or reasoning delta carries at least one character."""
    if chunk.text or _target(state, chunk) is None:  # a misplaced delta is P4's alone
        return OK
    kind = CHUNK_TYPE[type(chunk)]
    return found(position, f"{kind} at position {position} has empty text; a delta carries >= 1 character")


def record_delta(state: StreamState, chunk: Any, position: int) -> None:
    block = _target(state, chunk)
    if block is not None:
        block.parts.append(chunk.text)


def add_call_delta(block: OpenBlock, chunk: ToolCallDelta, position: int) -> None:
    block.parts.append(chunk.arguments_delta)
    if chunk.id != block.last_id or chunk.name != block.last_name:
        block.last_id, block.last_name = chunk.id, chunk.name
        block.identities.append((position, chunk.id, chunk.name))


def record_call_delta(state: StreamState, chunk: ToolCallDelta, position: int) -> None:
    block = _target(state, chunk)
    if block is not None:
        add_call_delta(block, chunk, position)


# -- P5, P6, P7, P7j, P12: block-end -------------------------------------------------

BLOCK_KIND: Final[dict[type, str]] = {TextBlock: "text", ToolCallBlock: "tool-call", ReasoningBlock: "reasoning"}


def block_kind(block: Block) -> str:
    """``text``, ``tool-call`` or ``reasoning`` (for a subclass too)."""
    kind = BLOCK_KIND.get(type(block))
    if kind is not None:
        return kind
    for cls, kind in BLOCK_KIND.items():
        if isinstance(block, cls):
            return kind
    return type(block).__name__


def _closing(state: StreamState, chunk: BlockEnd) -> OpenBlock | None:
    """The open block this block-end closes; None when P5 refuses it."""
    block = state.open.get(chunk.index)
    carried = chunk.block
    if block is None or block.block_type != (BLOCK_KIND.get(type(carried)) or block_kind(carried)):
        return None
    return block


def closes_open_block(state: StreamState, chunk: BlockEnd, position: int) -> Found:
    """P5: a block-end closes an open block with the same index, of the type it was opened as."""
    index = chunk.index
    block = state.open.get(index)
    if block is None:
        was = "was already closed" if index in state.used_indexes else "was never opened"
        opened = f" (open: {state.describe_open()})" if state.open else ""
        return found(
            position,
            f"block-end at position {position} closes block {index}, which {was}{opened}; "
            "a block-end must close an open block",
        )
    got = BLOCK_KIND.get(type(chunk.block)) or block_kind(chunk.block)
    if got != block.block_type:
        return found(
            position,
            f"block-end at position {position} carries a {got} block; block {index} was "
            f"opened as {block.block_type}, so it must carry a {block.block_type} block",
        )
    return OK


def text_block(state: StreamState, chunk: BlockEnd, position: int) -> Found:
    """P6: a text or reasoning block has at least one delta, and its deltas joined equal its text."""
    carried = chunk.block
    if isinstance(carried, ToolCallBlock):
        return OK
    block = _closing(state, chunk)
    if block is None:
        return OK
    kind = block.block_type
    if not block.has_deltas:
        return found(
            position,
            f"{kind} block {chunk.index} closed at position {position} without any delta; "
            f"a {kind} block needs at least one {kind}-delta",
        )
    if block.joined_is(carried.text):
        return OK
    return found(
        position,
        f"block-end at position {position}: {kind} block {chunk.index} carries text {_clip(carried.text)}, "
        f"but its deltas joined are {_clip(block.joined_head())}; they must be equal",
    )


def _closing_call(state: StreamState, chunk: BlockEnd) -> tuple[OpenBlock, ToolCallBlock] | None:
    """The open tool-call block this block-end closes, and the call it carries; None for any other."""
    call = chunk.block
    if not isinstance(call, ToolCallBlock):
        return None
    block = state.open.get(chunk.index)
    return (block, call) if block is not None and block.block_type == "tool-call" else None


def _where(chunk: BlockEnd, position: int) -> str:
    return f"block-end at position {position}: tool-call block {chunk.index}"


def call_block(state: StreamState, chunk: BlockEnd, position: int) -> Found:
    """P7: a tool call's id, name and arguments are non-empty, and its deltas carry them."""
    closing = _closing_call(state, chunk)
    if closing is None:
        return OK
    block, call = closing
    problems = _call_fields(call)
    mismatch = _arguments_mismatch(block, call.arguments)
    if mismatch is not None:
        problems.append(mismatch)
    violations = [(position, f"{_where(chunk, position)} {problem}") for problem in problems]
    violations += _delta_identities(block, call, chunk.index)
    return tuple(violations)


def _call_fields(call: ToolCallBlock) -> list[str]:
    """What is missing from a call: its id, name and arguments must be non-empty."""
    problems = []
    if not call.id:
        problems.append("has an empty id; a tool call needs the provider's call id")
    if not call.name:
        problems.append("has an empty name; a tool call needs the tool's name")
    if not call.arguments:
        problems.append('has empty arguments; a call without arguments carries "{}"')
    return problems


def _arguments_mismatch(block: OpenBlock, arguments: str) -> str | None:
    """How the argumentsDelta joined differ from the arguments (``"{}"`` may come as no delta at all)."""
    if block.joined_is(arguments):
        return None
    streamed = block.joined_length()
    if not streamed and arguments == "{}":
        return None
    if streamed:
        return (
            f"arguments {_clip(arguments)} differ from the argumentsDelta joined {_clip(block.joined_head())}; "
            "they must be equal"
        )
    return (
        f"has arguments {_clip(arguments)} but no delta carried them; "
        'only a call without arguments ("{}") may stream none'
    )


def _delta_identities(block: OpenBlock, call: ToolCallBlock, index: int) -> list[tuple[int, str]]:
    """Every delta's id equals the call's; its name equals the call's name or a prefix of it."""
    violations = []
    for at, delta_id, delta_name in block.identities:
        if delta_id != call.id:
            violations.append((at, f"tool-call-delta at position {at} has id {delta_id!r}; "
                               f"block {index} ends with id {call.id!r}, and every delta must carry it"))
        if not call.name.startswith(delta_name):
            violations.append((at, f"tool-call-delta at position {at} has name {delta_name!r}; "
                               f"it must equal {call.name!r} or be a prefix of it"))
    return violations


def arguments_json_object(state: StreamState, chunk: BlockEnd, position: int) -> Found:
    """P7j: a tool call's arguments parse as a JSON object (unless ``json_arguments=False``)."""
    closing = _closing_call(state, chunk) if state.json_arguments else None
    if closing is None or not closing[1].arguments:  # empty arguments are P7's
        return OK
    arguments = closing[1].arguments
    problem = _json_object_problem(arguments)
    if problem is None:
        return OK
    return found(position, f"{_where(chunk, position)} arguments {problem}: {_clip(arguments)}; they must be a JSON object")


def call_id_unique(state: StreamState, chunk: BlockEnd, position: int) -> Found:
    """P12: tool-call ids are unique within a stream."""
    closing = _closing_call(state, chunk)
    if closing is None or closing[1].id not in state.call_ids:
        return OK
    return found(position, f"{_where(chunk, position)} reuses call id {closing[1].id!r}; call ids must be unique in a stream")


def record_block_end(state: StreamState, chunk: BlockEnd, position: int) -> None:
    block, call = state.open.pop(chunk.index, None), chunk.block
    if block is not None and block.block_type == "tool-call" and isinstance(call, ToolCallBlock) and call.id:
        state.call_ids.add(call.id)


# -- helpers -------------------------------------------------------------------------


def _json_object_problem(text: str) -> str | None:
    """What keeps ``text`` from being a JSON object, or None when it is one."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        # orjson refuses some valid JSON (numbers beyond a double, lone surrogate
        # escapes, deep nesting); the exact parser has the last word
        try:
            value = loads_json(text)
        except ValueError:
            return "are not valid JSON"
    return None if isinstance(value, dict) else "are JSON but not an object"


def _clip(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[: limit - 1] + "…")
