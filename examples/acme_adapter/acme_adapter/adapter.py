"""The Acme streaming API (fictional), as a dsh-replay adapter.

Acme's wire format
------------------
``POST {base_url}/v1/respond`` with ``Authorization: Bearer KEY`` and a JSON
body; the answer is ``text/event-stream`` with typed events, each ``data:`` a
JSON object::

    event: start    {"id": "resp_1", "model": "acme-1"}
    event: delta    {"text": "Hel"}                                   answer text
    event: tool     {"call": "call_1", "name": "get_weather", "args": "{\\"ci"}
    event: tool     {"call": "call_1", "args": "ty\\": \\"Paris\\"}"}   more arguments
    event: ping     {}
    event: done     {"stop": "tool_use", "usage": {"input": 42, "output": 18, "cached": 0}}
    event: error    {"error": {"type": "overloaded", "message": "..."}}

A tool call's first ``tool`` event carries its id and name; later ones carry only
more argument text, and calls made in parallel may interleave. ``done`` is the
terminal event; ``error`` can arrive at any point of a 200 stream.

The adapter is the two mappings and nothing else: HTTP, retries, typed errors,
block ordering (interleaved calls become one block after the other) and the
"stream ended early" check come from :class:`HttpAdapter`, :class:`Translator`
and :class:`BlockSequencer`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dsh_replay import (
    GenerateOptions,
    MalformedStreamError,
    Message,
    SSEEvent,
    StreamChunk,
    Usage,
)
from dsh_replay.adapters import (
    CutAwareSSEDecoder,
    HttpAdapter,
    StreamRequest,
    Translator,
    count,
    parse_json,
)

__all__ = ["AcmeAdapter", "AcmeTranslator"]


# -- request mapping ---------------------------------------------------------------


def _input_item(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "call": message.call_id, "output": message.content}
    item: dict[str, Any] = {"role": message.role, "text": message.content}
    if message.tool_calls:
        item["calls"] = [{"call": c.id, "name": c.name, "args": c.arguments} for c in message.tool_calls]
    return item


def request_body(options: GenerateOptions) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": options.model,
        "input": [_input_item(message) for message in options.messages],
        "stream": True,
    }
    if options.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "schema": dict(t.parameters)} for t in options.tools
        ]
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.max_tokens is not None:
        body["max_output_tokens"] = options.max_tokens
    return {**body, **options.extra}


# -- event mapping -----------------------------------------------------------------


class AcmeTranslator(Translator[SSEEvent]):
    """One Acme event → the chunks it releases."""

    terminal_event = "`event: done`"

    def event(self, event: SSEEvent) -> list[StreamChunk]:
        if event.event in ("start", "ping"):
            return []
        payload = parse_json(event.data, route=self.route)
        if not isinstance(payload, dict):
            raw = event.data.encode()
            raise MalformedStreamError(f"an Acme event is not a JSON object: {raw[:80]!r}", raw=raw, route=self.route)
        if event.event == "delta":
            return self.seq.text(payload.get("text") or "")
        if event.event == "tool":
            return self.seq.tool_call(
                payload.get("call"), call_id=payload.get("call"), name=payload.get("name"),
                arguments=payload.get("args") or "",
            )
        if event.event == "done":
            usage = payload.get("usage") or {}
            return self.finish(
                Usage(
                    input_tokens=count(usage.get("input")) or 0,
                    output_tokens=count(usage.get("output")) or 0,
                    cached_input_tokens=count(usage.get("cached")),
                ),
                payload.get("stop"),
            )
        if event.event == "error":
            raise self.error(payload)
        return []  # an event type added after this adapter was written: not ours to guess


class AcmeAdapter(HttpAdapter[SSEEvent]):
    """Acme, streamed (route ``acme``): ``AcmeAdapter(api_key, *, base_url=None, client=None, ...)``."""

    route: ClassVar[str] = "acme"
    default_base_url: ClassVar[str | None] = "https://api.acme.example"
    # the body is SSE (a body cut mid-event reads as interrupted, not malformed)
    decoder_class = CutAwareSSEDecoder
    translator_class = AcmeTranslator

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        return StreamRequest(
            route=self.route,
            url=f"{self.base_url}/v1/respond",
            headers=self.request_headers({"Authorization": f"Bearer {self.api_key}", "Accept": "text/event-stream"}),
            json=request_body(options),
        )
