"""A cassette's stream as a timeline: each recorded fragment with the chunks its arrival released.

Shared by ``show`` (text) and ``report`` (HTML): a chunk belongs to the piece
that was the last one read when the adapter yielded it.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..adapters.route_table import RouteTable
from ..cassette.intercept import install, replay_response, uninstall
from ..cassette.pacing import Fragmentation
from ..cassette.replay import Outcome, adapter_settings, case_options
from ..cassette.store import Cassette
from ..errors import CassetteError, DshReplayError
from ..protocol.chunks import StreamChunk, TextDelta

__all__ = ["Piece", "StreamTimeline", "fragment_preview", "stream_timeline"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Piece:
    """One piece of a response body as a recorded replay serves it, and the chunks its arrival released."""

    interaction: int
    #: arrival in ms after the interaction's response headers (0.0 for a body recorded without timing)
    ms: float
    offset: int
    size: int
    data: bytes
    #: whether ``ms`` was recorded, not assumed
    timed: bool
    chunks: tuple[StreamChunk, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamTimeline:
    """A cassette's pieces in arrival order, each with the chunks the adapter produced on reading it."""

    pieces: tuple[Piece, ...]
    #: the adapter's run; ``None`` when it could not run (no metadata, an unknown route), ``note`` says why
    outcome: Outcome | None = None
    note: str = ""

    @property
    def first_byte_ms(self) -> float | None:
        first = next((piece for piece in self.pieces if piece.interaction == 0), None)
        return first.ms if first is not None and first.timed else None

    def first_piece_with(self, kind: type | None = None) -> Piece | None:
        """The first piece that released a chunk (of ``kind``, if given)."""
        return next((piece for piece in self.pieces
                     if any(kind is None or type(chunk) is kind for chunk in piece.chunks)), None)

    @property
    def first_text(self) -> Piece | None:
        return self.first_piece_with(TextDelta)


def _pieces(cassette: Cassette) -> list[Piece]:
    """The pieces replay serves: the recorded fragments, or the whole body as one."""
    pieces: list[Piece] = []
    for number, interaction in enumerate(cassette.interactions):
        timed = bool(interaction.fragments)
        at = 0
        for ms, size in interaction.fragments or ([(0.0, len(interaction.body))] if interaction.body else []):
            pieces.append(Piece(interaction=number, ms=ms, offset=at, size=size,
                                data=interaction.body[at:at + size], timed=timed))
            at += size
    return pieces


class _Timeline:
    """Serves a cassette's interactions in order and notes which piece is being read."""

    def __init__(self, cassette: Cassette, pieces: list[Piece]) -> None:
        self.cassette = cassette
        self.position = 0
        self.piece = -1
        # where each interaction's pieces start: a response the adapter does not read to the end
        # (an error status it gives up on) must not shift the pieces of the ones after it
        self.starts = [next((n for n, p in enumerate(pieces) if p.interaction == i), len(pieces))
                       for i in range(len(cassette.interactions))]

    def handle(self, request: Any, inner: Any, lib: types.ModuleType, is_async: bool) -> Any:
        if self.position >= len(self.cassette.interactions):
            raise CassetteError(f"{self.cassette.path}: the adapter made more requests than were recorded")
        interaction = self.cassette.interactions[self.position]
        start = self.starts[self.position]
        self.position += 1
        response = replay_response(lib, request, interaction, fragmentation=Fragmentation("recorded"), speed=0.0,
                                   fault=None, path=str(self.cassette.path), is_async=is_async)
        inner_stream = response.stream.source

        async def counting() -> Any:
            async for number, piece in _numbered(inner_stream):
                self.piece = start + number
                yield piece

        response.stream.source = counting()
        return response


async def _numbered(stream: Any) -> Any:
    number = 0
    async for piece in stream:
        yield number, piece
        number += 1


async def stream_timeline(cassette: Cassette, routes: RouteTable | None = None) -> StreamTimeline:
    """Replay ``cassette`` as recorded through its route's adapter and attribute each chunk to its piece.

    A chunk belongs to the piece whose arrival released it: the adapter yields
    it while that piece is the last one read.
    """
    pieces = _pieces(cassette)
    if "route" not in cassette.metadata:
        return StreamTimeline(pieces=tuple(pieces))
    try:
        route, calls, base_url = case_options(cassette)
        table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
        adapter = table.adapter(route, base_url=base_url, **adapter_settings(cassette).kwargs())
    except DshReplayError as exc:
        return StreamTimeline(pieces=tuple(pieces), note=str(exc))
    timeline = _Timeline(cassette, pieces)
    released: dict[int, list[StreamChunk]] = {}
    outcome = Outcome()
    install(timeline)
    try:
        for options in calls:
            async for chunk in adapter.stream(options):
                outcome.chunks.append(chunk)
                # a chunk yielded before any byte was read still came no earlier than the first piece
                released.setdefault(max(timeline.piece, 0), []).append(chunk)
    except Exception as exc:  # part of the timeline, not raised
        outcome.raised = exc
    finally:
        uninstall(timeline)
    placed = tuple(Piece(interaction=p.interaction, ms=p.ms, offset=p.offset, size=p.size, data=p.data,
                         timed=p.timed, chunks=tuple(released.get(n, ()))) for n, p in enumerate(pieces))
    return StreamTimeline(pieces=placed, outcome=outcome)


def fragment_preview(data: bytes) -> str:
    """A fragment's bytes as one printable line: invalid UTF-8 as U+FFFD, control characters escaped.

    Model output is untrusted: an ESC would drive the reader's terminal, a NUL
    or a line separator would break a table row or an HTML page.
    """
    text = data.decode("utf-8", "replace")
    return "".join(_visible(char) for char in text)


def _visible(char: str) -> str:
    if char == "\r":
        return "\\r"
    if char == "\n":
        return "\\n"
    if char == "\t" or (char.isprintable() and char not in "\u2028\u2029"):
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
