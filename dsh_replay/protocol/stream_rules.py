"""The stream rules of the StreamChunk protocol: P8-P11 (SPEC §3).

Checks and records as in ``_block_rules``. These are the once-per-stream
rules: their *counts* are checks here (a second usage is P8, a second finish
P9), their *order* (P9: finish right after usage; P11: nothing after finish) is
the phase table of ``_validator_state``. All but P10 read no field of the chunk,
so they also judge a malformed usage or finish, which still takes its place in
the stream.
"""

from __future__ import annotations

from .chunks import Finish
from .validator_state import OK, Found, StreamState, found

__all__ = [
    "finish_once",
    "finish_reason",
    "record_finish",
    "record_usage",
    "stream_end",
    "usage_after_blocks",
    "usage_before_finish",
    "usage_once",
]


# -- P8: usage ---------------------------------------------------------------------


def usage_once(state: StreamState, chunk: object, position: int) -> Found:
    """P8: a stream carries exactly one usage."""
    first = state.usage_at
    if first is None:
        return OK
    return found(position, f"usage at position {position}: usage must come exactly once; the first came at position {first}")


def usage_after_blocks(state: StreamState, chunk: object, position: int) -> Found:
    """P8: usage comes after every block is closed."""
    if not state.open:
        return OK
    return found(
        position,
        f"usage at position {position} while block {state.describe_open()} is still open; "
        "usage comes after every block is closed",
    )


def record_usage(state: StreamState, chunk: object, position: int) -> None:
    if state.usage_at is None:
        state.usage_at = position


# -- P8, P9, P10: finish ------------------------------------------------------------


def usage_before_finish(state: StreamState, chunk: object, position: int) -> Found:
    """P8: the usage comes before finish (so a finish is where a missing usage shows)."""
    if state.usage_at is not None:
        return OK
    return found(
        position,
        f"finish at position {position}: no usage came before it; "
        "a stream carries exactly one usage, right before finish",
    )


def finish_once(state: StreamState, chunk: object, position: int) -> Found:
    """P9: a stream has exactly one finish (its order - last, right after usage - is the phase table's)."""
    first = state.finish_at
    if first is None:
        return OK
    return found(
        position,
        f"finish at position {position} is a second finish (the first came at position {first}); "
        "a stream has exactly one finish, its last chunk",
    )


def finish_reason(state: StreamState, chunk: Finish, position: int) -> Found:
    """P10: the finish kind is ``tool-calls`` if and only if the stream has a tool-call block."""
    tools = state.tool_blocks
    wanted = "tool-calls" if tools else "stop"
    if chunk.reason.kind == wanted:
        return OK
    because = f"the stream has {tools} tool-call block(s)" if tools else "the stream has no tool-call block"
    return found(
        position,
        f"finish at position {position} has kind {chunk.reason.kind!r}; {because}, so it must be {wanted!r}",
    )


def record_finish(state: StreamState, chunk: object, position: int) -> None:
    if state.finish_at is None:
        state.finish_at = position


# -- P11: the end ---------------------------------------------------------------------


def stream_end(state: StreamState) -> Found:
    """P11: a sequence that ends without finish is a violation naming the blocks still open."""
    if state.finish_at is not None:
        return OK
    still_open = state.describe_open()
    tail = f"; blocks still open: {still_open}" if still_open else ""
    return found(state.position, f"stream ended after {state.position} chunk(s) without finish{tail}")
