"""What every shipped adapter shares: HTTP streaming, decoding, sequencing, errors.

A provider module supplies two things and nothing else:

- **request mapping** — ``build_request(options) -> StreamRequest`` (URL,
  headers with the credential, JSON body);
- **event mapping** — a :class:`Translator` subclass whose ``event`` method
  turns one decoded provider event into calls on the :class:`BlockSequencer`
  (``text``, ``reasoning``, ``tool_call``, ``end``, ``finish``) and returns the
  chunks they released, and which sets ``finished`` when it saw the provider's
  terminal event. The shipped ones split ``event`` into ``decode`` + ``handle``
  and declare, as data, the kinds of event they map and those they ignore on
  purpose (wire coverage: ``dsh_replay/wire/coverage.py``).

The adapter class names them (``build_request``, ``translator_class``) and its
body framing (``decoder_class``: SSE or NDJSON). :class:`HttpAdapter.stream`
wires them together: it sends the request through
the shared transport (retries, typed HTTP errors, timeouts), feeds every event
to the translator as it arrives and yields each chunk at once. If the body ends
before the terminal event, it raises :class:`StreamInterruptedError` — it never
forges a ``finish``.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import httpx
import orjson

from ..errors import ConfigError, MalformedStreamError, ProviderError, StreamInterruptedError
from ..protocol.adapter import LlmAdapter
from ..protocol.chunks import StreamChunk, Usage
from ..protocol.fields import shown
from ..protocol.options import GenerateOptions
from ..wire.ndjson import NDJSONDecoder
from ..wire.provider_errors import error_from_payload
from ..wire.sequencer import BlockSequencer
from ..wire.sse import SSEDecoder, SSEEvent
from ..wire.transport import DEFAULT_RETRY, Decoder, RetryPolicy, StreamRequest, stream_events
from ._checks import check_api_key, check_base_url, check_options, checked_headers
from ._coverage import StreamMeter, metered
from ._query import checked_query, refuse_clash, with_default_query

__all__ = [
    "CutAwareNDJSONDecoder", "CutAwareSSEDecoder", "HttpAdapter", "Translator", "count", "history_arguments",
    "merge_extra", "nonempty_str", "parse_json",
]

EventT = TypeVar("EventT")


def parse_json(data: str | bytes, *, route: str, what: str = "event") -> Any:
    """Parse one event payload; a payload that is not JSON is a MalformedStreamError.

    ``payload = parse_json(event.data, route=self.route)`` in a translator; the
    error names ``what`` and shows the first bytes of the payload.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
        raise MalformedStreamError(f"{what} is not valid JSON: {raw[:80]!r}", raw=raw, route=route) from None


def count(value: object) -> int | None:
    """A token count as the protocol wants it (int >= 0), or None when absent/odd.

    ``Usage(input_tokens=count(usage.get("input_tokens")) or 0, ...)``: ``count(12)``
    is 12; ``count(None)``, ``count(-1)``, ``count(True)`` and ``count("12")`` are None.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def nonempty_str(value: object) -> str | None:
    """``value`` if it is a non-empty str, else None: providers send null, ``""`` or odd types alike."""
    return value if isinstance(value, str) and value else None


def merge_extra(body: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``options.extra`` over the request body: objects merge one level deep, ``None`` removes a key.

    One level deep so that ``{"generationConfig": {"topK": 3}}`` adds to the
    adapter's own ``generationConfig`` instead of replacing it; ``None`` so that
    a field a server rejects (``stream_options`` on some) can be dropped.

    Example: ``merge_extra({"model": "m", "opts": {"a": 1}}, {"opts": {"b": 2}, "model": None})``
    is ``{"opts": {"a": 1, "b": 2}}``. End a ``request_body`` with
    ``return merge_extra(body, options.extra)``.
    """
    for key, value in extra.items():
        current = body.get(key)
        if value is None:
            body.pop(key, None)
        elif isinstance(current, dict) and isinstance(value, Mapping):
            body[key] = {**current, **value}
        else:
            body[key] = value
    return body


