"""Anthropic Messages API adapter (route ``anthropic``).

Request mapping: ``POST {base_url}/v1/messages`` with ``stream: true``, the key
in ``x-api-key`` and ``anthropic-version: 2023-06-01``
(https://docs.anthropic.com/en/api/messages).

- System messages go to the top-level ``system`` field (several are joined with
  a blank line: the API has no system role inside ``messages``).
- An assistant tool call becomes a ``tool_use`` content block whose ``input`` is
  the parsed arguments object; tool results become ``tool_result`` blocks in a
  user turn, consecutive results merged into one turn as the API wants
  (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use).
  A user message after the results stays a turn of its own: the API combines
  consecutive same-role turns itself.
- ``max_tokens`` is required by the API: when ``options.max_tokens`` is None we
  send :data:`DEFAULT_MAX_TOKENS`.
- ``options.extra`` is merged into the body last (one level deep for objects).

Event mapping (https://docs.anthropic.com/en/docs/build-with-claude/streaming):
``message_start`` → ``content_block_start/delta/stop`` per ``index`` →
``message_delta`` → ``message_stop``. Events are dispatched on the payload's
``type`` (re-framed recordings have no ``event:`` lines).

- ``text`` and ``thinking`` blocks, and client ``tool_use`` blocks, are keyed by
  the provider ``index`` and ended on ``content_block_stop``, so the next block
  opens at once. ``signature_delta`` becomes the reasoning block's signature.
- ``redacted_thinking`` carries no readable text, so it produces no block (an
  empty reasoning block would break P6); its encrypted ``data`` is dropped.
- Server-side tool blocks (``server_tool_use``, ``web_search_tool_result``,
  ``mcp_tool_use``/``mcp_tool_result``, ``tool_search_tool_result`` …) are run
  by Anthropic, not by the harness: turning them into tool-call blocks would
  make the harness execute them, so they and their deltas are skipped, as is
  any block type not listed here (``compaction`` …).
- Usage: ``message_start`` gives the input side, ``message_delta`` the
  cumulative output; any count ``message_delta`` repeats (newer API versions
  repeat ``input_tokens``) is taken as the final word. ``inputTokens`` is the raw
  ``input_tokens``, which excludes cache reads (``cachedInputTokens``).
- ``message_stop`` is terminal: every open block is closed, then usage and
  finish (``raw`` = ``stop_reason``). A tool block still open then — the
  ``max_tokens`` cut inside tool JSON — is closed with the partial arguments as
  they came (never repaired): the validator's P7j flags it, and
  ``raw="max_tokens"`` tells the harness why.
- Wire coverage: events are known by ``type``, block starts and deltas also
  by the block's or delta's own type (``content_block_start:server_tool_use``);
  ``mapped_kinds`` / ``ignored_kinds`` declare which are translated and which
  skipped on purpose, with why.
- ``event: error`` raises the typed error (``overloaded_error`` →
  :class:`OverloadedError` …); ``ping`` and unknown event types are ignored, as
  https://docs.anthropic.com/en/api/versioning asks; a second ``message_start`` is ignored. A body that
  ends before ``message_stop`` (also one cut inside an event) raises
  :class:`StreamInterruptedError`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import orjson

from ..errors import MalformedStreamError
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
    parse_json,
)
from ._coverage import kind_tables

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicAdapter"]

#: ``max_tokens`` sent when the options leave it unset (the API requires one)
DEFAULT_MAX_TOKENS = 4096
API_VERSION = "2023-06-01"


# -- request mapping -------------------------------------------------------------


def request_body(options: GenerateOptions) -> dict[str, Any]:
    """The Messages API body for ``options``."""
    body: dict[str, Any] = {
        "model": options.model,
        "max_tokens": options.max_tokens if options.max_tokens is not None else DEFAULT_MAX_TOKENS,
        "stream": True,
    }
    system = [m.content for m in options.messages if m.role == "system"]
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = _messages(options.messages)
    if options.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in options.tools
        ]
    if options.temperature is not None:
        body["temperature"] = options.temperature
    return merge_extra(body, options.extra)


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the user turn collecting tool results
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            if results is None:
                results = []
                out.append({"role": "user", "content": results})
            results.append({"type": "tool_result", "tool_use_id": message.call_id, "content": message.content})
            continue
        results = None
        out.append(_turn(message))
    return out


def _turn(message: Message) -> dict[str, Any]:
    # Extended thinking with tools needs the turn's signed thinking blocks back,
    # first and unchanged; unsigned reasoning cannot be verified, so it is not sent.
    # https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks
    thinking = [
        {"type": "thinking", "thinking": r.text, "signature": r.signature}
        for r in message.reasoning
        if r.signature
    ]
    if not message.tool_calls and not thinking:
        return {"role": message.role, "content": message.content}
    content: list[dict[str, Any]] = list(thinking)
    if message.content:
        content.append({"type": "text", "text": message.content})
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": history_arguments(c.arguments, c.name, provider="Anthropic tool_use input")}
        for c in message.tool_calls
    ]
    return {"role": "assistant", "content": content}


# -- event mapping ---------------------------------------------------------------


_SKIPPED = "content_block_delta/stop of a skipped block"
_OF_SKIPPED = (_SKIPPED,)
#: the events known also by the type of what they carry (the block, the delta), and where that type is
_TYPED = {"content_block_start": "content_block", "content_block_delta": "delta"}
#: block types run by Anthropic itself (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview)
_SERVER_BLOCKS = (
    "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
    "bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "mcp_tool_use",
    "mcp_tool_result", "tool_search_tool_result",
)


class AnthropicTranslator(Translator[SSEEvent]):
    """Per-stream state of the Messages event mapping (see the module docstring)."""

    terminal_event = "message_stop"
    mapped_kinds = frozenset({
        "message_start", "content_block_stop", "message_delta", "message_stop", "error",
        "content_block_start:text", "content_block_start:thinking", "content_block_start:tool_use",
        "content_block_delta:text_delta", "content_block_delta:thinking_delta",
        "content_block_delta:signature_delta", "content_block_delta:input_json_delta",
    })
    ignored_kinds: ClassVar[Mapping[str, str]] = {
        "ping": "a keep-alive",
        "content_block_start:redacted_thinking": "encrypted thinking: no readable text for a reasoning block",
        _SKIPPED: "a delta or stop of a block skipped on purpose (server tool, redacted thinking)",
        "content_block_delta:citations_delta": "a citation; the protocol has no place for it, "
                                               "the cited text itself arrives as text_delta",
        **{f"content_block_start:{block}": "a server-side tool Anthropic runs itself; not the harness's to run"
           for block in _SERVER_BLOCKS},
    }
    #: a tool_use block's input, when a server sends it whole in the start event
    whole_fields = frozenset({"content_block.input"})


    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        super().__init__(route, sequencer)
        self._started = False
        self._usage: dict[str, int] = {}
        self._stop_reason: str | None = None
        #: provider index -> "text" | "reasoning" | "tool" for blocks we translate
        self._blocks: dict[int, str] = {}
        #: tool blocks whose start event carried a non-empty input, until a delta comes
        self._start_input: dict[int, object] = {}
        self._handlers: dict[str, Callable[[dict[str, Any]], list[StreamChunk]]] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "message_stop": self._message_stop,
            "error": self._error,
        }

    def decode(self, event: SSEEvent) -> Any:
        payload = parse_json(event.data, route=self.route)
        if not isinstance(payload, dict):
            raise MalformedStreamError(
                f"event is not a JSON object: {event.data[:80]!r}", raw=event.data.encode(), route=self.route
            )
        return payload

    def kinds_in(self, payload: Any, event: SSEEvent) -> tuple[str, ...]:
        # once per event while coverage is collected: answers come from prepared tables
        kind = payload.get("type") or event.event
        nested = _NESTED.get(kind)
        if nested is None:
            if kind == "content_block_stop" and payload.get("index") not in self._blocks:
                return _OF_SKIPPED
            return _PLAIN.get(kind) or (str(kind),)
        if kind == "content_block_delta" and payload.get("index") not in self._blocks:
            return _OF_SKIPPED  # whatever its type: the block it belongs to was skipped on purpose
        inner = payload.get(nested[0])
        sort = inner.get("type") if type(inner) is dict else None
        return nested[1].get(sort) or ((f"{kind}:{sort}",) if isinstance(sort, str) and sort else (kind,))

    def handle(self, payload: Any, event: SSEEvent) -> list[StreamChunk]:
        kind = payload.get("type") or event.event
        handler = self._handlers.get(kind)
        return handler(payload) if handler is not None else []

    @staticmethod
    def _key(index: int) -> Hashable:
        return ("block", index)

    def _message_start(self, payload: dict[str, Any]) -> list[StreamChunk]:
        if not self._started:  # a repeated message_start must not reset anything
            self._started = True
            message = payload.get("message")
            self._take_usage(message.get("usage") if isinstance(message, dict) else None)
        return []

    def _block_start(self, payload: dict[str, Any]) -> list[StreamChunk]:
        index, block = payload.get("index"), payload.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            raise MalformedStreamError(f"content_block_start without index/content_block: {payload}", route=self.route)
        kind, key = block.get("type"), self._key(index)
        if kind == "text":
            self._blocks[index] = "text"
            return self.seq.text(_str(block.get("text")), key=key)
        if kind == "thinking":
            self._blocks[index] = "reasoning"
            return self.seq.reasoning(_str(block.get("thinking")), key=key)
        if kind == "tool_use":
            self._blocks[index] = "tool"
            if block.get("input"):
                self._start_input[index] = block["input"]
            return self.seq.tool_call(key, call_id=_str(block.get("id")), name=_str(block.get("name")))
        return []  # redacted_thinking, server tool blocks and their results: see module docstring

    def _block_delta(self, payload: dict[str, Any]) -> list[StreamChunk]:
        index, delta = payload.get("index"), payload.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict) or index not in self._blocks:
            return []  # a skipped block's delta
        key, kind = self._key(index), delta.get("type")
        if kind == "text_delta":
            return self.seq.text(_str(delta.get("text")), key=key)
        if kind == "thinking_delta":
            return self.seq.reasoning(_str(delta.get("thinking")), key=key)
        if kind == "signature_delta":
            return self.seq.reasoning("", key=key, signature=_str(delta.get("signature")))
        if kind == "input_json_delta" and self._blocks[index] == "tool":
            fragment = _str(delta.get("partial_json"))
            if fragment:
                self._start_input.pop(index, None)
            return self.seq.tool_call(key, arguments=fragment)
        return []  # citations_delta and future delta types carry nothing we map

    def _block_stop(self, payload: dict[str, Any]) -> list[StreamChunk]:
        index = payload.get("index")
        if not isinstance(index, int) or self._blocks.pop(index, None) is None:
            return []
        out: list[StreamChunk] = []
        start_input = self._start_input.pop(index, None)
        if start_input is not None:
            # some Messages-compatible servers send the whole input in the start event
            out += self.seq.tool_call(self._key(index), arguments=orjson.dumps(start_input).decode())
        return out + self.seq.end(self._key(index))

    def _message_delta(self, payload: dict[str, Any]) -> list[StreamChunk]:
        delta = payload.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
            self._stop_reason = delta["stop_reason"]
        self._take_usage(payload.get("usage"))
        return []

    def _message_stop(self, payload: dict[str, Any]) -> list[StreamChunk]:
        usage = Usage(
            input_tokens=self._usage.get("input_tokens", 0),
            output_tokens=self._usage.get("output_tokens", 0),
            cached_input_tokens=self._usage.get("cache_read_input_tokens"),
        )
        return self.finish(usage, self._stop_reason)

    def _error(self, payload: dict[str, Any]) -> list[StreamChunk]:
        raise self.error(payload)

    def _take_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
            value = count(usage.get(name))
            if value is not None:
                self._usage[name] = value


_PLAIN, _NESTED = kind_tables((*AnthropicTranslator.mapped_kinds, *AnthropicTranslator.ignored_kinds), _TYPED)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


# -- adapter -------------------------------------------------------------------------


class AnthropicAdapter(HttpAdapter[SSEEvent]):
    """Anthropic Messages streaming (``POST /v1/messages``)."""

    route: ClassVar[str] = "anthropic"
    default_base_url: ClassVar[str | None] = "https://api.anthropic.com"
    decoder_class = CutAwareSSEDecoder
    translator_class = AnthropicTranslator

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        headers = {
            "x-api-key": self.api_key,
            "anthropic-version": API_VERSION,
            "accept": "text/event-stream",
        }
        return StreamRequest(
            route=self.route,
            url=f"{self.base_url}/v1/messages",
            headers=self.request_headers(headers),
            json=request_body(options),
        )
