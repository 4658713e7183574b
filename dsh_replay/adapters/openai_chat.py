"""OpenAI Chat Completions (route ``openai``) and its dialects (route ``openai-compatible``).

Request mapping
---------------
``POST {base_url}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage`` (https://platform.openai.com/docs/api-reference/chat/create).
History is sent in the Chat shape: assistant tool calls as ``tool_calls`` (content
``null`` when the assistant said nothing), tool results as ``role: "tool"``
messages with ``tool_call_id``. ``options.extra`` is merged into the body last;
an extra value of ``None`` removes the key (e.g. ``{"stream_options": None}`` for
a server that rejects it).

Event mapping
-------------
Every ``data:`` payload is a ``chat.completion.chunk``. Only choice 0 is
translated: with ``n > 1`` the other choices are interleaved in the same stream
and the protocol has one generation per stream. Tool-call fragments are keyed
by their ``index``; ``id`` and ``name`` come only on the first fragment, and a
later fragment carrying ``"name": ""`` does not rename the call (the sequencer
keeps the first name). Dialects seen in real traffic (``FORMAT-NOTES.md``):
reasoning in ``reasoning_content`` (DeepSeek, vLLM, z.ai) or ``reasoning``
(Groq, OpenRouter), Mistral ``content`` as a list of text/thinking parts, a
whole call in one delta without ``index`` (Mistral, Gemini: its position
stands in, and an entry with a name starts a new call), usage on the
finish chunk, in a trailing ``choices: []`` chunk, or in ``x_groq.usage``.
Gemini's endpoint (``generativelanguage.googleapis.com/v1beta/openai``) sends
``"id": ""``: the sequencer derives ``call_{n}_{name}``, as for native Gemini;
its ``extra_content`` (a thought signature) has no place in the protocol. A
``finish_reason`` of ``stop`` after tool calls (Gemini) still finishes
``tool-calls``: the sequencer decides the kind for every route (P10).

Wire coverage: a chunk's kinds are what it carries — each non-empty
``delta.<field>`` of choice 0 (``delta.content``, ``delta.tool_calls`` …), its
``finish_reason``, a ``usage``, another choice — plus ``[DONE]`` and
``error``; what rides beside them (``logprobs``, ``obfuscation``) shows as
fields (``trace --coverage``). A delta field no dialect seen so far sends
(``delta.audio``, the legacy ``delta.function_call``) is unmapped.

When finish is emitted
----------------------
At ``data: [DONE]``, the stream's terminal event, with the last finish reason
and the last usage seen: they arrive in either order, in one chunk or two, and
a provider may repeat a growing usage (Perplexity) or send an error beside the
choices after the finish reason (OpenRouter), so nothing is final before
``[DONE]``. A missing ``finish_reason`` gives ``raw = None`` (Snowflake never
sends one); missing usage gives zeros (the provider reported none). A server
that omits ``[DONE]`` is finished when its body ends cleanly after both a finish
reason and usage arrived. Any other end of body raises
:class:`StreamInterruptedError`: nothing is made up to fill the gap.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import orjson

from ..errors import ConfigError, MalformedStreamError
from ..protocol.chunks import StreamChunk, Usage
from ..protocol.options import GenerateOptions, Message, ToolDefinition
from ..wire.sequencer import BlockSequencer
from ..wire.sse import SSEEvent
from ..wire.transport import StreamRequest
from ._base import (
    CutAwareSSEDecoder,
    HttpAdapter,
    Translator,
    count,
    merge_extra,
    nonempty_str,
    parse_json,
)
from ._chat_kinds import DONE, NOTHING, OTHER_CHOICE, chunk_kinds

__all__ = [
    "ChatTranslator",
    "OpenAIChatAdapter",
    "OpenAICompatibleAdapter",
    "sequence_of",
]

_NO_USAGE = Usage(input_tokens=0, output_tokens=0)


def sequence_of(value: object) -> Sequence[Any]:
    """``value`` if it is a list, else an empty tuple (provider fields are often null)."""
    return value if isinstance(value, list) else ()


# -- request mapping -----------------------------------------------------------------


def chat_message(message: Message) -> dict[str, Any]:
    """One history message in the Chat Completions shape."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        # an assistant turn that only called tools has content null, as the API returns it
        out["content"] = message.content or None
        out["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    if message.name:
        out["name"] = message.name
    return out


def chat_tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)},
    }


# -- event mapping -----------------------------------------------------------------------