def history_arguments(arguments: str, name: str, *, provider: str) -> dict[str, Any]:
    """A history tool call's JSON arguments as the object providers want back (``{}`` if empty).

    ``{"input": history_arguments(c.arguments, c.name, provider="Anthropic tool_use input")}``;
    arguments that are not a JSON object raise :class:`ConfigError` naming the call.
    """
    try:
        value = orjson.loads(arguments) if arguments.strip() else {}
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ConfigError(
            f"tool call {name!r} in the history has arguments that are not a JSON object: "
            f"{arguments[:80]!r}; {provider} needs an object there"
        )
    return value


def _whole(data: str) -> bool:
    if data.strip() == "[DONE]":
        return True
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


class CutAwareSSEDecoder(SSEDecoder):
    """An :class:`SSEDecoder` that tells a body cut inside an event from a bad event.

    At the end of the body the decoder dispatches a last event even without its
    blank line (some real bodies end so, e.g. Anthropic SDK fixtures). If that
    event's JSON is cut short, the connection was lost in the middle of it: an
    interrupted stream, not a malformed one.

    Name it as the adapter's body framing: ``decoder_class = CutAwareSSEDecoder``.
    ``feed(b'data: {"te')`` then ``flush()`` raises :class:`StreamInterruptedError`.
    """

    __slots__ = ()

    def flush(self) -> list[SSEEvent]:
        events = super().flush()
        if self.truncated and events and not _whole(events[-1].data):
            raise StreamInterruptedError(
                f"the body ended inside an event ({events[-1].data[:60]!r}…); the response is incomplete"
            )
        return events


class CutAwareNDJSONDecoder(NDJSONDecoder):
    """An :class:`NDJSONDecoder` that calls a last line cut short (no LF, bad JSON) an interrupted stream.

    Name it as the adapter's body framing: ``decoder_class = CutAwareNDJSONDecoder``;
    each event handed to the translator is then one parsed JSON value.
    """

    __slots__ = ()

    def flush(self) -> list[object]:
        try:
            return super().flush()
        except MalformedStreamError:
            raise StreamInterruptedError("the body ended inside an NDJSON line; the response is incomplete") from None


