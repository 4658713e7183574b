"""Wire coverage: what a provider sent, and what its translator did with each kind of event.

Theory of operation
-------------------
An adapter that meets an event it does not know returns no chunks, and a
stream can then look perfectly valid while the provider's tool call went
nowhere. Coverage makes that visible by comparing, per stream, what came in
with what the translator says it handles.

- **Kinds.** A translator names the kind of every event it is given
  (``Translator.kinds_in``): the ``type`` discriminator or SSE ``event:`` name
  for typed wires (``response.output_text.delta``; a nested discriminator is
  added after a colon, ``content_block_start:server_tool_use``), the parts an
  event carries for shape-based wires (``delta.tool_calls``, ``part.inlineData``).
  An event of a shape-based wire can carry several kinds and counts under each.
- **Status.** The translator declares, as data, the kinds it maps and the
  kinds it ignores on purpose with a one-line reason. Every other kind is
  *unmapped*: the provider sent something nobody decided about. A translator
  that declares nothing (``mapped_kinds is None``) is not judged: its streams
  are *undeclared*.
- **Two pseudo-kinds** come from the wire rather than the translator:
  :data:`COMMENT_KIND` (SSE comment lines, which the decoder drops as the
  standard says) and :data:`AFTER_TERMINAL_KIND` (events read after the
  terminal event, which no translator sees). Both are ignored on purpose.
- **Lines.** The meter counts events as they are translated and keeps the
  body's bytes (up to :data:`MAX_LINED_BODY`) so that, when the stream ends,
  the first event of each unmapped kind — of every kind, and the SSE
  comments, with ``detail`` — gets its 1-based body line. Past that size the
  event's position is still known (``first_event``), its line is not. Lines
  are found with byte searches after the stream, not per event: counting is
  what runs per event, and it is a lookup in a dict.
- **Fields** (``deep``). Each payload is wrapped so that every key the
  translator reads is recorded (:mod:`.coverage_fields`); the paths an event
  carries that were never read are listed per mapped kind. Reading is
  recorded, not declared, so the list cannot drift from the code; subtrees a
  translator passes on whole (``whole_fields``: tool arguments) count as read.

Nothing here does I/O: the adapter feeds the meter, callers collect the
:class:`WireCoverage` values with :func:`collect_coverage`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .coverage_fields import (
    Reads,
    field_paths,
    ndjson_event_lines,
    sse_comment_lines,
    sse_event_lines,
    tracked,
    unread_roots,
)

__all__ = [
    "AFTER_TERMINAL_KIND",
    "COMMENT_KIND",
    "IGNORED",
    "MAPPED",
    "MAX_LINED_BODY",
    "TIMES",
    "UNMAPPED",
    "CoverageCollector",
    "CoverageMeter",
    "KindCount",
    "WireCoverage",
    "active_collector",
    "collect_coverage",
    "unmapped_of",
]

MAPPED, IGNORED, UNMAPPED = "mapped", "ignored", "unmapped"
_STATUSES = (MAPPED, IGNORED, UNMAPPED)
COMMENT_KIND = "(sse comment)"
AFTER_TERMINAL_KIND = "(after the terminal event)"
_PSEUDO = {
    COMMENT_KIND: "an SSE comment line (keep-alive, proxy note); the SSE standard has clients skip it",
    AFTER_TERMINAL_KIND: "read after the provider's terminal event, when the stream is already complete",
}
#: the sign between a kind and its count (``apply_patch`` times 47)
TIMES = "\N{MULTIPLICATION SIGN}"
#: bodies up to this size are kept while streaming, for the body line of each kind's first event
MAX_LINED_BODY = 16 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class KindCount:
    """One kind of event in one stream: how often, where first, and what the translator does with it."""

    kind: str
    count: int
    status: str
    #: 1-based line of the body where the first event of this kind starts (None: not known)
    first_line: int | None = None
    #: 0-based position of that event among the events translated (None for SSE comments)
    first_event: int | None = None
    #: why it is ignored (ignored kinds only)
    reason: str = ""
    #: every JSON field path its events carried (deep coverage only), sorted
    fields: tuple[str, ...] = ()
    #: the shallowest of those paths the translator never read (deep coverage, mapped kinds), sorted
    unread: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in _STATUSES:
            raise ValueError(f"KindCount.status must be one of {', '.join(_STATUSES)}, got {self.status!r}")
        if not self.kind or self.count < 1:
            raise ValueError(f"KindCount needs a kind and a count >= 1, got {self.kind!r} x{self.count}")
        if self.first_line is not None and self.first_line < 1:
            raise ValueError(f"KindCount.first_line is 1-based, got {self.first_line}")

    def describe(self) -> str:
        """``response.custom_tool_call_input.delta`` ×47 ``(first at body line 12)``."""  # noqa: RUF002
        if self.first_line is not None:
            where = f" (first at body line {self.first_line})"
        elif self.first_event is not None:
            where = f" (first at event {self.first_event + 1})"
        else:
            where = ""
        return f"{self.kind} {TIMES}{self.count}{where}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "status": self.status, "first_line": self.first_line,
                "first_event": self.first_event, "reason": self.reason, "fields": list(self.fields),
                "unread": list(self.unread)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KindCount:
        return cls(kind=data["kind"], count=data["count"], status=data["status"], first_line=data.get("first_line"),
                   first_event=data.get("first_event"), reason=data.get("reason", ""),
                   fields=tuple(data.get("fields", ())), unread=tuple(data.get("unread", ())))


@dataclass(frozen=True, slots=True, kw_only=True)
class WireCoverage:
    """The coverage of one stream: every kind the provider sent, in order of first appearance."""

    route: str
    kinds: tuple[KindCount, ...] = ()
    #: the translator declares its kinds; False: nothing is judged (``status`` is "undeclared")
    declared: bool = True
    #: field paths were recorded (``trace --coverage``, drift)
    deep: bool = False
    #: events translated (an event of a shape-based wire counts once, under each of its kinds)
    events: int = 0

    def __post_init__(self) -> None:
        names = [k.kind for k in self.kinds]
        if len(set(names)) != len(names):
            raise ValueError(f"WireCoverage lists a kind twice: {names}")

    @property
    def unmapped(self) -> tuple[KindCount, ...]:
        return tuple(k for k in self.kinds if k.status == UNMAPPED) if self.declared else ()

    @property
    def status(self) -> str:
        """``complete`` (nothing unmapped), ``unmapped`` or ``undeclared``."""
        if not self.declared:
            return "undeclared"
        return UNMAPPED if self.unmapped else "complete"

    def get(self, kind: str) -> KindCount | None:
        return next((k for k in self.kinds if k.kind == kind), None)

    def unmapped_lines(self) -> list[str]:
        """One ``unmapped: KIND ×N (first at body line L)`` line per unmapped kind."""  # noqa: RUF002
        return [f"unmapped: {k.describe()}" for k in self.unmapped]

    def to_json(self) -> dict[str, Any]:
        return {"route": self.route, "declared": self.declared, "deep": self.deep, "events": self.events,
                "kinds": [k.to_json() for k in self.kinds]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WireCoverage:
        return cls(route=data["route"], declared=data.get("declared", True), deep=data.get("deep", False),
                   events=data.get("events", 0), kinds=tuple(KindCount.from_json(k) for k in data.get("kinds", ())))


def unmapped_of(streams: Iterable[WireCoverage]) -> list[KindCount]:
    """The unmapped kinds of several streams (a cassette's calls), counts added up, first line of the first."""
    merged: dict[str, KindCount] = {}
    for stream in streams:
        for kind in stream.unmapped:
            seen = merged.get(kind.kind)
            merged[kind.kind] = kind if seen is None else KindCount(
                kind=kind.kind, count=seen.count + kind.count, status=UNMAPPED,
                first_line=seen.first_line, first_event=seen.first_event)
    return list(merged.values())


class CoverageMeter:
    """Counts one stream's events by kind as they are translated; :meth:`result` is its :class:`WireCoverage`.

    ``mapped``/``ignored`` are the translator's declarations (``mapped=None``:
    undeclared); ``framing`` (``"sse"``, ``"ndjson"`` or None) tells how to
    find body lines in what :meth:`feed_body` kept. Per event, :meth:`observe`
    with its tuple of kinds (the hot path inlines it: ``counts[kinds] += 1``, or
    :meth:`first_seen` for a tuple not in ``counts``); in ``deep`` mode wrap the payload with :meth:`track` before translating it and
    call :meth:`settle` after.
    """

    def __init__(self, route: str, *, mapped: frozenset[str] | None, ignored: Mapping[str, str],
                 whole: frozenset[str] = frozenset(), deep: bool = False, detail: bool = False,
                 framing: str | None = None) -> None:
        self.route = route
        self.mapped = mapped
        self.ignored = ignored
        self.whole = whole
        self.deep = deep
        #: body lines for every kind and SSE comments counted (else lines for unmapped kinds only)
        self.detail = detail or deep
        self.framing = framing
        #: events counted by their tuple of kinds (one lookup per event; :meth:`result` adds them up by kind)
        self.counts: dict[tuple[str, ...], int] = {}
        self._first: dict[tuple[str, ...], int] = {}  # ordinal of the first event of each tuple
        self._located: list[tuple[int, str, tuple[str, ...]]] = []  # (ordinal, SSE data, kinds) of first events
        self._seen: set[str] = set()
        self._body: list[bytes] | None = [] if framing is not None else None
        self._body_size = 0
        self._last: tuple[str, ...] = ()
        self._reads: Reads | None = None
        self._raw: Any = None
        self._fields: dict[str, set[str]] = {}
        self._read: dict[str, set[str]] = {}

    @property
    def events(self) -> int:
        return sum(self.counts.values())

    def feed_body(self, data: bytes) -> None:
        """A piece of the raw body, as the decoder is fed it (kept only up to :data:`MAX_LINED_BODY`)."""
        body = self._body
        if body is not None:
            self._body_size += len(data)
            if self._body_size > MAX_LINED_BODY:
                self._body = None  # too big to keep twice: positions stay, lines go
            else:
                body.append(bytes(data))  # no copy for bytes, the usual case

    def first_seen(self, kinds: tuple[str, ...], event: object) -> None:
        """The first event with this tuple of kinds: count it, and remember where to find a kind new to the stream."""
        ordinal = self.events
        self.counts[kinds] = 1
        self._first[kinds] = ordinal
        data = getattr(event, "data", None)
        if not self._seen.issuperset(kinds):
            self._located.append((ordinal, data if isinstance(data, str) else "", kinds))
        self._seen.update(kinds)

    def observe(self, kinds: tuple[str, ...], event: object = None) -> None:
        """One event, of these kinds, is about to be translated (what the hot path inlines)."""
        if kinds in self.counts:
            self.counts[kinds] += 1
        else:
            self.first_seen(kinds, event)
        self._last = kinds

    def after_terminal(self, event: object = None) -> None:
        """``event`` was read after the terminal event (drained, never translated)."""
        self.observe((AFTER_TERMINAL_KIND,), event)

    def track(self, payload: Any) -> Any:
        """``payload`` (of the kinds last observed) wrapped so that the translator's reads are recorded
        (deep mode; else as is)."""
        if not self.deep:
            return payload
        self._reads, self._raw = Reads(), payload
        return tracked(payload, "", self._reads)

    def settle(self) -> None:
        """After the translator handled the tracked payload: add its field paths and reads to its kinds."""
        reads, raw = self._reads, self._raw
        if reads is None:
            return
        self._reads = self._raw = None
        paths = field_paths(raw, self.whole)
        read = reads.paths | {path for path in paths if _under(path, self.whole)}
        for kind in self._last:
            self._fields.setdefault(kind, set()).update(paths)
            self._read.setdefault(kind, set()).update(read)

    def status(self, kind: str) -> tuple[str, str]:
        """(status, reason) of ``kind`` under the translator's declarations."""
        if kind in _PSEUDO:
            return IGNORED, _PSEUDO[kind]
        if self.mapped is not None and kind in self.mapped:
            return MAPPED, ""
        reason = self.ignored.get(kind)
        return (IGNORED, reason) if reason is not None else (UNMAPPED, "")

    def result(self) -> WireCoverage:
        lines, comments = self._lines()
        kinds: list[KindCount] = []
        if comments:
            kinds.append(KindCount(kind=COMMENT_KIND, count=len(comments), status=IGNORED,
                                   first_line=comments[0], reason=_PSEUDO[COMMENT_KIND]))
        for kind, (count, first) in self._by_kind().items():
            status, reason = self.status(kind)
            fields = self._fields.get(kind, set())
            unread = unread_roots(fields, self._read.get(kind, set())) if status == MAPPED else ()
            kinds.append(KindCount(kind=kind, count=count, status=status, first_line=lines.get(first),
                                   first_event=first, reason=reason, fields=tuple(sorted(fields)),
                                   unread=tuple(unread)))
        drained = self.counts.get((AFTER_TERMINAL_KIND,), 0)
        return WireCoverage(route=self.route, kinds=tuple(kinds), declared=self.mapped is not None, deep=self.deep,
                            events=self.events - drained)

    def _by_kind(self) -> dict[str, tuple[int, int]]:
        """kind -> (events carrying it, ordinal of the first), in order of first appearance."""
        out: dict[str, tuple[int, int]] = {}
        for kinds, first in sorted(self._first.items(), key=lambda item: item[1]):
            count = self.counts[kinds]
            for kind in kinds:
                seen = out.get(kind)
                out[kind] = (count, first) if seen is None else (seen[0] + count, seen[1])
        return out

    def _lines(self) -> tuple[dict[int, int], list[int]]:
        """(body line of the first events that need one, by ordinal; lines of SSE comments), from the kept body."""
        pieces, self._body = self._body, None
        wanted = [(ordinal, data) for ordinal, data, kinds in self._located
                  if self.detail or any(self.status(kind)[0] == UNMAPPED for kind in kinds)]
        if pieces is None or not (wanted or self.detail):
            return {}, []
        body = b"".join(pieces)
        if self.framing == "ndjson":
            starts = ndjson_event_lines(body, max((ordinal for ordinal, _ in wanted), default=-1))
            return dict(enumerate(starts)), []
        return sse_event_lines(body, wanted), sse_comment_lines(body) if self.detail else []


def _under(path: str, whole: frozenset[str]) -> bool:
    return any(path == root or path.startswith((root + ".", root + "[")) for root in whole)


@dataclass
class CoverageCollector:
    """Where the adapters of a :func:`collect_coverage` block leave the coverage of each stream, in order.

    A stream's meter is kept as it ended and turned into its :class:`WireCoverage`
    when :attr:`streams` is first read: a replayed test asks only whether some
    kind went unmapped (:meth:`clean_count`), which the counts answer.
    """

    deep: bool = False
    detail: bool = False
    _streams: list[WireCoverage] = field(default_factory=list)
    _ended: list[CoverageMeter] = field(default_factory=list)

    @property
    def streams(self) -> list[WireCoverage]:
        """Each stream's coverage, in the order the streams ended."""
        if self._ended:
            self._streams += (meter.result() for meter in self._ended)
            self._ended.clear()
        return self._streams

    def ended(self, meter: CoverageMeter) -> None:
        """A stream's meter, once the stream is over (its counts and body are final)."""
        self._ended.append(meter)

    def clean_count(self) -> int | None:
        """How many streams ended, when each was translated by a translator that declares its kinds and none
        had an unmapped kind; None otherwise (then read :attr:`streams` for which, and where)."""
        if self._streams:
            return None  # already built: the caller reads them
        for meter in self._ended:
            if meter.mapped is None or any(meter.status(kind)[0] == UNMAPPED for kinds in meter.counts
                                           for kind in kinds):
                return None
        return len(self._ended)

    @property
    def unmapped(self) -> list[KindCount]:
        return unmapped_of(self.streams)


_ACTIVE: contextvars.ContextVar[CoverageCollector | None] = contextvars.ContextVar("dsh_replay_coverage",
                                                                                    default=None)


@contextlib.contextmanager
def collect_coverage(*, fields: bool = False, detail: bool = False) -> Iterator[CoverageCollector]:
    """Collect the :class:`WireCoverage` of every stream a shipped-style adapter translates in this block.

    ``with collect_coverage() as seen: asyncio.run(...)`` then ``seen.streams``;
    Every kind's first body line and the SSE comments take ``detail=True``
    (without it, only unmapped kinds get a line: the lines are found after
    the stream, and most streams need none). ``fields=True`` (which implies
    ``detail``) also records the JSON field paths each kind carried and which
    of them the translator read (slower: for ``trace --coverage`` and drift).
    Tasks started inside the block (``asyncio.run`` included) inherit it.
    """
    collector = CoverageCollector(deep=fields, detail=detail or fields)
    token = _ACTIVE.set(collector)
    try:
        yield collector
    finally:
        _ACTIVE.reset(token)


def active_collector() -> CoverageCollector | None:
    """The collector of the innermost :func:`collect_coverage` block around this code, if any."""
    return _ACTIVE.get()
