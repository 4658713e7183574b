"""Provider drift: a recorded stream and a fresh recording of the same request, compared by shape.

Text always changes between two generations; what must not change unnoticed is
the *shape*: which kinds of event the provider sends, which fields they carry,
and what the adapter makes of them. :func:`compare_streams` takes both sides'
:class:`~dsh_replay.wire.coverage.WireCoverage` (deep: with field paths) and
their :class:`ChunkShape` and returns a :class:`StreamDrift`:

- kinds that are new (with their status: a new *unmapped* kind is breaking)
  and kinds that vanished;
- per kind present on both sides, field paths that are new or gone;
- the chunk shape: block types in order, tool names, the finish kind, the usage
  fields present, the error raised. Any change there is breaking: the adapter
  now answers the same request differently.

Nothing here does I/O; ``dsh-replay drift`` and ``pytest --record-mode=verify``
record the fresh side and print :meth:`StreamDrift.lines`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..protocol.chunks import BlockEnd, Finish, StreamChunk, TextBlock, ToolCallBlock, UsageChunk
from .coverage import UNMAPPED, KindCount, WireCoverage

__all__ = ["ChunkShape", "StreamDrift", "compare_streams"]

_USAGE_FIELDS = (("input_tokens", "inputTokens"), ("output_tokens", "outputTokens"),
                 ("cached_input_tokens", "cachedInputTokens"), ("reasoning_tokens", "reasoningTokens"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkShape:
    """What a chunk sequence is, text aside: ``ChunkShape.of(chunks, raised)``."""

    #: (block type, tool name or "") of every block, in order
    blocks: tuple[tuple[str, str], ...] = ()
    #: the finish kind ("stop", "tool-calls"), None when the stream did not finish
    finish: str | None = None
    #: the usage fields present, as the protocol names them
    usage: tuple[str, ...] = ()
    #: the class of the error the adapter raised, if it did
    raised: str | None = None

    @classmethod
    def of(cls, chunks: Iterable[StreamChunk], raised: BaseException | None = None) -> ChunkShape:
        blocks: list[tuple[str, str]] = []
        finish: str | None = None
        usage: tuple[str, ...] = ()
        for chunk in chunks:
            if isinstance(chunk, BlockEnd):
                block = chunk.block
                if isinstance(block, ToolCallBlock):
                    blocks.append(("tool-call", block.name))
                else:
                    blocks.append(("text" if isinstance(block, TextBlock) else "reasoning", ""))
            elif isinstance(chunk, UsageChunk):
                usage = tuple(name for attribute, name in _USAGE_FIELDS if getattr(chunk.usage, attribute) is not None)
            elif isinstance(chunk, Finish):
                finish = chunk.reason.kind
        return cls(blocks=tuple(blocks), finish=finish, usage=usage,
                   raised=type(raised).__name__ if raised is not None else None)

    def describe(self) -> str:
        """``text, tool-call get_weather; finish tool-calls; usage inputTokens, outputTokens``."""
        blocks = ", ".join(f"{kind} {name}".rstrip() for kind, name in self.blocks) or "no block"
        end = f"raised {self.raised}" if self.raised else f"finish {self.finish}"
        return f"{blocks}; {end}; usage {', '.join(self.usage) or 'none'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDrift:
    """How one call's fresh recording differs in shape from the recorded one."""

    call: int
    old: ChunkShape
    new: ChunkShape
    new_kinds: tuple[KindCount, ...] = ()
    vanished_kinds: tuple[str, ...] = ()
    new_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    removed_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def shape_changed(self) -> bool:
        return self.old != self.new

    @property
    def new_unmapped(self) -> tuple[KindCount, ...]:
        return tuple(kind for kind in self.new_kinds if kind.status == UNMAPPED)

    @property
    def breaking(self) -> bool:
        """The adapter's chunks changed shape, or the provider sends a kind nobody maps."""
        return self.shape_changed or bool(self.new_unmapped)

    @property
    def drifted(self) -> bool:
        return self.breaking or bool(self.new_kinds or self.vanished_kinds or self.new_fields or self.removed_fields)

    def lines(self) -> list[str]:
        """What changed, one line each (none for an unchanged shape)."""
        out = [f"new kind: {kind.describe()}, {kind.status}" for kind in self.new_kinds]
        out += [f"vanished kind: {kind}" for kind in self.vanished_kinds]
        out += [f"new field in {kind}: {', '.join(paths)}" for kind, paths in self.new_fields.items()]
        out += [f"removed field in {kind}: {', '.join(paths)}" for kind, paths in self.removed_fields.items()]
        if self.shape_changed:
            out.append(f"chunk shape changed: {self.old.describe()} -> {self.new.describe()}")
        return out


def compare_streams(call: int, old: WireCoverage | None, new: WireCoverage | None,
                    old_shape: ChunkShape, new_shape: ChunkShape) -> StreamDrift:
    """The drift of one call between its recorded (``old``) and fresh (``new``) stream.

    A side without coverage (no stream translated: an error status, an adapter
    that is not an ``HttpAdapter``) has no kinds; field paths are compared only
    for kinds both sides carried, and only when both were measured deeply.
    """
    old_kinds = {k.kind: k for k in old.kinds} if old is not None else {}
    new_kinds = {k.kind: k for k in new.kinds} if new is not None else {}
    added = tuple(kind for name, kind in new_kinds.items() if name not in old_kinds)
    vanished = tuple(name for name in old_kinds if name not in new_kinds)
    new_fields: dict[str, tuple[str, ...]] = {}
    removed_fields: dict[str, tuple[str, ...]] = {}
    if old is not None and new is not None and old.deep and new.deep:
        for name, kind in new_kinds.items():
            before = old_kinds.get(name)
            if before is None:
                continue
            if gained := tuple(sorted(set(kind.fields) - set(before.fields))):
                new_fields[name] = gained
            if lost := tuple(sorted(set(before.fields) - set(kind.fields))):
                removed_fields[name] = lost
    return StreamDrift(call=call, old=old_shape, new=new_shape, new_kinds=added, vanished_kinds=vanished,
                       new_fields=new_fields, removed_fields=removed_fields)
