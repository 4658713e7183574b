"""Cohere's v2 Chat API, streamed, as a dsh-replay adapter (route ``cohere``).

Built only from the public building blocks (``dsh_replay``, ``dsh_replay.adapters``);
the wire format it reads is written down, with sources, in ``WIRE_FORMAT.md``.

Request mapping: ``POST {base_url}/v2/chat`` with ``Authorization: bearer KEY``
and ``stream: true``. System, user, assistant and tool messages keep their roles;
an assistant tool call goes back as ``tool_calls`` (arguments as the JSON string
the model wrote) with the turn's reasoning as its ``tool_plan``; a tool result is
``{"role": "tool", "tool_call_id", "content"}``.

Event mapping (events are told apart by the payload's ``type``):

- ``content-start/delta/end`` of ``text`` → a text block, of ``thinking`` (the
  reasoning models) → a reasoning block, one per provider ``index``;
- ``tool-plan-delta`` → a reasoning block: the plan is the model's own account of
  why it calls the tools, not answer text, and Cohere wants it back as ``tool_plan``;
- ``tool-call-start/delta/end`` → one tool-call block per ``index``: id and name
  from the start, argument text from each delta;
- ``message-end`` is terminal: usage (``usage.tokens``, else ``billed_units``) and
  finish (``raw`` = ``finish_reason``). ``finish_reason: ERROR`` means the
  generation failed: it raises the typed error instead of finishing.
- ``message-start``, ``citation-*``, ``debug`` and unknown types carry nothing we map.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dsh_replay import GenerateOptions, MalformedStreamError, Message, SSEEvent, StreamChunk, Usage
from dsh_replay.adapters import (
    CutAwareSSEDecoder,
    HttpAdapter,
    StreamRequest,
    Translator,
    count,
    merge_extra,
    parse_json,
)

__all__ = ["CohereAdapter", "CohereTranslator", "request_body"]

DEFAULT_BASE_URL = "https://api.cohere.com"


# -- request mapping ---------------------------------------------------------------


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    if not message.tool_calls:
        return {"role": message.role, "content": message.content}
    turn: dict[str, Any] = {
        "role": "assistant",
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
            for c in message.tool_calls
        ],
    }
    plan = "".join(r.text for r in message.reasoning)
    if plan:
        turn["tool_plan"] = plan
    if message.content:
        turn["content"] = message.content
    return turn


def request_body(options: GenerateOptions) -> dict[str, Any]:
    """The ``/v2/chat`` body for ``options``."""
    body: dict[str, Any] = {
        "model": options.model,
        "messages": [_message(m) for m in options.messages],
        "stream": True,
    }
    if options.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": dict(t.parameters)}}
            for t in options.tools
        ]
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    return merge_extra(body, options.extra)


# -- event mapping -----------------------------------------------------------------


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


class CohereTranslator(Translator[SSEEvent]):
    """One Cohere v2 stream event → the chunks it releases."""

    terminal_event = "message-end"

    def event(self, event: SSEEvent) -> list[StreamChunk]:
        if event.data.strip() == "[DONE]":  # not sent by Cohere today; harmless if a proxy adds it
            return []
        payload = parse_json(event.data, route=self.route)
        if not isinstance(payload, dict):
            raw = event.data.encode()
            raise MalformedStreamError(f"a Cohere event is not a JSON object: {raw[:80]!r}", raw=raw, route=self.route)
        kind, index = payload.get("type") or event.event, payload.get("index", 0)
        delta = _dict(payload.get("delta"))
        message = _dict(delta.get("message"))
        if kind in ("content-start", "content-delta"):
            content = _dict(message.get("content"))
            if content.get("type") == "thinking" or "thinking" in content:
                return self.seq.reasoning(_str(content.get("thinking")), key=("thinking", index))
            return self.seq.text(_str(content.get("text")), key=("text", index))
        if kind == "content-end":
            return self.seq.end(("thinking", index)) + self.seq.end(("text", index))
        if kind == "tool-plan-delta":
            return self.seq.reasoning(_str(message.get("tool_plan")), key="tool-plan")
        if kind in ("tool-call-start", "tool-call-delta"):
            call = _dict(message.get("tool_calls"))
            function = _dict(call.get("function"))
            return self.seq.tool_call(("tool", index), call_id=_str(call.get("id")),
                                      name=_str(function.get("name")), arguments=_str(function.get("arguments")))
        if kind == "tool-call-end":
            return self.seq.end(("tool", index))
        if kind == "message-end":
            return self._message_end(delta)
        return []

    def _message_end(self, delta: dict[str, Any]) -> list[StreamChunk]:
        reason = delta.get("finish_reason")
        if reason == "ERROR":
            raise self.error({"message": _str(delta.get("error")) or "Cohere ended the generation with ERROR"})
        usage = _dict(delta.get("usage"))
        tokens = _dict(usage.get("tokens")) or _dict(usage.get("billed_units"))
        return self.finish(Usage(input_tokens=count(tokens.get("input_tokens")) or 0,
                                 output_tokens=count(tokens.get("output_tokens")) or 0,
                                 cached_input_tokens=count(usage.get("cached_tokens"))),
                           reason if isinstance(reason, str) else None)


# -- adapter -----------------------------------------------------------------------


class CohereAdapter(HttpAdapter[SSEEvent]):
    """Cohere v2 chat, streamed: ``CohereAdapter(api_key, *, base_url="https://api.cohere.com", ...)``.

    Every other keyword (``client``, ``retry``, ``read_timeout``, ``headers``,
    ``drop_reasoning``) is :class:`HttpAdapter`'s.
    """

    route: ClassVar[str] = "cohere"
    default_base_url: ClassVar[str | None] = DEFAULT_BASE_URL
    # a body cut inside an event reads as interrupted, not malformed
    decoder_class = CutAwareSSEDecoder
    translator_class = CohereTranslator

    def __init__(self, api_key: str, *, base_url: str = DEFAULT_BASE_URL, **kwargs: Any) -> None:
        super().__init__(api_key, base_url=base_url, **kwargs)

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        return StreamRequest(
            route=self.route,
            url=f"{self.base_url}/v2/chat",
            headers=self.request_headers({"Authorization": f"bearer {self.api_key}", "Accept": "text/event-stream"}),
            json=request_body(options),
        )
