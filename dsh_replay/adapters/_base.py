"""What every shipped adapter shares: HTTP streaming, decoding, sequencing, errors.

A provider module supplies two things and nothing else:

- **request mapping** — ``build_request(options) -> StreamRequest`` (URL,
  headers with the credential, JSON body);
- **event mapping** — a :class:`Translator` subclass whose ``event`` method
  turns one decoded provider event into calls on the :class:`BlockSequencer`
  (``text``, ``reasoning``, ``tool_call``, ``end``, ``finish``) and returns the
  chunks they released, and which sets ``finished`` when it saw the provider's
  terminal event.

:class:`HttpAdapter.stream` wires them together: it sends the request through
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

from .._adapter import LlmAdapter
from .._chunks import StreamChunk, Usage
from .._exceptions import ConfigError, MalformedStreamError, StreamInterruptedError
from .._options import GenerateOptions
from .._sequencer import BlockSequencer
from .._transport import DEFAULT_RETRY, Decoder, RetryPolicy, StreamRequest, error_from_payload, stream_events

__all__ = ["HttpAdapter", "Translator", "count", "parse_json"]

EventT = TypeVar("EventT")


def parse_json(data: str | bytes, *, route: str, what: str = "event") -> Any:
    """Parse one event payload; a payload that is not JSON is a MalformedStreamError."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
        raise MalformedStreamError(f"{what} is not valid JSON: {raw[:80]!r}", raw=raw, route=route) from None


def count(value: object) -> int | None:
    """A token count as the protocol wants it (int >= 0), or None when absent/odd."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


class Translator(abc.ABC, Generic[EventT]):
    """Per-stream state of one provider's event mapping."""

    #: what the provider sends last; named in the error when the body ends early
    terminal_event: ClassVar[str] = "its terminal event"

    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        self.route = route
        self.seq = sequencer
        self.finished = False

    @abc.abstractmethod
    def event(self, event: EventT) -> list[StreamChunk]:
        """Translate one decoded event into the chunks it releases."""

    def end(self) -> list[StreamChunk]:
        """The body ended; return final chunks or raise when it ended too early."""
        if not self.finished:
            raise StreamInterruptedError(
                f"the stream ended before {self.terminal_event}; the response is incomplete",
                route=self.route,
            )
        return []

    def finish(self, usage: Usage, raw_reason: str | None) -> list[StreamChunk]:
        """Close every block, then usage and finish (once)."""
        self.finished = True
        return self.seq.finish(usage=usage, raw_reason=raw_reason)

    def error(self, payload: object) -> Exception:
        """The typed error for an error payload inside the stream."""
        return error_from_payload(payload, route=self.route)


class HttpAdapter(LlmAdapter, Generic[EventT]):
    """An adapter over one streaming HTTP endpoint (see the module docstring)."""

    route: ClassVar[str]
    default_base_url: ClassVar[str | None]
    requires_api_key: ClassVar[bool] = True

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
    ) -> None:
        if self.requires_api_key and not api_key:
            raise ConfigError(f"{type(self).__name__} needs an api_key")
        base = base_url or self.default_base_url
        if not base:
            raise ConfigError(f"{type(self).__name__} (route {self.route!r}) needs a base_url")
        self.api_key = api_key
        self.base_url = base.rstrip("/")
        self.client = client
        self.drop_reasoning = drop_reasoning
        self.retry = retry
        self.read_timeout = read_timeout
        self.extra_headers = dict(headers or {})

    def __repr__(self) -> str:
        # never the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    @abc.abstractmethod
    def build_request(self, options: GenerateOptions) -> StreamRequest:
        """Request mapping: the provider HTTP request for ``options``."""

    @abc.abstractmethod
    def decoder(self) -> Decoder[EventT]:
        """A fresh body decoder (SSE or NDJSON)."""

    @abc.abstractmethod
    def translator(self, sequencer: BlockSequencer) -> Translator[EventT]:
        """Fresh per-stream event mapping state."""

    def _headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        return {**headers, **self.extra_headers}

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        request = self.build_request(options)
        translator = self.translator(BlockSequencer(drop_reasoning=self.drop_reasoning))
        events = stream_events(
            self.client, request, self.decoder(), retry=self.retry, read_timeout=self.read_timeout
        )
        async with contextlib.aclosing(events):
            async for event in events:
                for chunk in translator.event(event):
                    yield chunk
                if translator.finished:
                    # anything after the terminal event is ignored, and the
                    # connection is released without waiting for its close
                    return
        for chunk in translator.end():
            yield chunk
