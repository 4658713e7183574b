"""Google Gemini API adapter (route ``gemini``).

Request mapping: ``POST {base_url}/models/{model}:streamGenerateContent?alt=sse``
with the key in the ``x-goog-api-key`` header — never ``?key=`` in the URL, where
proxies and access logs would keep it
(https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent).

- System messages become ``systemInstruction``; user turns have role ``user``,
  assistant turns role ``model``.
- An assistant tool call becomes a ``functionCall`` part (``args`` = the parsed
  arguments object, ``id`` = the harness call id); tool results become
  ``functionResponse`` parts in a user turn, consecutive results merged into one
  turn (parallel calls are answered together). The function name comes from the
  tool message's ``name`` or else from the call it answers. ``response`` must be
  an object: a result that is a JSON object is sent as is, anything else is
  wrapped as ``{"output": <result text>}`` — the key the API documents for a
  function's output (https://ai.google.dev/api/caching#FunctionResponse).
- Tools go in one ``tools: [{functionDeclarations: [...]}]`` entry;
  ``temperature`` and ``max_tokens`` in ``generationConfig`` (``maxOutputTokens``).
- ``options.extra`` is merged into the body last (one level deep for objects,
  so ``{"generationConfig": {"thinkingConfig": ...}}`` adds to ours).

Event mapping: every SSE event is a whole ``GenerateContentResponse``
(events are separated by CRLF CRLF; the SSE decoder handles it). Only
``candidates[0]`` is read — the harness asks for one candidate.

- ``text`` parts are deltas; parts with ``"thought": true`` are reasoning.
- ``thoughtSignature`` (on a thought, text, function-call or trailing empty
  part) becomes the signature of the reasoning block *while one is open* (the
  first one wins: a signature is a whole value, not a fragment); with no open
  reasoning block it has nowhere to go in the protocol and is dropped.
- A ``functionCall`` part arrives whole: one tool-call block with one delta,
  the JSON text of ``args`` (``{}`` when absent). Gemini API models send no
  call id: ``functionCall.id`` is used when present, and otherwise the
  sequencer derives ``call_{n}_{name}`` (``n``: the call's 0-based position in
  the response), as for every route, so the same body always gives the same ids.
- Vertex AI streamed arguments (``willContinue`` + ``partialArgs`` with
  ``jsonPath``, closed by an empty ``functionCall``) are rebuilt into the
  arguments object and emitted as one delta when the call completes: the wire
  carries values by path, not JSON text, so there is no raw text to pass on.
- ``executableCode`` / ``codeExecutionResult`` parts are server-side tool runs
  and produce no block.
- ``usageMetadata`` rides on every chunk and its counts change mid-stream, so
  each field keeps its latest value; usage is reported once, at the end, with
  raw wire values: ``inputTokens`` = ``promptTokenCount``, ``outputTokens`` =
  ``candidatesTokenCount`` (thought tokens are *not* added; they are
  ``reasoningTokens``), ``cachedInputTokens`` = ``cachedContentTokenCount``.
- ``finishReason`` (``STOP``, ``MAX_TOKENS``, ``SAFETY`` …; ``STOP`` even for tool
  calls) goes to ``raw``; the kind is the sequencer's (``tool-calls`` iff a call
  was emitted, P10). A later chunk may still carry usage, so ``finish`` is
  emitted when the body ends, provided a finish reason was seen; a body that
  ends without one raises :class:`StreamInterruptedError`. A prompt blocked
  before any candidate (``promptFeedback.blockReason``) ends the turn with that
  reason as ``raw``.
- An ``error`` object in the stream raises the typed error; a body cut inside
  an event raises :class:`StreamInterruptedError`, a whole event that is not
  JSON :class:`MalformedStreamError`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import quote

import orjson

from ..errors import ConfigError, MalformedStreamError, StreamInterruptedError
from ..protocol.chunks import StreamChunk, Usage
from ..protocol.options import GenerateOptions, Message
from ..wire.sequencer import BlockSequencer
from ..wire.sse import SSEEvent
from ..wire.transport import StreamRequest
from ._base import (
    CutAwareSSEDecoder,
    HttpAdapter,
    Translator,
    count,
    history_arguments,
    merge_extra,
    nonempty_str,
    parse_json,
)

__all__ = ["GeminiAdapter"]


# -- request mapping -------------------------------------------------------------


def request_body(options: GenerateOptions) -> dict[str, Any]:
    """The ``GenerateContentRequest`` body for ``options``."""
    body: dict[str, Any] = {"contents": _contents(options.messages)}
    system = [m.content for m in options.messages if m.role == "system"]
    if system:
        body["systemInstruction"] = {"parts": [{"text": text} for text in system]}
    if options.tools:
        declarations = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in options.tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
    config: dict[str, Any] = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.max_tokens is not None:
        config["maxOutputTokens"] = options.max_tokens
    if config:
        body["generationConfig"] = config
    return merge_extra(body, options.extra)


def _contents(messages: Sequence[Message]) -> list[dict[str, Any]]:
    names: dict[str, str] = {c.id: c.name for m in messages for c in m.tool_calls}
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the user turn collecting function responses
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            if results is None:
                results = []
                out.append({"role": "user", "parts": results})
            results.append({"functionResponse": _function_response(message, names)})
            continue
        results = None
        parts: list[dict[str, Any]] = []
        if message.content or not message.tool_calls:
            parts.append({"text": message.content})
        parts += [
            {"functionCall": {"id": c.id, "name": c.name, "args": history_arguments(c.arguments, c.name, provider="Gemini functionCall args")}}
            for c in message.tool_calls
        ]
        out.append({"role": "model" if message.role == "assistant" else "user", "parts": parts})
    return out


def _function_response(message: Message, names: Mapping[str, str]) -> dict[str, Any]:
    name = message.name or names.get(message.call_id or "")
    if not name:
        raise ConfigError(
            f"tool result {message.call_id!r} names no function and answers no tool call in the "
            "history; Gemini needs the function name (set Message.name)"
        )
    try:
        result = orjson.loads(message.content)
    except orjson.JSONDecodeError:
        result = None
    response = result if isinstance(result, dict) else {"output": message.content}
    return {"id": message.call_id, "name": name, "response": response}


# -- event mapping ---------------------------------------------------------------


@dataclass
class _StreamedCall:
    """A Vertex call whose arguments arrive as ``partialArgs`` by JSON path."""

    key: tuple[str, int]
    args: dict[str, Any] = field(default_factory=dict)


class GeminiTranslator(Translator[SSEEvent]):
    """Per-stream state of the Gemini event mapping (see the module docstring)."""

    terminal_event = "a chunk with a finishReason"

    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        super().__init__(route, sequencer)
        self._usage: dict[str, int] = {}
        self._reason: str | None = None
        self._calls = 0
        self._streamed: _StreamedCall | None = None
        self._signed = False  # the open reasoning run already has its signature

    def event(self, event: SSEEvent) -> list[StreamChunk]:
        payload = parse_json(event.data, route=self.route)
        if not isinstance(payload, dict):
            raise MalformedStreamError(
                f"event is not a JSON object: {event.data[:80]!r}", raw=event.data.encode(), route=self.route
            )
        if "error" in payload:
            raise self.error(payload)
        self._take_usage(payload.get("usageMetadata"))
        out: list[StreamChunk] = []
        candidates = payload.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(candidate, dict):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict):
                    out += self._part(part)
            if isinstance(candidate.get("finishReason"), str):
                self._reason = candidate["finishReason"]
        feedback = payload.get("promptFeedback")
        if candidate is None and isinstance(feedback, dict) and isinstance(feedback.get("blockReason"), str):
            self._reason = feedback["blockReason"]
        return out

    def end(self) -> list[StreamChunk]:
        if self._reason is None:
            raise StreamInterruptedError(
                f"the stream ended before {self.terminal_event}; the response is incomplete",
                route=self.route,
            )
        out = self._complete_streamed() if self._streamed is not None else []
        usage = Usage(
            input_tokens=self._usage.get("promptTokenCount", 0),
            output_tokens=self._usage.get("candidatesTokenCount", 0),
            cached_input_tokens=self._usage.get("cachedContentTokenCount"),
            reasoning_tokens=self._usage.get("thoughtsTokenCount"),
        )
        return out + self.finish(usage, self._reason)

    def _part(self, part: dict[str, Any]) -> list[StreamChunk]:
        signature = part.get("thoughtSignature")
        if not isinstance(signature, str) or self._signed:
            signature = None  # one signature per reasoning block; a later one would not add to it
        self._signed = self._signed or signature is not None
        text = part.get("text")
        text = text if isinstance(text, str) else ""
        if part.get("thought") is True:
            return self.seq.reasoning(text, signature=signature)
        # before the text/call that closes the open reasoning block
        out = self.seq.reasoning("", signature=signature) if signature else []
        call = part.get("functionCall")
        if isinstance(call, dict) or text:
            self._signed = False
        if isinstance(call, dict):
            streamed = self._streamed is not None or call.get("willContinue") or "partialArgs" in call
            return out + (self._streamed_call(call) if streamed else self._whole_call(call))
        return out + self.seq.text(text)

    def _whole_call(self, call: dict[str, Any]) -> list[StreamChunk]:
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise MalformedStreamError(f"functionCall without a name: {call}", route=self.route)
        key = self._next_key()
        args = orjson.dumps(call.get("args") or {}).decode()
        out = self.seq.tool_call(key, call_id=nonempty_str(call.get("id")), name=name, arguments=args)
        return out + self.seq.end(key)

    def _streamed_call(self, call: dict[str, Any]) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        name = call.get("name")
        if isinstance(name, str) and name:  # a named part opens the next streamed call
            if self._streamed is not None:
                out += self._complete_streamed()
            key = self._next_key()
            args = call.get("args")
            self._streamed = _StreamedCall(key, dict(args) if isinstance(args, dict) else {})
            out += self.seq.tool_call(key, call_id=nonempty_str(call.get("id")), name=name)
        if self._streamed is None:
            raise MalformedStreamError(f"partial functionCall before its name: {call}", route=self.route)
        for partial in call.get("partialArgs") or ():
            _apply_partial(self._streamed.args, partial, self.route)
        if not call.get("willContinue"):
            out += self._complete_streamed()
        return out

    def _complete_streamed(self) -> list[StreamChunk]:
        streamed, self._streamed = self._streamed, None
        assert streamed is not None
        out = self.seq.tool_call(streamed.key, arguments=orjson.dumps(streamed.args).decode())
        return out + self.seq.end(streamed.key)

    def _next_key(self) -> tuple[str, int]:
        key = ("call", self._calls)
        self._calls += 1
        return key

    def _take_usage(self, metadata: object) -> None:
        if not isinstance(metadata, dict):
            return
        for name in ("promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount", "thoughtsTokenCount"):
            value = count(metadata.get(name))
            if value is not None:
                self._usage[name] = value


# -- Vertex partialArgs ------------------------------------------------------------

# RFC 9535 paths as Vertex sends them: $.a.b, $.a[0], $['a b']
_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def _apply_partial(args: dict[str, Any], partial: object, route: str) -> None:
    """Set one ``PartialArg`` into ``args``; string pieces of one path concatenate."""
    path = partial.get("jsonPath") if isinstance(partial, dict) else None
    if not isinstance(partial, dict) or not isinstance(path, str) or not path.startswith("$"):
        raise MalformedStreamError(f"partialArgs entry without a jsonPath: {partial}", route=route)
    steps: list[str | int] = []
    for match in _STEP.finditer(path, 1):
        name, index, single, double = match.groups()
        steps.append(int(index) if index is not None else name or single or double or "")
    if not steps:
        raise MalformedStreamError(f"partialArgs jsonPath {path!r} names no argument", route=route)
    container: Any = args
    for step, following in itertools.pairwise(steps):
        container = _child(container, step, [] if isinstance(following, int) else {})
    last = steps[-1]
    if "stringValue" in partial:
        previous = _get(container, last)
        value: Any = (previous if isinstance(previous, str) else "") + str(partial["stringValue"])
    elif "numberValue" in partial:
        value = partial["numberValue"]
    elif "boolValue" in partial:
        value = partial["boolValue"]
    else:
        value = None  # nullValue
    _child(container, last, value, replace=True)


def _get(container: Any, step: str | int) -> Any:
    if isinstance(step, int):
        return container[step] if isinstance(container, list) and step < len(container) else None
    return container.get(step) if isinstance(container, dict) else None


def _child(container: Any, step: str | int, default: Any, *, replace: bool = False) -> Any:
    if isinstance(step, int) and isinstance(container, list):
        while len(container) <= step:
            container.append(None)
        if replace or container[step] is None:
            container[step] = default
        return container[step]
    if isinstance(step, str) and isinstance(container, dict):
        if replace or step not in container:
            container[step] = default
        return container[step]
    raise MalformedStreamError(f"partialArgs path step {step!r} does not fit {type(container).__name__}")


# -- adapter -------------------------------------------------------------------------


class GeminiAdapter(HttpAdapter[SSEEvent]):
    """Gemini ``streamGenerateContent`` over SSE."""

    route: ClassVar[str] = "gemini"
    default_base_url: ClassVar[str | None] = "https://generativelanguage.googleapis.com/v1beta"
    decoder_class = CutAwareSSEDecoder
    translator_class = GeminiTranslator

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        model = quote(options.model.removeprefix("models/"), safe="-._~")
        return StreamRequest(
            route=self.route,
            url=f"{self.base_url}/models/{model}:streamGenerateContent?alt=sse",
            headers=self._headers({"x-goog-api-key": self.api_key, "accept": "text/event-stream"}),
            json=request_body(options),
        )
