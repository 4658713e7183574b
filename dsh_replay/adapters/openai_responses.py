"""OpenAI Responses API (route ``openai-responses``).

Request mapping
---------------
``POST {base_url}/responses`` with ``stream: true``
(https://platform.openai.com/docs/api-reference/responses/create). The whole
conversation goes in ``input`` as items, in order: ``message`` items for
system/user/assistant text, a ``function_call`` item (with ``call_id``) per
assistant tool call, a ``function_call_output`` item per tool result. System
messages stay ``role: "system"`` message items *in their place* rather than
moving to ``instructions``: a conversation may carry several, mid-way, and the
API treats both forms as the same system prompt. Tools are flat
``{"type": "function", name, description, parameters, "strict": false}``:
``strict`` defaults to *true* in this API, which rejects ordinary JSON schemas
(optional properties, no ``additionalProperties: false``), so it is turned off
explicitly; pass your own ``tools`` in ``options.extra`` to opt in.
``max_tokens`` is sent as ``max_output_tokens``; ``options.extra`` is merged last
(``None`` removes a key).

Event mapping
-------------
Events are typed (https://platform.openai.com/docs/api-reference/responses-streaming).
OpenAI sends ``event: <type>`` lines; OpenRouter omits them and ends with
``data: [DONE]``, so dispatch is on the payload's ``type``. Output items are
known by ``item_id`` (deltas) / ``item.id`` (``output_item.added``), with
``output_index`` as the fallback:

- ``response.output_text.delta`` / ``response.refusal.delta`` → text, one block per
  message content part;
- ``response.reasoning_summary_text.delta`` (one block per summary part) and
  ``response.reasoning_text.delta`` (raw reasoning: DeepSeek, OpenRouter) → reasoning;
- a ``function_call`` item → a tool-call block: ``call_id`` is the CallId (the
  item's own ``fc_…`` id only links the argument deltas to it), ``name`` comes
  from ``output_item.added``, arguments from ``function_call_arguments.delta``;
  the block ends at ``output_item.done``.
- a ``custom_tool_call`` item (a free-form tool such as ``apply_patch``,
  https://platform.openai.com/docs/guides/function-calling#custom-tools) → a
  tool-call block the same way (``call_id``, ``name``), whose arguments are the
  JSON object ``{"input": "<the free text>"}``: the protocol's arguments are
  JSON text, and the harness gets the text back from one known key. The
  ``argumentsDelta`` pieces are built so that they concatenate to exactly that
  object (rule P7): the first piece opens it (``{"input":"``), each
  ``custom_tool_call_input.delta`` adds its text JSON-escaped (escaping works
  character by character, so escaped pieces join into the escaped whole), and
  ``output_item.done`` closes it (``"}``). Input that comes only whole (in
  ``output_item.added``, ``custom_tool_call_input.done`` or ``output_item.done``)
  is one piece. A call cut by the terminal event is closed there, so its
  arguments stay valid JSON; the finish is ``tool-calls`` as for any call.
- Server-side tool items
  (``web_search_call``, ``file_search_call``, ``code_interpreter_call``, MCP …)
  are executed by OpenAI and never become tool-call blocks; the text they lead
  to is ordinary output text.

Wire coverage: ``ResponsesTranslator.mapped_kinds`` and ``ignored_kinds``
list every event type this mapping handles or skips on purpose (lifecycle
events, ``*.done`` events repeating their deltas, citations, server-side tool
progress); ``output_item`` events are told apart by the item's type
(``response.output_item.added:custom_tool_call``).

Terminal events: ``response.completed`` (usage; ``raw`` = ``"completed"``) and
``response.incomplete`` (usage; ``raw`` = ``incomplete_details.reason``, e.g.
``max_output_tokens``). ``error`` and ``response.failed`` raise the typed
:class:`ProviderError`. Usage comes only in the terminal event
(``input_tokens``, ``output_tokens``, ``input_tokens_details.cached_tokens``,
``output_tokens_details.reasoning_tokens``); a terminal event without usage
gives zeros. A stream that ends without a terminal event — even after
OpenRouter's ``[DONE]`` — raises :class:`StreamInterruptedError`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar

import orjson

from ..errors import MalformedStreamError
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
from ._coverage import kind_tables

__all__ = ["OpenAIResponsesAdapter", "ResponsesTranslator"]

# -- request mapping -------------------------------------------------------------------


def input_items(message: Message) -> list[dict[str, Any]]:
    """The Responses ``input`` items for one history message."""
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.call_id, "output": message.content}]
    items: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        items.append({"type": "message", "role": message.role, "content": message.content})
    items += [
        {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments}
        for call in message.tool_calls
    ]
    return items


def function_tool(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
        "strict": False,
    }


# -- event mapping -------------------------------------------------------------------------


def responses_usage(response: object) -> Usage:
    """Usage of a terminal event's ``response`` (zeros when the provider sent none)."""
    raw = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(raw, dict):
        return Usage(input_tokens=0, output_tokens=0)
    input_details = raw.get("input_tokens_details")
    output_details = raw.get("output_tokens_details")
    return Usage(
        input_tokens=count(raw.get("input_tokens")) or 0,
        output_tokens=count(raw.get("output_tokens")) or 0,
        cached_input_tokens=count(input_details.get("cached_tokens")) if isinstance(input_details, dict) else None,
        reasoning_tokens=count(output_details.get("reasoning_tokens")) if isinstance(output_details, dict) else None,
    )


