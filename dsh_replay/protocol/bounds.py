"""Chunk JSON lines read with limits: a stream that never ends, or one endless line, is refused, not kept.

A golden, ``validate``'s input and an adapter's stdout under ``conform --command``
are read whole before they are parsed; from a device, a runaway adapter or a
pipe that never closes, "whole" is unbounded. Every such read goes through
:class:`BoundedJsonl`, which checks the limits as each piece arrives. The
limits are module constants, read at each piece, so that a test can lower them.
"""

from __future__ import annotations

from typing import BinaryIO, NoReturn

from ..errors import CassetteError

__all__ = ["MAX_JSONL_BYTES", "MAX_JSONL_LINES", "MAX_JSONL_LINE_BYTES", "BoundedJsonl", "read_bounded"]

#: The longest line read from a chunk file: a block-end line holds its block's whole text, MBs for a long one.
MAX_JSONL_LINE_BYTES = 64 << 20
#: The most lines: a 200 MB provider body gives about 1.5 million chunks, and each parsed line ~500 bytes.
MAX_JSONL_LINES = 10_000_000
#: The most bytes of one chunk file or stream.
MAX_JSONL_BYTES = 1 << 30
_PIECE = 4 << 20  # bytes read at a time: a stream that breaks a limit is stopped this close to it


class BoundedJsonl:
    """Chunk JSONL gathered piece by piece, refused with a :class:`CassetteError` past a ``MAX_JSONL_*`` limit
    (read at each piece): a stream that breaks one (an adapter in a loop, a device) is stopped, not kept."""

    __slots__ = ("_open", "_pieces", "lines", "name", "size")

    def __init__(self, name: str) -> None:
        self.name = name  # what the errors say was read: a file, "<stdin>", a command's stdout
        self._pieces: list[bytes] = []
        self._open = self.lines = self.size = 0  # _open: the bytes of the line not ended yet

    def add(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > MAX_JSONL_BYTES:
            self._refuse(f"more than {MAX_JSONL_BYTES:,} bytes, the most a chunk file may have")
        # from where the unended line began, jump to the last newline within reach: steps of up to a line's limit
        start, longest = -self._open, MAX_JSONL_LINE_BYTES
        while len(piece) - start > longest:
            newline = piece.rfind(b"\n", max(start, 0), start + longest + 1)
            if newline < 0:
                line = self.lines + piece.count(b"\n", 0, max(start, 0)) + 1
                self._refuse(f"line {line} is longer than {longest:,} bytes, the most a chunk line may have")
            start = newline + 1
        self._open = self._open + len(piece) if (last := piece.rfind(b"\n")) < 0 else len(piece) - last - 1
        self.lines += piece.count(b"\n")
        if self.lines > MAX_JSONL_LINES:
            self._refuse(f"more than {MAX_JSONL_LINES:,} lines, the most a chunk file may have")
        self._pieces.append(piece)

    def _refuse(self, what: str) -> NoReturn:
        raise CassetteError(f"{self.name}: {what} (one JSON chunk per line)")

    def getvalue(self) -> bytes:
        return self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)


def read_bounded(source: BinaryIO, name: str) -> bytes:
    """All of ``source`` (a file, a pipe, stdin) as :class:`BoundedJsonl` bounds it; ``name`` is what errors say."""
    gathered = BoundedJsonl(name)
    while piece := source.read(_PIECE):
        gathered.add(piece)
    return gathered.getvalue()