class Translator(abc.ABC, Generic[EventT]):
    """Per-stream state of one provider's event mapping.

    One instance per stream, with ``self.seq`` (its :class:`BlockSequencer`) and
    ``self.route``. Override :meth:`event` (or :meth:`decode` + :meth:`handle`); call :meth:`finish` on the terminal
    event only (a body that ends without it raises :class:`StreamInterruptedError`);
    ``raise self.error(payload)`` for an error event. Example::

        class CohereTranslator(Translator[SSEEvent]):
            terminal_event = "message-end"  # named when the body ends early
            mapped_kinds = frozenset({"content-delta", "message-end"})  # optional: wire coverage
            ignored_kinds = {"message-start": "carries only the generation id"}

            def decode(self, event: SSEEvent) -> Any:
                return parse_json(event.data, route=self.route)

            def kinds_in(self, payload: Any, event: SSEEvent) -> tuple[str, ...]:
                return (payload["type"],)

            def handle(self, payload: Any, event: SSEEvent) -> list[StreamChunk]:
                if payload["type"] == "content-delta":
                    return self.seq.text(payload["delta"]["message"]["content"]["text"])
                if payload["type"] == "message-end":
                    return self.finish(Usage(input_tokens=0, output_tokens=0), "COMPLETE")
                return []
    """

    #: what the provider sends last; named in the error when the body ends early
    terminal_event: ClassVar[str] = "its terminal event"

    # -- wire coverage (dsh_replay/wire/coverage.py) --------------------------------
    #: the kinds of event this translator maps (see :meth:`kinds_in`); None: it declares
    #: nothing, and its streams are counted but not judged
    mapped_kinds: ClassVar[frozenset[str] | None] = None
    #: kinds it ignores on purpose, each with a one-line reason; any other kind is "unmapped"
    ignored_kinds: ClassVar[Mapping[str, str]] = {}
    #: field paths it passes on whole (tool arguments): everything below them counts as read
    whole_fields: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        self.route = route
        self.seq = sequencer

    def event(self, event: EventT) -> list[StreamChunk]:
        """Translate one decoded event into the chunks it releases: ``handle(decode(event), event)``.

        Override this alone, or :meth:`decode` and :meth:`handle` (the shipped
        translators do: wire coverage then names the kind of each payload,
        :meth:`kinds_in`, between the two, without parsing it twice).
        """
        return self.handle(self.decode(event), event)

    def decode(self, event: EventT) -> Any:
        """The payload of ``event`` (parsed JSON for SSE translators); the event itself by default."""
        return event

    def handle(self, payload: Any, event: EventT) -> list[StreamChunk]:
        """Translate one decoded payload (see :meth:`event`)."""
        raise NotImplementedError(f"{type(self).__name__} must override event(), or decode() and handle()")

    def kinds_in(self, payload: Any, event: EventT) -> tuple[str, ...]:
        """The kinds of event ``payload`` is, as ``mapped_kinds`` and ``ignored_kinds`` name them.

        One for typed wires (the ``type``, or the SSE event name); an event of a
        shape-based wire may carry several (a text part and a finish reason).
        """
        name = getattr(event, "event", None)
        return (name,) if isinstance(name, str) else ("event",)

    def kind_of(self, event: EventT) -> str:
        """The (first) kind of ``event``: ``translator.kind_of(SSEEvent(data='{"type": "ping"}'))`` is ``"ping"``."""
        return self.kinds_in(self.decode(event), event)[0]

    def end(self) -> list[StreamChunk]:
        """The body ended; return final chunks or raise when it ended too early."""
        if not self.finished:
            raise StreamInterruptedError(
                f"the stream ended before {self.terminal_event}; the response is incomplete",
                route=self.route,
            )
        return []

    @property
    def finished(self) -> bool:
        """Whether the stream is complete. Read from the sequencer, so a finish emitted through
        ``self.seq.finish(...)`` counts as much as one through :meth:`finish`."""
        return self.seq.finished

    def finish(self, usage: Usage, raw_reason: str | None) -> list[StreamChunk]:
        """Close every block, then usage and finish (once): ``return self.finish(usage, "COMPLETE")``."""
        return self.seq.finish(usage=usage, raw_reason=raw_reason)

    def error(self, payload: object) -> ProviderError:
        """The typed error for an error payload in the stream (:func:`error_from_payload`): ``raise self.error(p)``."""
        return error_from_payload(payload, route=self.route)


