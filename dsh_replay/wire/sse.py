"""Sans-I/O decoder for ``text/event-stream`` bodies.

Theory of operation
===================

The parsing rules are those of the WHATWG HTML standard, "Server-sent events",
section "Parsing an event stream" (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
The decoder takes bytes as they arrive, in fragments of any size, and returns the
events that those bytes complete; nothing here knows about sockets, HTTP or
event loops, so the same code serves live streams, cassette replay and tests.

Almost every byte an LLM provider sends is ``data: {json}\\n\\n``: one field line,
then a blank line. The decoder is built so that this case costs little more than
finding the blank lines, and everything else still follows the standard exactly:

1. **Line ends are normalised to LF on the way in.** The standard accepts CRLF, LF
   and a lone CR, and a carriage return can never be part of a value, so
   rewriting ``\\r\\n`` and ``\\r`` to ``\\n`` changes no meaning. The one trap is a
   fragment that ends in CR: the LF that may open the next fragment belongs to the
   same line end, so we remember the CR and drop that LF. After this step every
   event boundary is the two bytes ``\\n\\n``.
2. **Bytes are buffered until a boundary.** A fragment with no ``\\n\\n`` (and none
   straddling the previous fragment) is only appended to a list, so a large event
   arriving in many small pieces is joined once, not once per piece.
3. **Only complete lines are decoded.** A multi-byte character can be split at a
   fragment edge but never across a line end, so decoding the bytes up to the
   last boundary cannot break one. Invalid UTF-8 raises
   :class:`~dsh_replay.MalformedStreamError` with the offending line in ``raw``;
   the stream cannot be trusted after that.
4. **Common shapes take short paths.** When every block before the last boundary
   is one ``data: `` line (OpenAI chat and the APIs copying it), a single split on
   ``\\n\\ndata: `` yields every payload, and one ``memchr`` for an LF over the
   payloads joined proves that nothing else was there. Each payload is decoded
   on its own, so ASCII ones stay compact strings, and the events are built by
   ``map``, with no Python code running per event. (Single bytes are looked for
   as ints, ``0x0A in data``: a ``bytes`` needle first takes a buffer of itself,
   which costs as much as the search.) ``data:`` and ``event: X\\ndata: Y`` blocks
   (Anthropic, OpenAI Responses) are built inline in :meth:`SSEDecoder._blocks`.
   Any other block (several data lines, ``id:``/``retry:``, comments, unknown
   fields) runs the field-by-field rules of the standard in :meth:`SSEDecoder._block`.
5. **End of body is explicit.** :meth:`SSEDecoder.flush` treats the end of the
   body as a final blank line, because some recorded bodies (Anthropic's among
   them) stop without one, and sets :attr:`SSEDecoder.truncated` when the body
   did not end on an event boundary so that an adapter can call the stream cut.

Per the standard: a leading UTF-8 BOM is dropped once; lines starting with ``:``
are comments; one space after the colon is removed; ``data`` lines are joined
with ``\\n``; a block with no ``data`` line dispatches nothing; an ``id`` holding
NUL is ignored and the last id sticks to every later event; ``retry`` counts only
when it is all ASCII digits; a line without a colon is a field with an empty value.
"""

from __future__ import annotations

from itertools import repeat
from typing import TYPE_CHECKING, NamedTuple, cast

from ..errors import MalformedStreamError

__all__ = ["SSEDecoder", "SSEEvent"]

