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
- Wire coverage: a chunk's kinds are its parts (``part.text``,
  ``part.functionCall``, ``part.inlineData`` …, named by their data field), the
  candidate's ``finishReason`` and metadata (``groundingMetadata`` …),
  ``usageMetadata`` and ``promptFeedback``.
- An ``error`` object in the stream raises the typed error; a body cut inside
  an event raises :class:`StreamInterruptedError`, a whole event that is not
  JSON :class:`MalformedStreamError`.
"""

from __future__ import annotations

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
from ._vertex_args import apply_partial

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


_CANDIDATE_KINDS = frozenset({"finishReason", "groundingMetadata", "citationMetadata", "urlContextMetadata"})
_PART_META = frozenset({"text", "thought", "thoughtSignature", "partMetadata"})
_NOTHING_KINDS = ("chunk without candidate or usage",)
_TEXT_AND_USAGE = ("part.text", "usageMetadata")
_SERVER_CODE = "Gemini's own code execution (run server-side); its result reaches the answer text"
_SOURCES = "sources behind the answer; the protocol has no place for them, the text itself is translated"


def _part_kind(part: object) -> str:
    """``part.text``, ``part.thought``, ``part.functionCall``, ``part.thoughtSignature`` (alone), or ``part.<data key>``."""
    if type(part) is not dict:
        return "part"
    if len(part) == 1 and "text" in part:
        return "part.text"  # nearly every part
    if part.get("thought") is True:
        return "part.thought"
    other = next((key for key in part if key not in _PART_META), None)
    if other is not None:
        return f"part.{other}"
    if not part.get("text") and part.get("thoughtSignature"):
        return "part.thoughtSignature"
    return "part.text"


class GeminiTranslator(Translator[SSEEvent]):
    """Per-stream state of the Gemini event mapping (see the module docstring)."""

    terminal_event = "a chunk with a finishReason"
    mapped_kinds = frozenset({
        "part.text", "part.thought", "part.functionCall", "part.thoughtSignature", "finishReason",
        "promptFeedback", "usageMetadata", "error",
    })
    ignored_kinds: ClassVar[Mapping[str, str]] = {
        "part.executableCode": _SERVER_CODE,
        "part.codeExecutionResult": _SERVER_CODE,
        "groundingMetadata": _SOURCES,
        "citationMetadata": _SOURCES,
        "urlContextMetadata": _SOURCES,
        "candidates[index>0]": "another candidate; the harness asks for one, candidate 0 is translated",
        "chunk without candidate or usage": "nothing the protocol carries",
    }
    #: a whole functionCall's args object becomes the call's arguments as it is
    whole_fields = frozenset({"candidates[].content.parts[].functionCall.args"})

    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        super().__init__(route, sequencer)
        self._usage: dict[str, int] = {}
        self._reason: str | None = None
        self._calls = 0
        self._streamed: _StreamedCall | None = None
        self._signed = False  # the open reasoning run already has its signature

    def decode(self, event: SSEEvent) -> Any:
        payload = parse_json(event.data, route=self.route)
        if not isinstance(payload, dict):
            raise MalformedStreamError(
                f"event is not a JSON object: {event.data[:80]!r}", raw=event.data.encode(), route=self.route
            )
        return payload

    def kinds_in(self, payload: Any, event: SSEEvent) -> tuple[str, ...]:
        # Once per event while coverage is collected, so the usual chunk (one candidate, one
        # text part, usage, nothing else) is answered first, by a prepared tuple.
        try:
            (candidate,) = payload["candidates"]
            (part,) = candidate["content"]["parts"]
            if (len(part) == 1 and part["text"] is not None and candidate.keys().isdisjoint(_CANDIDATE_KINDS)
                    and "usageMetadata" in payload and "error" not in payload and "promptFeedback" not in payload):
                return _TEXT_AND_USAGE
        except (TypeError, ValueError, KeyError, AttributeError):
            pass  # not the usual shape
        return self._chunk_kinds(payload)

    def _chunk_kinds(self, payload: Mapping[str, Any]) -> tuple[str, ...]:
        """The kinds of any chunk: its parts, the candidate's metadata, usage, prompt feedback."""
        if "error" in payload:
            return ("error",)
        kinds: list[str] = []
        candidates = payload.get("candidates")
        if type(candidates) is list and candidates:
            if len(candidates) > 1:
                kinds.append("candidates[index>0]")
            candidate = candidates[0]
            if type(candidate) is dict:
                for key, value in candidate.items():
                    if key == "content":
                        parts = value.get("parts") if type(value) is dict else None
                        kinds += map(_part_kind, parts) if type(parts) is list else ()
                    elif key in _CANDIDATE_KINDS and value:
                        kinds.append(key)
        kinds += [key for key in ("usageMetadata", "promptFeedback") if key in payload]
        return tuple(kinds) if kinds else _NOTHING_KINDS

    def handle(self, payload: Any, event: SSEEvent) -> list[StreamChunk]:
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
            apply_partial(self._streamed.args, partial, self.route)
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
            headers=self.request_headers({"x-goog-api-key": self.api_key, "accept": "text/event-stream"}),
            json=request_body(options),
        )