class HttpAdapter(LlmAdapter, Generic[EventT]):
    """An adapter over one streaming HTTP endpoint (see the module docstring).

    A subclass names ``route``, ``default_base_url``, ``decoder_class`` and
    ``translator_class`` and implements :meth:`build_request`; the checked
    constructor and :meth:`stream` come from here. Example::

        class CohereAdapter(HttpAdapter[SSEEvent]):
            route = "cohere"
            default_base_url = "https://api.cohere.com"
            decoder_class = CutAwareSSEDecoder
            translator_class = CohereTranslator

            def build_request(self, options: GenerateOptions) -> StreamRequest:
                headers = self.request_headers({"Authorization": f"bearer {self.api_key}"})  # + user's headers=
                return StreamRequest(route=self.route, url=f"{self.base_url}/v2/chat",
                                     headers=headers, json=request_body(options))

    ``default_query=`` (Azure OpenAI's ``api-version``) goes into the URL ``build_request`` makes:
    :meth:`request_for` is the request sent.
    """

    route: ClassVar[str]
    default_base_url: ClassVar[str | None]
    requires_api_key: ClassVar[bool] = True
    #: the body decoder (SSE or NDJSON) and the event mapping, built fresh for each stream
    decoder_class: ClassVar[type[Decoder[Any]]]
    translator_class: ClassVar[type[Translator[Any]]]

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        drop_reasoning: bool = False,
        retry: RetryPolicy = DEFAULT_RETRY,
        read_timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        default_query: Mapping[str, str] | None = None,
    ) -> None:
        owner = type(self).__name__
        check_api_key(owner, api_key, required=self.requires_api_key)
        base = base_url or self.default_base_url
        if not base:
            raise ConfigError(f"{owner} (route {self.route!r}) needs a base_url")
        check_base_url(owner, base)
        check_options(owner, client, drop_reasoning, retry, read_timeout)
        self.api_key = api_key
        self.base_url = base.rstrip("/")
        self.client = client
        self.drop_reasoning = drop_reasoning
        self.retry = retry
        self.read_timeout = read_timeout
        self.extra_headers = checked_headers(owner, headers)
        self.default_query = checked_query(owner, default_query)
        if self.default_query:
            refuse_clash(owner, self.build_request, self.default_query)

    def __repr__(self) -> str:
        # never the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    @abc.abstractmethod
    def build_request(self, options: GenerateOptions) -> StreamRequest:
        """Request mapping: the provider HTTP request for ``options``."""

    def request_for(self, options: GenerateOptions) -> StreamRequest:
        """What :meth:`stream` sends for ``options``: :meth:`build_request`'s request, ``default_query`` in its URL."""
        return with_default_query(type(self).__name__, self.build_request(options), self.default_query)

    def decoder(self) -> Decoder[EventT]:
        """A fresh body decoder for one stream: ``decoder_class()`` unless overridden."""
        return self.decoder_class()

    def translator(self, sequencer: BlockSequencer) -> Translator[EventT]:
        """Fresh event-mapping state for one stream: ``translator_class(route, sequencer)`` unless overridden."""
        return self.translator_class(self.route, sequencer)

    def request_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """A request's headers: ``headers`` and then those the constructor was given (``headers=``)."""
        return {**headers, **self.extra_headers}

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        if not isinstance(options, GenerateOptions):
            raise ConfigError(
                f"{type(self).__name__}.stream: options must be GenerateOptions, got {shown(options)}; "
                "GenerateOptions.from_json builds them from JSON"
            )
        request = self.request_for(options)
        translator = self.translator(BlockSequencer(drop_reasoning=self.drop_reasoning))
        # with no collect_coverage block around, the meter is None and the events go straight through
        decoder, meter = metered(translator, self.decoder())
        events = stream_events(self.client, request, decoder, retry=self.retry, read_timeout=self.read_timeout)
        # Counting an event by its kinds is inlined here, not a call, as it runs once per event; a
        # run of events of the same (prepared) kinds tuple is counted in a local until it ends.
        counts = meter.counts if meter is not None and meter.inline else None
        decode, kinds_in, handle = translator.decode, translator.kinds_in, translator.handle
        last: tuple[str, ...] = ()
        run = 0
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    if counts is None:
                        chunks = translator.event(event) if meter is None else meter.step(event)
                    else:
                        payload = decode(event)
                        kinds = kinds_in(payload, event)
                        if kinds is last:
                            run += 1
                        else:
                            counts[last], run, last = counts.get(last, 0) + run, 0, kinds
                            try:
                                counts[kinds] += 1
                            except KeyError:  # a tuple of kinds new to the stream
                                assert meter is not None
                                meter.first_seen(kinds, event)
                        chunks = handle(payload, event)
                    for chunk in chunks:
                        yield chunk
                    if translator.finished:
                        await _drain(events, meter)
                        return
                for chunk in translator.end():
                    yield chunk
        except ProviderError as exc:
            if exc.route is None:
                exc.route = self.route
            raise
        finally:
            if meter is not None:
                meter.close(last, run)


async def _drain(events: AsyncIterator[Any], meter: StreamMeter | None = None) -> None:
    """Read what follows the terminal event (normally nothing but the end of the body).

    Events after the terminal one are ignored, but reading the body to its end
    lets the connection close cleanly — and a recorded cassette then knows the
    response was complete. A failure this late changes nothing: every chunk is out.
    """
    try:
        async for event in events:
            if meter is not None:
                meter.after_terminal(event)
    except ProviderError:
        pass