_BOM = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    """One dispatched server-sent event (an immutable value).

    ``id`` is the stream's last event id when the event was dispatched (``None``
    if the stream never set one); ``retry`` is the reconnection time, in
    milliseconds, given inside this event's own block, if any.

    A named tuple rather than a dataclass: building the event is the largest
    single cost of decoding a typical stream, and a tuple is built in C.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None

    def __repr__(self) -> str:
        # Spelled out so that the decoder's events (see _DecodedEvent) print alike.
        return f"SSEEvent(event={self.event!r}, data={self.data!r}, id={self.id!r}, retry={self.retry!r})"


class _TupleConstructor(tuple):  # type: ignore[type-arg]
    __slots__ = ()
    # With tuple's own __new__ in its dict, CPython keeps tuple's C constructor in
    # this class's tp_new slot instead of a slot that calls back into Python, and
    # a subclass listing this class first inherits that slot.
    __new__ = tuple.__new__


class _DecodedEvent(_TupleConstructor, SSEEvent):
    """An :class:`SSEEvent` as the decoder builds it: ``_DecodedEvent((event, data, id, retry))``.

    Building the event is the largest single cost of decoding a typical stream.
    A NamedTuple's ``__new__`` is Python code, and every subclass of it inherits a
    Python-level constructor; this class puts tuple's C constructor first in its
    MRO instead, which makes each event about a fifth cheaper to build and lets
    ``map`` build a whole list of them without running any Python code. It is an
    ``SSEEvent`` in every way but ``type()``: same fields, equality, hash, repr,
    ``_replace``, and pickling (as a plain ``SSEEvent``).
    """

    __slots__ = ()

    if TYPE_CHECKING:

        def __new__(cls, fields: tuple[str, str, str | None, int | None], /) -> _DecodedEvent: ...

    def __reduce__(self) -> tuple[type[SSEEvent], tuple[str, str, str | None, int | None]]:
        return SSEEvent, (self.event, self.data, self.id, self.retry)


# Endless iterators zipped with the payloads; sharing them is safe, as nothing
# can exhaust them and zip only ever asks them for their next (same) value.
_MESSAGE = repeat("message")
_NONE = repeat(None)
# Below this many events in one fragment (a live stream often brings one at a
# time), a comprehension is cheaper than setting up map and zip.
_FEW = 6


def _as_bytes(data: object) -> bytes:
    """``data`` as bytes when it is bytes-like; ``TypeError`` naming its type otherwise."""
    if isinstance(data, str):
        raise TypeError("feed() takes bytes, got str; encode the text first (data.encode())")
    try:
        return bytes(memoryview(data))  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"feed() takes bytes, got {type(data).__name__}") from None


class SSEDecoder:
    """Incremental ``text/event-stream`` decoder: ``feed`` bytes, then ``flush``.

    ``last_event_id`` and ``retry`` hold the stream state the standard asks a
    client to keep (for a reconnection); ``truncated`` is set by :meth:`flush`.
    Fragments may cut anywhere (inside a line, a CRLF or a UTF-8 character).
    An adapter normally names :class:`CutAwareSSEDecoder` (in
    ``dsh_replay.adapters``) as its ``decoder_class`` instead, which tells a body
    cut inside an event from a malformed one.

    Example::

        decoder = SSEDecoder()
        decoder.feed(b'event: delta\\ndata: {"te')   # -> []
        decoder.feed(b'xt": "Hi"}\\n\\n')             # -> [SSEEvent(event='delta', data='{"text": "Hi"}', ...)]
        decoder.flush()                               # -> [] (nothing left over)
    """

    __slots__ = ("_after_cr", "_head", "_pieces", "_tail", "last_event_id", "retry", "truncated")

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self.truncated = False
        # LF-normalised bytes after the last event boundary, not yet decoded.
        self._tail = b""
        # Fragments that completed nothing, after ``_tail``: joined once, when a
        # boundary arrives, so an event in many small pieces is not copied again
        # with every piece.
        self._pieces: list[bytes] = []
        # The first bytes of the body while we cannot yet tell whether they are a
        # BOM (fewer than three seen); None once that is settled.
        self._head: bytes | None = b""
        self._after_cr = False

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Decode one fragment of the body; return the events it completes.

        ``data`` is ``bytes`` or any other bytes-like object (``bytearray``,
        ``memoryview``); anything else raises ``TypeError``.
        """
        # No type check up front: this runs once per fragment. A value that is not
        # bytes fails in one of these two statements, either before any state
        # changed (see _normalise) or, for a memoryview, after _normalise left the
        # state matching the ``data`` it returned; either way, going round again
        # with ``data``'s bytes is exact.
        try:
            if self._head is not None or self._after_cr or 0x0D in data:
                data = self._normalise(data)
            cut = data.rfind(b"\n\n")
        except (TypeError, AttributeError):
            if type(data) is bytes:
                raise
            return self.feed(_as_bytes(data))
        tail = self._tail
        if cut < 0:
            # Nothing ends here unless a boundary straddles the edge: "...\n" + "\n...".
            before = self._pieces[-1] if self._pieces else tail
            if not (data[:1] == b"\n" and before[-1:] == b"\n"):
                if data:
                    self._pieces.append(data)
                return []
        # The last boundary moves by the length of what goes before ``data`` (a
        # straddling one, cut == -1, ends up at the last byte of that).
        if self._pieces:
            size = len(data)
            data = b"".join((tail, *self._pieces, data))
            self._pieces.clear()
            cut += len(data) - size
        elif tail:
            data = tail + data
            cut += len(tail)
        self._tail = data[cut + 2 :]
        if data[:6] == b"data: ":
            values = data[6:cut].split(b"\n\ndata: ")
            # With no LF left between the separators, every block is one
            # "data: " line and ``values`` are the payloads.
            if 0x0A not in b"".join(values):
                try:
                    return self._messages(values)
                except (UnicodeDecodeError, TypeError):
                    # The general path finds the bad line for the error; it also
                    # decodes a bytearray's payloads, which bytes.decode refuses.
                    pass
        return self._blocks(self._decode(data[:cut]))

    def _normalise(self, data: bytes) -> bytes:
        """Drop a leading BOM and rewrite CRLF and CR line ends to LF.

        The steps that refuse a value that is not bytes (``+``, ``in``,
        ``replace``) come before any state changes, so that :meth:`feed` can
        convert such a value and start again.
        """
        if self._head is not None:
            data = self._strip_bom(data)
        if not data:
            return data
        # An LF opening this fragment ends the line a CR closed the last one with.
        skip_lf = self._after_cr and data[0] == 0x0A
        if 0x0D in data:
            ends_in_cr = data[-1] == 0x0D
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            self._after_cr = ends_in_cr
        else:
            self._after_cr = False
        return data[1:] if skip_lf else data

    def flush(self) -> list[SSEEvent]:
        """End the body: dispatch what is pending as if a blank line followed.

        Sets :attr:`truncated` to ``True`` when the body stopped inside a line or
        after field lines with no blank line to end their event (a trailing
        comment line does not count). The decoder can then be fed another body;
        ``last_event_id`` and ``retry`` carry over, as on a reconnection.
        """
        events: list[SSEEvent] = []
        if self._head:
            # Fewer than three bytes, all a prefix of the BOM: they are content.
            pending, self._head = self._head, None
            events = self.feed(pending)
        raw = b"".join((self._tail, *self._pieces))
        self._tail = b""
        self._pieces.clear()
        self._head = b""
        self._after_cr = False
        text = self._decode(raw)
        # The last LF ends the last line; it is not a blank line of its own.
        cut_line = not text.endswith("\n") and bool(text)
        waiting = self._block(text if cut_line else text[:-1], events)
        self.truncated = cut_line or waiting
        return events

    def _strip_bom(self, data: bytes) -> bytes:
        head = cast("bytes", self._head) + data
        if len(head) < len(_BOM) and _BOM.startswith(head):
            self._head = head
            return b""
        self._head = None
        return head[len(_BOM) :] if head.startswith(_BOM) else head

    def _messages(self, payloads: list[bytes]) -> list[SSEEvent]:
        """One default-type event per payload: the hot path of the decoder."""
        last_id = self.last_event_id
        if len(payloads) < _FEW:
            return [_DecodedEvent(("message", p.decode(), last_id, None)) for p in payloads]
        ids = _NONE if last_id is None else repeat(last_id)
        # zip with a keyword argument (strict=) takes a slow path that costs as
        # much as building ten events; the other three iterators never end.
        rows = zip(_MESSAGE, map(bytes.decode, payloads), ids, _NONE)  # noqa: B905
        return list(map(_DecodedEvent, rows))

    def _blocks(self, text: str) -> list[SSEEvent]:
        """Decode event blocks of any shape.

        ``data: Y`` and ``event: X\\ndata: Y`` (Anthropic's and OpenAI Responses'
        shape) are built inline, as this runs once per event; anything else goes
        through :meth:`_block`.
        """
        out: list[SSEEvent] = []
        append = out.append
        last_id = self.last_event_id
        for block in text.split("\n\n"):
            first, newline, line = block.partition("\n")
            if not newline:
                event_type, line = "message", first
            elif first.startswith("event:") and "\n" not in line:
                event_type = first[7:] if first.startswith("event: ") else first[6:]
                event_type = event_type or "message"
            else:
                line = ""  # any other shape: left to _block below
            if not line.startswith("data:"):
                self._block(block, out)
                last_id = self.last_event_id
                continue
            data = line[6:] if line.startswith("data: ") else line[5:]
            append(_DecodedEvent((event_type, data, last_id, None)))
        return out

    def _block(self, block: str, out: list[SSEEvent]) -> bool:
        """Run the standard's line rules over ``block``'s lines plus one blank line.

        Returns whether field lines were waiting for a blank line at the end of
        ``block`` (what :meth:`flush` reports as truncation).
        """
        data: list[str] = []
        event_type = ""
        retry: int | None = None
        waiting = False
        for line in block.split("\n"):
            if not line:
                if data:
                    out.append(self._dispatch(event_type, data, retry))
                data, event_type, retry, waiting = [], "", None, False
                continue
            if line[0] == ":":
                continue
            waiting = True
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event_type = value
            elif name == "id":
                if "\x00" not in value:
                    self.last_event_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                retry = self.retry = int(value)
        if data:
            out.append(self._dispatch(event_type, data, retry))
        return waiting

    def _dispatch(self, event_type: str, data: list[str], retry: int | None) -> SSEEvent:
        return _DecodedEvent((event_type or "message", "\n".join(data), self.last_event_id, retry))

    @staticmethod
    def _decode(raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            start = raw.rfind(b"\n", 0, exc.start) + 1
            end = raw.find(b"\n", exc.end)
            line = raw[start : end if end >= 0 else len(raw)]
            raise MalformedStreamError(
                f"SSE stream is not valid UTF-8 ({exc.reason} at byte {exc.start - start}"
                " of the line kept in .raw); the provider or the recording is corrupt",
                raw=line,
            ) from None