#: server-side tools OpenAI runs itself: their items and progress events never become tool-call blocks
_SERVER_TOOLS = ("web_search_call", "file_search_call", "code_interpreter_call", "mcp_call", "mcp_list_tools")
_SERVER_TOOL = "a server-side tool OpenAI runs itself; the text it leads to arrives as output text"
_REPEATS = "repeats what its deltas carried"
#: what a custom tool call's arguments are: ``{"input": "<the free text>"}``, opened and closed around the deltas
_CUSTOM_OPEN, _CUSTOM_CLOSE = '{"input":"', '"}'
_DONE = "[DONE]"


def _escaped(text: str) -> str:
    """``text`` as it stands inside a JSON string: escaping is per character, so the pieces of a
    text, escaped one by one, join into the escaped whole."""
    return orjson.dumps(text)[1:-1].decode()


class ResponsesTranslator(Translator[SSEEvent]):
    """Responses API events → sequencer calls (see the module docstring)."""

    terminal_event = "response.completed (or response.incomplete)"
    mapped_kinds = frozenset({
        *(f"response.output_item.added:{item}" for item in ("message", "reasoning", "function_call", "custom_tool_call")),
        "response.output_item.done:function_call", "response.output_item.done:custom_tool_call",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
        "response.output_text.delta", "response.refusal.delta",
        "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
        "response.completed", "response.incomplete", "response.failed", "error",
    })
    ignored_kinds: ClassVar[Mapping[str, str]] = {
        _DONE: "OpenRouter's end sentinel; only a response.* terminal event ends the stream",
        "response.created": "the response object before any output (status, echo of the request)",
        "response.in_progress": "the response object before any output (status, echo of the request)",
        "response.queued": "background mode's status before generation starts",
        "response.output_item.done:message": "the text came in response.output_text.delta",
        "response.output_item.done:reasoning": "the reasoning came in its text or summary deltas",
        "response.content_part.added": "opens a content part whose text arrives in deltas",
        "response.content_part.done": _REPEATS,
        "response.output_text.done": _REPEATS,
        "response.refusal.done": _REPEATS,
        "response.reasoning_summary_part.added": "opens a summary part whose text arrives in deltas",
        "response.reasoning_summary_part.done": _REPEATS,
        "response.reasoning_summary_text.done": _REPEATS,
        "response.reasoning_text.done": _REPEATS,
        "response.output_text.annotation.added": "a citation (URL, file); the protocol has no place for it, "
                                                 "the cited text itself arrives in output_text.delta",
        **{f"response.output_item.{step}:{item}": _SERVER_TOOL for item in _SERVER_TOOLS for step in ("added", "done")},
        **{f"response.{item}.{phase}": _SERVER_TOOL for item in _SERVER_TOOLS
           for phase in ("in_progress", "searching", "interpreting", "completed", "failed")},
        "response.code_interpreter_call_code.delta": _SERVER_TOOL,
        "response.code_interpreter_call_code.done": _SERVER_TOOL,
        "response.mcp_call_arguments.delta": _SERVER_TOOL,
        "response.mcp_call_arguments.done": _SERVER_TOOL,
    }

    def __init__(self, route: str, sequencer: BlockSequencer) -> None:
        super().__init__(route, sequencer)
        self._ids: dict[int, str] = {}  # output_index -> item id
        self._calls: dict[str, Hashable] = {}  # item id -> tool-call key
        self._with_arguments: set[str] = set()  # call items whose arguments (custom: input) arrived
        self._custom: dict[str, bool] = {}  # custom_tool_call item id -> its arguments are closed

    def decode(self, event: SSEEvent) -> Any:
        if event.data.strip() == _DONE:
            return _DONE
        payload = parse_json(event.data, route=self.route)
        if not isinstance(payload, dict):
            raw = event.data.encode()
            raise MalformedStreamError(f"an event is not a JSON object: {raw[:80]!r}", raw=raw, route=self.route)
        return payload

    def kinds_in(self, payload: Any, event: SSEEvent) -> tuple[str, ...]:
        # once per event while coverage is collected: answers come from prepared tables
        if payload is _DONE:
            return (_DONE,)
        kind = payload.get("type") or event.event
        nested = _NESTED.get(kind)
        if nested is None:
            return _PLAIN.get(kind) or (str(kind),)
        item = payload.get(nested[0])
        sort = item.get("type") if type(item) is dict else None
        return nested[1].get(sort) or ((f"{kind}:{sort}",) if isinstance(sort, str) and sort else (kind,))

    def handle(self, payload: Any, event: SSEEvent) -> list[StreamChunk]:
        if payload is _DONE:
            return []  # OpenRouter's sentinel; only a response.* terminal event ends the stream
        kind = nonempty_str(payload.get("type")) or event.event
        if kind == "error":
            raise self.error(payload)
        handler = self._HANDLERS.get(kind)
        return handler(self, payload) if handler is not None else []

    # -- items ---------------------------------------------------------------------------

    def _ref(self, payload: Mapping[str, Any]) -> str:
        """The item an event belongs to: its ``item_id``, else what sits at ``output_index``."""
        index = payload.get("output_index")
        return nonempty_str(payload.get("item_id")) or self._ids.get(index if type(index) is int else -1) or f"#{index}"

    def _item_added(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        item = payload.get("item")
        if not isinstance(item, dict):
            return []
        index = payload.get("output_index")
        ref = nonempty_str(item.get("id")) or f"#{index}"
        if type(index) is int:
            self._ids[index] = ref
        sort = item.get("type")
        if sort == "custom_tool_call":
            return self._input(ref, item.get("input"), item)
        if sort != "function_call":
            return []  # messages and reasoning stream through their deltas; server tools are not ours
        self._calls[ref] = ("call", ref)
        return self._arguments(ref, item.get("arguments"), item)

    def _arguments(self, ref: str, text: object, item: Mapping[str, Any] | None = None) -> list[StreamChunk]:
        key = self._calls.setdefault(ref, ("call", ref))
        if nonempty_str(text):
            self._with_arguments.add(ref)
        return self.seq.tool_call(
            key,
            call_id=nonempty_str(item.get("call_id")) if item else None,
            name=nonempty_str(item.get("name")) if item else None,
            arguments=nonempty_str(text) or "",
        )

    def _arguments_delta(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        return self._arguments(self._ref(payload), payload.get("delta"))

    def _arguments_done(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        # servers that skip the deltas still send the whole arguments here
        ref = self._ref(payload)
        if ref in self._with_arguments:
            return []
        return self._arguments(ref, payload.get("arguments"))

    def _item_done(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        item = payload.get("item")
        if not isinstance(item, dict) or item.get("type") not in ("function_call", "custom_tool_call"):
            return []
        ref = nonempty_str(item.get("id")) or self._ref(payload)
        custom = item.get("type") == "custom_tool_call"
        # the whole arguments (input) when no delta brought them; id and name again, so that an
        # item whose output_item.added was missed can still open
        late = None if ref in self._with_arguments else item.get("input" if custom else "arguments")
        opened = self._input(ref, late, item) + self._close_input(ref) if custom else self._arguments(ref, late, item)
        return opened + self.seq.end(self._calls[ref])

    # -- custom (free-form) tool calls --------------------------------------------------------

    def _input(self, ref: str, text: object, item: Mapping[str, Any] | None = None) -> list[StreamChunk]:
        """A piece of a custom call's free-text input, as the next piece of ``{"input":"..."}``."""
        key = self._calls.setdefault(ref, ("call", ref))
        piece = ""
        if ref not in self._custom:
            self._custom[ref] = False
            piece = _CUSTOM_OPEN
        if nonempty_str(text):
            self._with_arguments.add(ref)
            piece += _escaped(str(text))
        return self.seq.tool_call(
            key,
            call_id=nonempty_str(item.get("call_id")) if item else None,
            name=nonempty_str(item.get("name")) if item else None,
            arguments=piece,
        )

    def _close_input(self, ref: str) -> list[StreamChunk]:
        if self._custom.get(ref) is not False:
            return []
        self._custom[ref] = True
        return self.seq.tool_call(self._calls[ref], arguments=_CUSTOM_CLOSE)

    def _input_delta(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        return self._input(self._ref(payload), payload.get("delta"))

    def _input_done(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        ref = self._ref(payload)
        return [] if ref in self._with_arguments else self._input(ref, payload.get("input"))

    # -- text and reasoning -----------------------------------------------------------------

    def _text(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        key = ("text", self._ref(payload), payload.get("content_index"))
        return self.seq.text(nonempty_str(payload.get("delta")) or "", key=key)

    def _summary(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        key = ("summary", self._ref(payload), payload.get("summary_index"))
        return self.seq.reasoning(nonempty_str(payload.get("delta")) or "", key=key)

    def _reasoning_text(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        key = ("reasoning", self._ref(payload), payload.get("content_index"))
        return self.seq.reasoning(nonempty_str(payload.get("delta")) or "", key=key)

    # -- terminal events ----------------------------------------------------------------------

    def _terminal(self, usage: Usage, raw: str) -> list[StreamChunk]:
        # a custom call cut by the end of the response still gets valid JSON arguments: its
        # free text is only shorter, and the raw reason says why
        out = [chunk for ref in list(self._custom) for chunk in self._close_input(ref)]
        return out + self.finish(usage, raw)

    def _completed(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        response = payload.get("response")
        status = response.get("status") if isinstance(response, dict) else None
        return self._terminal(responses_usage(response), nonempty_str(status) or "completed")

    def _incomplete(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        response = payload.get("response")
        details = response.get("incomplete_details") if isinstance(response, dict) else None
        reason = nonempty_str(details.get("reason")) if isinstance(details, dict) else None
        return self._terminal(responses_usage(response), reason or "incomplete")

    def _failed(self, payload: Mapping[str, Any]) -> list[StreamChunk]:
        response = payload.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        raise self.error(error if isinstance(error, dict) else payload)

    _HANDLERS: ClassVar[dict[str, Callable[[ResponsesTranslator, Mapping[str, Any]], list[StreamChunk]]]] = {
        "response.output_item.added": _item_added,
        "response.output_item.done": _item_done,
        "response.function_call_arguments.delta": _arguments_delta,
        "response.function_call_arguments.done": _arguments_done,
        "response.custom_tool_call_input.delta": _input_delta,
        "response.custom_tool_call_input.done": _input_done,
        "response.output_text.delta": _text,
        "response.refusal.delta": _text,
        "response.reasoning_summary_text.delta": _summary,
        "response.reasoning_text.delta": _reasoning_text,
        "response.completed": _completed,
        "response.incomplete": _incomplete,
        "response.failed": _failed,
    }


#: output_item events are known by the type of their item too
_PLAIN, _NESTED = kind_tables((*ResponsesTranslator.mapped_kinds, *ResponsesTranslator.ignored_kinds),
                              {"response.output_item.added": "item", "response.output_item.done": "item"})


# -- adapter -------------------------------------------------------------------------------


class OpenAIResponsesAdapter(HttpAdapter[SSEEvent]):
    """OpenAI Responses API, streamed (route ``openai-responses``).

    ``OpenAIResponsesAdapter(api_key, *, base_url=None, client=None,
    drop_reasoning=False, retry=DEFAULT_RETRY, read_timeout=60.0, headers=None)``;
    the key goes in the ``Authorization: Bearer`` header only.
    """

    route: ClassVar[str] = "openai-responses"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    decoder_class = CutAwareSSEDecoder
    translator_class = ResponsesTranslator

    def build_request(self, options: GenerateOptions) -> StreamRequest:
        body: dict[str, Any] = {
            "model": options.model,
            "input": [item for message in options.messages for item in input_items(message)],
            "stream": True,
        }
        if options.tools:
            body["tools"] = [function_tool(tool) for tool in options.tools]
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.max_tokens is not None:
            body["max_output_tokens"] = options.max_tokens
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept": "text/event-stream"}
        return StreamRequest(
            route=self.route,
            url=f"{self.base_url}/responses",
            headers=self.request_headers(headers),
            json=merge_extra(body, options.extra),
        )
