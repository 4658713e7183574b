"""Chunk <-> JSON, and the golden JSONL format.

The JSON shapes are the seed's wire shapes (camelCase keys, ``index`` an int).
``chunk_to_json`` builds dicts with keys in the order of SPEC §3 so that
``dump_jsonl`` is byte-stable: the same chunks always give the same bytes, and
golden files diff cleanly in review. A golden may end with one ``raised`` line
recording the exception an adapter raised after the chunks it yielded.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson

from ..errors import CassetteError
from .bounds import read_bounded
from .chunks import (
    Block,
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishReason,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
)

__all__ = [
    "Golden", "JsonlWriter", "Raised", "block_from_json", "block_to_json", "chunk_from_json", "chunk_to_json",
    "dump_jsonl", "load_golden", "load_jsonl", "loads_json", "parse_golden_lines", "raised_line",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Raised:
    """The terminal ``raised`` line of a golden: the adapter raised ``error`` after its chunks."""

    error: str
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> Raised:
        return cls(error=type(exc).__name__, message=str(exc))

    def to_json(self) -> dict[str, Any]:
        return {"type": "raised", "error": self.error, "message": self.message}

    @classmethod
    def from_line(cls, value: object) -> Raised | None:
        """The ``raised`` line ``value`` stands for; ``None`` for any other line.

        A line of type ``raised`` without string ``error`` and ``message`` raises ``ValueError``.
        """
        if not (isinstance(value, dict) and value.get("type") == "raised"):
            return None
        error, message = value.get("error"), value.get("message")
        if not isinstance(error, str) or not isinstance(message, str):
            raise ValueError("a 'raised' line needs string fields 'error' and 'message'")
        return cls(error=error, message=message)


@dataclass(frozen=True, slots=True, kw_only=True)
class Golden:
    """A parsed golden file: the chunks, and the ``raised`` line if the adapter raised."""

    chunks: list[StreamChunk]
    raised: Raised | None = None


def block_to_json(block: Block) -> dict[str, Any]:
    if type(block) is TextBlock:
        return {"type": "text", "text": block.text}
    if type(block) is ToolCallBlock:
        return {"type": "tool-call", "id": block.id, "name": block.name, "arguments": block.arguments}
    if type(block) is ReasoningBlock:
        out: dict[str, Any] = {"type": "reasoning", "text": block.text}
        if block.signature is not None:
            out["signature"] = block.signature
        return out
    raise TypeError(f"not a block: {block!r}")


def _usage_to_json(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.cached_input_tokens is not None:
        out["cachedInputTokens"] = usage.cached_input_tokens
    if usage.reasoning_tokens is not None:
        out["reasoningTokens"] = usage.reasoning_tokens
    return out


def chunk_to_json(chunk: StreamChunk) -> dict[str, Any]:
    """The protocol JSON of one chunk, keys in the order of SPEC §3."""
    # exact-type checks, most frequent first: this runs once per chunk of every golden
    if type(chunk) is TextDelta:
        return {"type": "text-delta", "index": chunk.index, "text": chunk.text}
    if type(chunk) is ToolCallDelta:
        return {
            "type": "tool-call-delta",
            "index": chunk.index,
            "id": chunk.id,
            "name": chunk.name,
            "argumentsDelta": chunk.arguments_delta,
        }
    if type(chunk) is ReasoningDelta:
        return {"type": "reasoning-delta", "index": chunk.index, "text": chunk.text}
    if type(chunk) is BlockStart:
        return {"type": "block-start", "index": chunk.index, "blockType": chunk.block_type}
    if type(chunk) is BlockEnd:
        return {"type": "block-end", "index": chunk.index, "block": block_to_json(chunk.block)}
    if type(chunk) is UsageChunk:
        return {"type": "usage", "usage": _usage_to_json(chunk.usage)}
    if type(chunk) is Finish:
        reason: dict[str, Any] = {"kind": chunk.reason.kind}
        if chunk.reason.raw is not None:
            reason["raw"] = chunk.reason.raw
        return {"type": "finish", "reason": reason}
    raise TypeError(f"not a StreamChunk: {chunk!r}")


class _ShapeError(ValueError):
    pass


def _field(data: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    if name not in data:
        raise _ShapeError(f"{where}: missing field {name!r}")
    value = data[name]
    # bool is an int subclass; a JSON `true` is never a valid index or count
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _ShapeError(
            f"{where}: field {name!r} must be {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _optional(data: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    if data.get(name) is None:
        return None
    return _field(data, name, kind, where)


def block_from_json(data: object) -> Block:
    if not isinstance(data, Mapping):
        raise _ShapeError(f"block must be an object, got {type(data).__name__}")
    kind = data.get("type")
    where = f"{kind} block"
    if kind == "text":
        return TextBlock(text=_field(data, "text", str, where))
    if kind == "tool-call":
        return ToolCallBlock(
            id=CallId(_field(data, "id", str, where)),
            name=_field(data, "name", str, where),
            arguments=_field(data, "arguments", str, where),
        )
    if kind == "reasoning":
        return ReasoningBlock(
            text=_field(data, "text", str, where),
            signature=_optional(data, "signature", str, where),
        )
    raise _ShapeError(
        f"unknown block type {kind!r}; expected one of 'text', 'tool-call', 'reasoning'"
    )


def chunk_from_json(data: object) -> StreamChunk:
    """Build a chunk from its protocol JSON; raise ``ValueError`` naming the bad field."""
    try:
        return _chunk_from_json(data)
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from None


_CHUNK_TYPES = (
    "block-start", "text-delta", "reasoning-delta", "tool-call-delta", "block-end", "usage", "finish",
)


def _chunk_from_json(data: object) -> StreamChunk:
    if not isinstance(data, Mapping):
        raise _ShapeError(f"a chunk must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    where = str(kind)
    if kind == "text-delta":
        return TextDelta(index=_field(data, "index", int, where), text=_field(data, "text", str, where))
    if kind == "tool-call-delta":
        return ToolCallDelta(
            index=_field(data, "index", int, where),
            id=CallId(_field(data, "id", str, where)),
            name=_field(data, "name", str, where),
            arguments_delta=_field(data, "argumentsDelta", str, where),
        )
    if kind == "reasoning-delta":
        return ReasoningDelta(
            index=_field(data, "index", int, where), text=_field(data, "text", str, where)
        )
    if kind == "block-start":
        return BlockStart(
            index=_field(data, "index", int, where),
            block_type=_field(data, "blockType", str, where),
        )
    if kind == "block-end":
        return BlockEnd(
            index=_field(data, "index", int, where),
            block=block_from_json(_field(data, "block", Mapping, where)),
        )
    if kind == "usage":
        usage = _field(data, "usage", Mapping, where)
        return UsageChunk(
            usage=Usage(
                input_tokens=_field(usage, "inputTokens", int, "usage"),
                output_tokens=_field(usage, "outputTokens", int, "usage"),
                cached_input_tokens=_optional(usage, "cachedInputTokens", int, "usage"),
                reasoning_tokens=_optional(usage, "reasoningTokens", int, "usage"),
            )
        )
    if kind == "finish":
        reason = _field(data, "reason", Mapping, where)
        return Finish(
            reason=FinishReason(
                kind=_field(reason, "kind", str, "finish reason"),
                raw=_optional(reason, "raw", str, "finish reason"),
            )
        )
    raise _ShapeError(f"unknown chunk type {kind!r}; expected one of {', '.join(_CHUNK_TYPES)}")


_DUMP_OPTIONS = orjson.OPT_APPEND_NEWLINE


class JsonlWriter:
    """Golden JSONL written chunk by chunk (:meth:`add`): the bytes of :func:`dump_jsonl` (:meth:`getvalue`).

    A caller that writes each chunk as the adapter yields it need not keep the chunks. Each line goes
    into ``out`` at once (kept apart for a final join, each pinned ~4 KiB: orjson's buffer), a BytesIO
    of the writer's own unless given one (``check`` compares the lines with the golden as they come).
    """

    __slots__ = ("_out", "count")

    def __init__(self, out: io.BytesIO | None = None) -> None:
        self._out = io.BytesIO() if out is None else out  # getvalue() hands its buffer over: no copy
        self.count = 0  # chunks added

    def add(self, chunk: StreamChunk) -> None:
        """Append ``chunk``'s line; one whose text cannot be UTF-8 (a lone surrogate) raises ``ValueError``."""
        try:
            self._out.write(orjson.dumps(chunk_to_json(chunk), option=_DUMP_OPTIONS))
        except orjson.JSONEncodeError as exc:  # orjson's TypeError, which names no chunk
            raise ValueError(f"the chunk at position {self.count} cannot be written as JSON: {exc}") from None
        self.count += 1

    def getvalue(self, raised: Raised | BaseException | None = None) -> bytes:
        """The lines so far, then a ``raised`` line if ``raised`` is given (the writer is left as it is)."""
        return self._out.getvalue() if raised is None else self._out.getvalue() + raised_line(raised)


def raised_line(raised: Raised | BaseException) -> bytes:
    """The line that ends a golden when the adapter raised ``raised`` (a :class:`Raised` or the exception)."""
    if isinstance(raised, BaseException):
        raised = Raised.from_exception(raised)
    elif not isinstance(raised, Raised):
        what = f"the class {raised.__name__}" if isinstance(raised, type) else type(raised).__name__
        raise TypeError(f"raised must be a Raised, an exception instance or None, got {what}")
    try:
        return orjson.dumps(raised.to_json(), option=_DUMP_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"the raised line ({raised.error}) cannot be written as JSON: {exc}") from None


def dump_jsonl(chunks: Iterable[StreamChunk], raised: Raised | BaseException | None = None) -> bytes:
    """Serialize chunks (and an optional ``raised`` line) as golden JSONL bytes.

    A chunk whose text cannot be UTF-8 (a lone surrogate) raises ``ValueError`` naming its position.
    """
    writer = JsonlWriter()
    for chunk in chunks:
        writer.add(chunk)
    return writer.getvalue(raised)


def _read(data_or_path: bytes | str | os.PathLike[str] | Any) -> tuple[bytes, str | None]:
    """The bytes to parse and, when they come from a file, its path."""
    if isinstance(data_or_path, (bytes, bytearray, memoryview)):
        return bytes(data_or_path), None
    # a str is a path, like open(); callers with JSON text pass bytes. An int is
    # refused: open() would take it for a file descriptor (and close it).
    if not isinstance(data_or_path, (str, os.PathLike)):
        raise TypeError(f"expected JSONL bytes or a file path, got {type(data_or_path).__name__}")
    name = os.fsdecode(data_or_path)
    try:
        with open(data_or_path, "rb") as fh:
            return read_bounded(fh, name), name
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CassetteError(f"cannot read {name}: {reason}", path=name) from None


def parse_golden_lines(data: bytes) -> list[tuple[int, object]]:
    """Split JSONL bytes into (1-based line number, parsed JSON or the error text).

    Blank lines are skipped. A line that is not JSON yields ``(line, BadLine(...))``.
    """
    out: list[tuple[int, object]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            out.append((number, BadLine(_why_not_json(line, exc))))
    return out


def _why_not_json(line: bytes, exc: orjson.JSONDecodeError) -> str:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        # orjson says "str is not valid UTF-8: surrogates not allowed", which names neither
        return f"not UTF-8 text (byte {line[bad.start]:#04x} at column {bad.start + 1}); save the file as UTF-8"
    # orjson's own "line 1 column N" would contradict the file's line number
    return f"not valid JSON ({exc.msg} at column {exc.colno})"


@dataclass(frozen=True, slots=True)
class BadLine:
    """A JSONL line that could not be parsed as JSON."""

    reason: str


def _load(data_or_path: bytes | str | os.PathLike[str] | Any) -> tuple[Golden, str | None, int]:
    """The golden in ``data_or_path``, its path, and the line of its ``raised`` line (0: none)."""
    data, path = _read(data_or_path)
    name = path if path is not None else "<bytes>"

    def fail(number: int, message: str) -> NoReturn:
        raise CassetteError(f"{name}:{number}: {message}", path=path)

    chunks: list[StreamChunk] = []
    raised: Raised | None = None
    raised_line = 0
    for number, value in parse_golden_lines(data):
        if raised is not None:
            fail(number, f"nothing may follow the 'raised' line (line {raised_line})")
        if isinstance(value, BadLine):
            fail(number, value.reason)
        try:
            raised = Raised.from_line(value)
        except ValueError as exc:
            fail(number, str(exc))
        if raised is not None:
            raised_line = number
            continue
        try:
            chunks.append(chunk_from_json(value))
        except ValueError as exc:
            fail(number, f"not a chunk: {exc}")
    return Golden(chunks=chunks, raised=raised), path, raised_line


def load_golden(data_or_path: bytes | str | os.PathLike[str] | Any) -> Golden:
    """Read a golden file: chunks, then an optional ``raised`` line.

    A line that is not JSON, or not a chunk, raises :class:`CassetteError` naming
    the file and the 1-based line number; so does a file that cannot be read.
    """
    return _load(data_or_path)[0]


def load_jsonl(data_or_path: bytes | str | os.PathLike[str] | Any) -> list[StreamChunk]:
    """Read chunks from JSONL bytes or a file path.

    A ``raised`` line is not a chunk: use :func:`load_golden` for goldens of
    error paths. Errors name the line number.
    """
    golden, path, raised_line = _load(data_or_path)
    if golden.raised is not None:
        raise CassetteError(
            f"{path or '<bytes>'}:{raised_line}: a 'raised' line ({golden.raised.error}) ends these "
            "chunks: this is the golden of an error path; read it with load_golden()",
            path=path,
        )
    return golden.chunks


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def loads_json(text: str | bytes) -> Any:
    """Parse JSON exactly and strictly; raise ``ValueError`` when ``text`` is not JSON.

    Exactly: integers of any size stay ints (orjson turns those beyond 64 bits
    into floats) and numbers beyond a double are accepted. Strictly: ``NaN`` and
    ``Infinity`` are not JSON. Used where a value is kept, such as tool-call arguments.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
