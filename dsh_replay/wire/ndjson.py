"""Sans-I/O decoder for newline-delimited JSON bodies (Ollama's streaming API).

Theory of operation
===================

Ollama streams ``/api/chat`` and ``/api/generate`` as one JSON object per line
(https://github.com/ollama/ollama/blob/main/docs/api.md). The decoder takes the
body in fragments of any size and returns the values of the lines those
fragments complete; it does no I/O, so live streams, replay and tests share it.

- **Only LF ends a line.** JSON text cannot hold a raw LF, so LF is the one safe
  separator; a CR before it is JSON whitespace, which the parser already skips,
  so ``\\r\\n`` bodies need no extra pass.
- **Bytes wait in a list until a line ends**, so a long line arriving in many
  small pieces is joined once rather than once per piece.
- **orjson parses bytes directly** and checks UTF-8 as it goes, so a multi-byte
  character split across fragments is harmless (lines are parsed only whole) and
  invalid UTF-8 is reported like any other bad line.
- **Blank lines are skipped** (empty or whitespace only). We try to parse first
  and look for blankness only when parsing fails, because blank lines are rare.
- **A bad line raises** :class:`~dsh_replay.MalformedStreamError` naming its
  1-based line number, with the line itself in ``raw``.
- :meth:`NDJSONDecoder.flush` parses a last line that has no LF after it.
"""

from __future__ import annotations

import orjson

from ..errors import MalformedStreamError
from .sse import _as_bytes

__all__ = ["NDJSONDecoder"]


class NDJSONDecoder:
    """Incremental NDJSON decoder: ``feed`` bytes, then ``flush`` at end of body.

    Each complete line is parsed as JSON; blank lines are skipped; a line that
    is not JSON is a :class:`MalformedStreamError` naming its line number. An
    adapter normally names :class:`CutAwareNDJSONDecoder` (in
    ``dsh_replay.adapters``) as its ``decoder_class``, which calls a last line
    cut short an interrupted stream instead.

    Example::

        decoder = NDJSONDecoder()
        decoder.feed(b'{"text": "Hi"}\\n{"do')     # -> [{'text': 'Hi'}]
        decoder.feed(b'ne": true}\\n')             # -> [{'done': True}]
        decoder.flush()                           # -> []
    """

    __slots__ = ("_line_no", "_tail")

    def __init__(self) -> None:
        # Bytes after the last LF, not yet parsed.
        self._tail: list[bytes] = []
        # Lines parsed so far, blank ones included, for error messages.
        self._line_no = 0

    def feed(self, data: bytes) -> list[object]:
        """Decode one fragment of the body; return the values of the lines it completes.

        ``data`` is ``bytes`` or any other bytes-like object (``bytearray``,
        ``memoryview``); anything else raises ``TypeError``.
        """
        # No type check up front, as in SSEDecoder.feed: a value that is not bytes
        # fails here, before any state changes, and is converted or refused.
        try:
            cut = data.rfind(b"\n")
        except (TypeError, AttributeError):
            if type(data) is bytes:
                raise
            return self.feed(_as_bytes(data))
        if cut < 0:
            if data:
                self._tail.append(data)
            return []
        if self._tail:
            self._tail.append(data)
            data = b"".join(self._tail)
            self._tail.clear()
            cut = data.rfind(b"\n")
        if cut + 1 < len(data):
            self._tail.append(data[cut + 1 :])
        return self._parse(data[:cut].split(b"\n"))

    def flush(self) -> list[object]:
        """End the body: parse a last line that was not followed by LF."""
        if not self._tail:
            return []
        line = b"".join(self._tail)
        self._tail.clear()
        return self._parse([line])

    def _parse(self, lines: list[bytes]) -> list[object]:
        out: list[object] = []
        append = out.append
        loads = orjson.loads
        for line_no, line in enumerate(lines, self._line_no + 1):
            try:
                append(loads(line))
            except orjson.JSONDecodeError as exc:
                if line.strip():
                    raise MalformedStreamError(
                        f"NDJSON line {line_no} is not valid JSON ({exc}); "
                        "the offending line is in .raw",
                        raw=line,
                    ) from None
        self._line_no += len(lines)
        return out