def chat_usage(payload: Mapping[str, Any]) -> Usage | None:
    """The usage a chunk carries (top level, or Groq's ``x_groq.usage``), if any."""
    raw = payload.get("usage")
    if not isinstance(raw, dict):
        groq = payload.get("x_groq")
        raw = groq.get("usage") if isinstance(groq, dict) else None
    if not isinstance(raw, dict):
        return None
    prompt, completion = count(raw.get("prompt_tokens")), count(raw.get("completion_tokens"))
    if prompt is None and completion is None:
        return None
    prompt_details = raw.get("prompt_tokens_details")
    cached = count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict) else None
    if cached is None:  # DeepSeek's own name for it
        cached = count(raw.get("prompt_cache_hit_tokens"))
    completion_details = raw.get("completion_tokens_details")
    reasoning = (
        count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict) else None
    )
    return Usage(
        input_tokens=prompt or 0,
        output_tokens=completion or 0,
        cached_input_tokens=cached,
        reasoning_tokens=reasoning,
    )




class ChatTranslator(Translator[SSEEvent]):
    """Chat Completions chunks → sequencer calls (see the module docstring)."""

    terminal_event = "`data: [DONE]` (or a finish_reason and the usage before the body ended)"
    mapped_kinds = frozenset({
        DONE, "error", "finish_reason", "usage", "delta.content", "delta.tool_calls", "delta.refusal",
        "delta.reasoning_content", "delta.reasoning", "delta.reasoning_details",
    })
    ignored_kinds: ClassVar[Mapping[str, str]] = {
        "delta.role": "always assistant",
        # Groq, gpt-oss: the harmony channel ("analysis", "final") each reasoning or content piece
        # belongs to; the piece itself rides in delta.reasoning / delta.content of the same chunk
        "delta.channel": "the gpt-oss channel name beside a reasoning or content piece, which is mapped",
        OTHER_CHOICE: "another choice (n > 1); the protocol has one generation per stream, choice 0's",
        NOTHING: "nothing the protocol carries (an empty or metadata-only chunk)",
    }
    #: a few servers send a call's arguments as an object, passed on as its JSON text
    whole_fields = frozenset({"choices[].delta.tool_calls[].function.arguments"})

    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        super().__init__(route, sequencer)
        self._reason: str | None = None
        self._usage: Usage | None = None
        self._calls = 0
        self._by_index: dict[int, Hashable] = {}
        self._by_id: dict[str, Hashable] = {}
        self._id_of: dict[Hashable, str] = {}

    def decode(self, event: SSEEvent) -> Any:
        if event.data.strip() == DONE:
            return DONE
        payload = parse_json(event.data, route=self.route)
        if type(payload) is not dict:
            raw = event.data.encode()
            raise MalformedStreamError(f"a chunk is not a JSON object: {raw[:80]!r}", raw=raw, route=self.route)
        return payload

    #: what a chunk carries (see the module docstring); a plain function, as it runs once per event
    kinds_in = staticmethod(chunk_kinds)

    def handle(self, payload: Any, event: SSEEvent) -> list[StreamChunk]:
        if payload is DONE:
            return self.finish(self._usage or _NO_USAGE, self._reason)
        # an error object, in an `event: error` block (Groq) or beside the choices (OpenRouter)
        if event.event == "error" or payload.get("error"):
            raise self.error(payload)
        out: list[StreamChunk] = []
        for choice in sequence_of(payload.get("choices")):
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                out += self._choice(choice)
        usage = chat_usage(payload)
        if usage is not None:
            self._usage = usage  # later reports win: Perplexity repeats a growing usage per chunk
        return out

    def end(self) -> list[StreamChunk]:
        if not self.finished and self._reason is not None and self._usage is not None:
            return self.finish(self._usage, self._reason)  # a server that omits [DONE]
        return super().end()

    def _choice(self, choice: Mapping[str, Any]) -> list[StreamChunk]:
        delta = choice.get("delta")
        out: list[StreamChunk] = []
        if isinstance(delta, dict):
            out += self._reasoning(delta)
            out += self._content(delta.get("content"))
            # a refusal is what the model said instead of an answer; it stays visible as text
            out += self.seq.text(nonempty_str(delta.get("refusal")) or "")
            for position, call in enumerate(sequence_of(delta.get("tool_calls"))):
                if isinstance(call, dict):
                    out += self._tool_call(position, call)
        reason = nonempty_str(choice.get("finish_reason"))
        if reason is not None:
            self._reason = reason
        return out

    def _reasoning(self, delta: Mapping[str, Any]) -> list[StreamChunk]:
        # one field or the other, never both: some servers mirror one into the other
        text = nonempty_str(delta.get("reasoning_content")) or nonempty_str(delta.get("reasoning"))
        out = self.seq.reasoning(text) if text else []
        # OpenRouter: the signature of Claude thinking rides in reasoning_details
        for detail in sequence_of(delta.get("reasoning_details")):
            signature = nonempty_str(detail.get("signature")) if isinstance(detail, dict) else None
            if signature:
                out += self.seq.reasoning("", signature=signature)
        return out

    def _content(self, content: object) -> list[StreamChunk]:
        if isinstance(content, str):
            return self.seq.text(content)
        out: list[StreamChunk] = []
        # Mistral/Magistral: [{"type": "text", "text"}, {"type": "thinking", "thinking": [parts]}]
        for part in sequence_of(content):
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                out += self.seq.text(nonempty_str(part.get("text")) or "")
            elif part.get("type") == "thinking":
                for text in _texts(part.get("thinking")):
                    out += self.seq.reasoning(text)
        return out

    def _tool_call(self, position: int, call: Mapping[str, Any]) -> list[StreamChunk]:
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        call_id, name = nonempty_str(call.get("id")), nonempty_str(function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a few servers send an object instead of JSON text
            arguments = orjson.dumps(arguments).decode()
        arguments = arguments if isinstance(arguments, str) else ""
        if not (call_id or name or arguments):
            return []  # nothing for the call (Gemini: an entry holding only extra_content)
        index = call.get("index")
        if type(index) is int:
            key = self._tool_key(index, call_id)
        else:
            # Mistral and Gemini send whole calls with no index: the position in the delta
            # stands in, and a named entry is a new call (parallel calls one chunk each are
            # all at position 0, and Gemini's all have "id": "")
            key = self._tool_key(position, call_id, new=name is not None)
        # no id (Gemini's ""): the sequencer derives one
        return self.seq.tool_call(key, call_id=call_id, name=name, arguments=arguments)

    def _tool_key(self, index: int, call_id: str | None, *, new: bool = False) -> Hashable:
        """The sequencer key of a fragment: by id when known, else by index.

        A new id on an index already taken by another call starts a new call
        (servers that number every call 0), as does ``new``.
        """
        key = self._by_id.get(call_id) if call_id else None
        if key is None:
            key = None if new else self._by_index.get(index)
            if key is None or (call_id and self._id_of.get(key, call_id) != call_id):
                key = ("tool", self._calls)
                self._calls += 1
                self._by_index[index] = key
        if call_id:
            self._by_id[call_id] = key
            self._id_of.setdefault(key, call_id)
        return key


def _texts(parts: object) -> Iterable[str]:
    if isinstance(parts, str):
        yield parts
    for part in sequence_of(parts):
        text = nonempty_str(part.get("text")) if isinstance(part, dict) else nonempty_str(part)
        if text:
            yield text


# -- adapters ----------------------------------------------------------------------------


class OpenAIChatAdapter(HttpAdapter[SSEEvent]):
    """OpenAI Chat Completions, streamed (route ``openai``).

    ``OpenAIChatAdapter(api_key, *, base_url=None, client=None, drop_reasoning=False,
    retry=DEFAULT_RETRY, read_timeout=60.0, headers=None)``; the key goes in the
    ``Authorization: Bearer`` header only.
    """

    route: ClassVar[str] = "openai"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    decoder_class = CutAwareSSEDecoder
    translator_class = ChatTranslator
    #: OpenAI deprecated ``max_tokens`` for ``max_completion_tokens`` (o-series refuse the old one)
    max_tokens_field: ClassVar[str] = "max_completion_tokens"

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        return StreamRequest(
            route=self.route,
            url=f"{self.base_url}/chat/completions",
            headers=self.request_headers(self.auth_headers()),
            json=self.body(options),
        )

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}", "Accept": "text/event-stream"}

    def body(self, options: GenerateOptions) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": options.model,
            "messages": [chat_message(message) for message in options.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if options.tools:
            body["tools"] = [chat_tool(tool) for tool in options.tools]
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.max_tokens is not None:
            body[self.max_tokens_field] = options.max_tokens
        return merge_extra(body, options.extra)


class OpenAICompatibleAdapter(OpenAIChatAdapter):
    """A server speaking the Chat Completions dialect (route ``openai-compatible``).

    vLLM, llama.cpp server, LM Studio, Ollama's ``/v1``, Groq, Together, Mistral,
    OpenRouter … ``base_url`` is required (the server's root, e.g.
    ``http://localhost:8000/v1``). ``api_key`` is still passed explicitly, but may
    be ``None`` or empty, as local servers take none: the ``Authorization`` header
    is sent only when a key is given.
    Sends ``max_tokens``, the name every compatible server understands.
    """

    route: ClassVar[str] = "openai-compatible"
    default_base_url: ClassVar[str | None] = None
    requires_api_key: ClassVar[bool] = False
    max_tokens_field: ClassVar[str] = "max_tokens"

    def __init__(self, api_key: str | None, *, base_url: str | None = None, **kwargs: Any) -> None:
        if not base_url:
            raise ConfigError(
                "OpenAICompatibleAdapter needs base_url, the server's OpenAI-compatible root, e.g. "
                "http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama) or "
                "https://api.groq.com/openai/v1"
            )
        super().__init__(api_key or "", base_url=base_url, **kwargs)

    def auth_headers(self) -> dict[str, str]:
        headers = super().auth_headers()
        if not self.api_key:
            del headers["Authorization"]
        return headers
