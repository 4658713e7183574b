"""Wire coverage inside :meth:`HttpAdapter.stream`: one meter per stream, only inside ``collect_coverage``.

Outside a :func:`~dsh_replay.wire.coverage.collect_coverage` block
:func:`metered` hands back the decoder untouched and no meter, so an ordinary
stream pays one context-variable lookup. Inside one, each event goes
``decode`` → ``kinds_in`` (counted) → ``handle`` — the payload is parsed
once — and the body's bytes are seen on their way to the decoder, for line
numbers. The meter's result joins the block's collector when the stream ends,
however it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

from ..protocol.chunks import StreamChunk
from ..wire.coverage import CoverageCollector, CoverageMeter, active_collector
from ..wire.ndjson import NDJSONDecoder
from ..wire.sse import SSEDecoder
from ..wire.transport import Decoder

__all__ = ["KindTables", "StreamMeter", "kind_tables", "metered"]

EventT = TypeVar("EventT")


class Translator(Protocol):
    """What the meter needs of a :class:`~dsh_replay.adapters.Translator` (named here, not imported:
    the base module imports this one)."""

    route: str
    mapped_kinds: ClassVar[frozenset[str] | None]
    ignored_kinds: ClassVar[Mapping[str, str]]
    whole_fields: ClassVar[frozenset[str]]

    def event(self, event: Any) -> list[StreamChunk]: ...
    def decode(self, event: Any) -> Any: ...
    def handle(self, payload: Any, event: Any) -> list[StreamChunk]: ...
    def kinds_in(self, payload: Any, event: Any) -> tuple[str, ...]: ...

#: (kind -> its 1-tuple; kind known by an inner type -> (the field holding it, inner type -> 1-tuple))
KindTables = tuple[dict[str, tuple[str]], dict[str, tuple[str, dict[object, tuple[str]]]]]


def kind_tables(declared: Iterable[str], inner: dict[str, str]) -> KindTables:
    """Prepared answers for a typed wire's ``kinds_in``, so that it builds no string per event.

    ``declared``: the mapped and ignored kinds; ``inner``: the types known also by
    what they carry, and the field that holds its ``type`` (``{"content_block_start":
    "content_block"}`` makes ``content_block_start:text`` one answer).
    """
    plain: dict[str, tuple[str]] = {}
    nested: dict[str, tuple[str, dict[object, tuple[str]]]] = {kind: (field, {}) for kind, field in inner.items()}
    for kind in declared:
        outer, colon, sort = kind.partition(":")
        if colon and outer in nested:
            nested[outer][1][sort] = (kind,)
        else:
            plain[kind] = (kind,)
    return plain, nested


class _Tap(Decoder[EventT]):
    """A decoder that shows the meter every byte it is fed."""

    def __init__(self, inner: Decoder[EventT], meter: CoverageMeter) -> None:
        self.inner = inner
        self.meter = meter

    def feed(self, data: bytes) -> Iterable[EventT]:
        self.meter.feed_body(data)
        return self.inner.feed(data)

    def flush(self) -> Iterable[EventT]:
        return self.inner.flush()


class StreamMeter:
    """The coverage of one stream in the making; :meth:`close` hands it to the collector.

    For a translator that declares its kinds, counting is plain (``inline``):
    :meth:`HttpAdapter.stream` does it itself, ``counts[kinds] += 1`` or
    :meth:`first_seen`, as a call per event would cost as much as the count.
    Otherwise each event goes through :meth:`step`.
    """

    def __init__(self, translator: Translator, meter: CoverageMeter, collector: CoverageCollector) -> None:
        self.translator = translator
        self.meter = meter
        self.collector = collector
        self.counts = meter.counts
        self.first_seen = meter.first_seen
        self.inline = meter.mapped is not None and not meter.deep
        self._closed = False

    def step(self, event: Any) -> list[StreamChunk]:
        """Count and translate one event (undeclared translators, and field tracking)."""
        translator, meter = self.translator, self.meter
        if meter.mapped is None:  # a translator that overrides event() alone: counted by event names, not judged
            meter.observe(translator.kinds_in(event, event), event)
            return translator.event(event)
        payload = translator.decode(event)
        meter.observe(translator.kinds_in(payload, event), event)
        try:
            return translator.handle(meter.track(payload), event)
        finally:
            meter.settle()

    def after_terminal(self, event: Any) -> None:
        self.meter.after_terminal(event)

    def close(self, last: tuple[str, ...] = (), run: int = 0) -> None:
        """Hand the stream's coverage to the collector, with the ``run`` events of ``last`` not counted yet."""
        if not self._closed:
            self._closed = True
            if run:
                self.counts[last] += run
            self.counts.pop((), None)  # the empty tuple stands for "no event yet" in the counting loop
            self.collector.ended(self.meter)


def metered(translator: Translator, decoder: Decoder[EventT]) -> tuple[Decoder[EventT], StreamMeter | None]:
    """(decoder, meter) for one stream: outside coverage, the decoder as it is and no meter."""
    collector = active_collector()
    if collector is None:
        return decoder, None
    kind = type(translator)
    framing = "ndjson" if isinstance(decoder, NDJSONDecoder) else "sse" if isinstance(decoder, SSEDecoder) else None
    meter = CoverageMeter(translator.route, mapped=kind.mapped_kinds, ignored=kind.ignored_kinds,
                          whole=kind.whole_fields, deep=collector.deep, detail=collector.detail, framing=framing)
    return _Tap(decoder, meter), StreamMeter(translator, meter, collector)
