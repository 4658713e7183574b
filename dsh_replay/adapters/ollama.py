"""Ollama adapter (route ``ollama``): ``POST /api/chat``, streamed as NDJSON.

https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion

Request mapping: ``{model, messages, stream: true, tools?, options?}``. A local
Ollama needs no key, so ``api_key`` may be empty; when one is given (Ollama
behind an authenticating proxy, or ollama.com) it goes in ``Authorization:
Bearer``.

- Roles map one to one. An assistant tool call is sent as ``tool_calls:
  [{function: {name, arguments}}]`` with ``arguments`` as a JSON *object*, as
  Ollama returns it; a tool result is ``{"role": "tool", "content", "tool_name"}``
  (the name from the tool message or else from the call it answers — Ollama
  matches results to calls by name, not id).
- Tools use the OpenAI-style ``{type: "function", function: {...}}`` shape;
  ``temperature`` and ``max_tokens`` go in ``options`` (``num_predict``).
- ``options.extra`` is merged into the body last (one level deep for objects, so
  ``{"options": {"num_ctx": 8192}}`` adds to ours).

Event mapping, one JSON object per line:

- ``message.thinking`` is reasoning, ``message.content`` text. ``/api/generate``
  lines carry the same at top level (``response``, ``thinking``); they are
  accepted too, so a body from either endpoint can be traced.
- ``message.tool_calls`` arrive whole, ``arguments`` as an object (serialized to
  JSON text for the one delta; a string is passed through). Ollama gives no id
  before v0.12 and sometimes none after: ``id`` is used when present, and
  otherwise the sequencer derives ``call_{n}_{name}`` (``n``: the call's 0-based
  position in the response), as for every route — stable for the same body.
- The line with ``done: true`` is terminal: its own content first, then usage
  (``prompt_eval_count`` → input, ``eval_count`` → output; 0 when absent) and
  finish with ``raw`` = ``done_reason`` (``stop``, ``length``, ``load`` …).
  Ollama says ``stop`` even after tool calls; the finish kind is the
  sequencer's (``tool-calls`` iff a call was emitted, P10).
- Wire coverage: a line's kinds are what it carries: each non-empty
  ``message.<field>`` (``message.images`` would be unmapped), the
  ``/api/generate`` fields, ``context`` and ``done``.
- An ``{"error": "..."}`` line raises. Ollama writes it when generation fails
  after the 200 status was sent, i.e. a server-side failure, so an error the
  payload does not classify becomes a :class:`ServerError` (no status attached:
  the HTTP status was 200). A body that ends without the ``done`` line (also one
  cut inside a line) raises :class:`StreamInterruptedError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import orjson

from ..errors import (
    MalformedStreamError,
    ProviderError,
    ServerError,
)
from ..protocol.chunks import StreamChunk, Usage
from ..protocol.options import GenerateOptions, Message
from ..wire.sequencer import BlockSequencer
from ..wire.transport import StreamRequest
from ._base import (
    CutAwareNDJSONDecoder,
    HttpAdapter,
    Translator,
    count,
    history_arguments,
    merge_extra,
    nonempty_str,
)

__all__ = ["OllamaAdapter"]


# -- request mapping -------------------------------------------------------------


def request_body(options: GenerateOptions) -> dict[str, Any]:
    """The ``/api/chat`` body for ``options``."""
    body: dict[str, Any] = {
        "model": options.model,
        "messages": _messages(options.messages),
        "stream": True,
    }
    if options.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
            }
            for t in options.tools
        ]
    settings: dict[str, Any] = {}
    if options.temperature is not None:
        settings["temperature"] = options.temperature
    if options.max_tokens is not None:
        settings["num_predict"] = options.max_tokens
    if settings:
        body["options"] = settings
    return merge_extra(body, options.extra)


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    names: dict[str, str] = {c.id: c.name for m in messages for c in m.tool_calls}
    out: list[dict[str, Any]] = []
    for message in messages:
        turn: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            turn["tool_calls"] = [
                {"function": {"name": c.name, "arguments": history_arguments(c.arguments, c.name, provider="Ollama function.arguments")}}
                for c in message.tool_calls
            ]
        if message.role == "tool":
            name = message.name or names.get(message.call_id or "")
            if name:
                turn["tool_name"] = name
        out.append(turn)
    return out


# -- event mapping ---------------------------------------------------------------


_EMPTY: tuple[object, ...] = (None, "", [], {})


class OllamaTranslator(Translator[object]):
    """Per-stream state of the Ollama event mapping (see the module docstring)."""

    terminal_event = 'the line with "done": true'
    mapped_kinds = frozenset({
        "message.content", "message.thinking", "message.tool_calls", "response", "thinking", "done", "error",
    })
    ignored_kinds: ClassVar[Mapping[str, str]] = {
        "context": "/api/generate's conversation state (token ids) to send back, not output",
        "line without content": "nothing in it: Ollama sends empty content lines",
    }
    #: a call's arguments object becomes the call's arguments as it is
    whole_fields = frozenset({"message.tool_calls[].function.arguments"})

    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        super().__init__(route, sequencer)
        self._calls = 0

    def decode(self, event: object) -> Any:
        if not isinstance(event, dict):
            raise MalformedStreamError(f"NDJSON line is not a JSON object: {str(event)[:80]}", route=self.route)
        return event

    def kinds_in(self, payload: Any, event: object) -> tuple[str, ...]:
        if "error" in payload:
            return ("error",)
        message = payload.get("message")
        kinds = [f"message.{key}" for key, value in (message.items() if isinstance(message, dict) else ())
                 if key != "role" and value not in _EMPTY]
        kinds += [key for key in ("response", "thinking", "context") if payload.get(key) not in _EMPTY]
        if payload.get("done") is True:
            kinds.append("done")
        return tuple(kinds) or ("line without content",)

    def handle(self, payload: Any, event: object) -> list[StreamChunk]:
        if "error" in payload:
            raise self._stream_error(payload)
        message = payload.get("message")
        message = message if isinstance(message, dict) else {}
        out: list[StreamChunk] = []
        thinking = message.get("thinking", payload.get("thinking"))
        if isinstance(thinking, str):
            out += self.seq.reasoning(thinking)
        content = message.get("content", payload.get("response"))
        if isinstance(content, str):
            out += self.seq.text(content)
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            out += self._tool_call(call)
        if payload.get("done") is True:
            usage = Usage(
                input_tokens=count(payload.get("prompt_eval_count")) or 0,
                output_tokens=count(payload.get("eval_count")) or 0,
            )
            reason = payload.get("done_reason")
            out += self.finish(usage, reason if isinstance(reason, str) else None)
        return out

    def _tool_call(self, call: object) -> list[StreamChunk]:
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(call, dict) or not isinstance(function, dict) or not isinstance(name, str) or not name:
            raise MalformedStreamError(f"tool call without a function name: {call}", route=self.route)
        key = ("call", self._calls)
        self._calls += 1
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else orjson.dumps(arguments or {}).decode()
        return self.seq.tool_call(key, call_id=nonempty_str(call.get("id")), name=name, arguments=text) + self.seq.end(key)

    def _stream_error(self, payload: dict[str, Any]) -> Exception:
        error = self.error(payload)
        if type(error) is ProviderError:
            return ServerError(error.message, route=self.route, request_id=error.request_id)
        return error


# -- adapter -------------------------------------------------------------------------


class OllamaAdapter(HttpAdapter[object]):
    """Ollama ``/api/chat`` streaming (NDJSON)."""

    route: ClassVar[str] = "ollama"
    default_base_url: ClassVar[str | None] = "http://localhost:11434"
    decoder_class = CutAwareNDJSONDecoder
    translator_class = OllamaTranslator
    requires_api_key: ClassVar[bool] = False

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        headers = {"accept": "application/x-ndjson"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return StreamRequest(
            route=self.route,
            url=f"{self.base_url}/api/chat",
            headers=self.request_headers(headers),
            json=request_body(options),
        )
