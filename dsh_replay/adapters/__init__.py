"""The shipped provider adapters, one module per provider, and the blocks to write your own.

============================  ==========================  ===================================
route                         class                       wire format
============================  ==========================  ===================================
``openai``                    ``OpenAIChatAdapter``       Chat Completions SSE
``openai-compatible``         ``OpenAICompatibleAdapter`` same, ``base_url`` required
``deepseek``                  ``DeepSeekAdapter``         Chat Completions SSE + reasoning
``openai-responses``          ``OpenAIResponsesAdapter``  Responses API SSE
``anthropic``                 ``AnthropicAdapter``        Messages SSE
``gemini``                    ``GeminiAdapter``           ``streamGenerateContent?alt=sse``
``ollama``                    ``OllamaAdapter``           ``/api/chat`` NDJSON
============================  ==========================  ===================================

Provider modules are imported on first use so that ``import dsh_replay`` stays
light.

This module is also the public surface for adapter authors: everything a
provider module of your own needs is importable from here (and nothing under
``dsh_replay.adapters._base`` or ``dsh_replay.wire`` needs to be).

- :class:`HttpAdapter` — the adapter base: subclass it with ``route``,
  ``default_base_url``, ``decoder_class``, ``translator_class`` and a
  ``build_request(options) -> StreamRequest`` (the request mapping);
- :class:`Translator` — the event mapping: ``event(event) -> list[StreamChunk]``
  with the :class:`BlockSequencer` as ``self.seq``, ``self.finish(usage, raw)``
  on the terminal event, ``raise self.error(payload)`` on an error event;
- :class:`StreamRequest`, :class:`RetryPolicy`, :data:`DEFAULT_RETRY` — what to
  send, and how failures before the first byte are retried;
- :class:`CutAwareSSEDecoder`, :class:`CutAwareNDJSONDecoder` (and the plain
  :class:`SSEDecoder`, :class:`NDJSONDecoder`, :class:`SSEEvent`) — body framing;
- :func:`error_from_payload`, :func:`error_from_response` — provider error bodies
  to the typed :class:`~dsh_replay.ProviderError` subclasses;
- :func:`parse_json`, :func:`count`, :func:`merge_extra`, :func:`history_arguments`
  — small mapping helpers.

A minimal provider module::

    from dsh_replay import GenerateOptions, SSEEvent, StreamChunk, Usage
    from dsh_replay.adapters import CutAwareSSEDecoder, HttpAdapter, StreamRequest, Translator, parse_json

    class MyTranslator(Translator[SSEEvent]):
        terminal_event = "`done`"

        def event(self, event: SSEEvent) -> list[StreamChunk]:
            payload = parse_json(event.data, route=self.route)
            if event.event == "done":
                return self.finish(Usage(input_tokens=0, output_tokens=0), payload.get("stop"))
            return self.seq.text(payload.get("text") or "")

    class MyAdapter(HttpAdapter[SSEEvent]):
        route = "mine"
        default_base_url = "https://api.example.com"
        decoder_class = CutAwareSSEDecoder
        translator_class = MyTranslator

        def build_request(self, options: GenerateOptions) -> StreamRequest:
            return StreamRequest(route=self.route, url=f"{self.base_url}/v1/stream",
                                 headers=self.request_headers({"Authorization": f"Bearer {self.api_key}"}),
                                 json={"model": options.model, "stream": True})

``examples/cohere`` is a complete one, recorded and checked.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..wire.ndjson import NDJSONDecoder
    from ..wire.provider_errors import error_from_payload, error_from_response
    from ..wire.sequencer import BlockSequencer
    from ..wire.sse import SSEDecoder, SSEEvent
    from ..wire.transport import DEFAULT_RETRY, RetryPolicy, StreamRequest
    from ._base import (
        CutAwareNDJSONDecoder,
        CutAwareSSEDecoder,
        HttpAdapter,
        Translator,
        count,
        history_arguments,
        merge_extra,
        parse_json,
    )
    from .anthropic import AnthropicAdapter
    from .deepseek import DeepSeekAdapter
    from .gemini import GeminiAdapter
    from .ollama import OllamaAdapter
    from .openai_chat import OpenAIChatAdapter, OpenAICompatibleAdapter
    from .openai_responses import OpenAIResponsesAdapter

#: route -> (module, class name, environment variable holding the key)
BUILTIN_ROUTES: dict[str, tuple[str, str, str]] = {
    "openai": ("openai_chat", "OpenAIChatAdapter", "OPENAI_API_KEY"),
    "openai-compatible": ("openai_chat", "OpenAICompatibleAdapter", "OPENAI_COMPATIBLE_API_KEY"),
    "deepseek": ("deepseek", "DeepSeekAdapter", "DEEPSEEK_API_KEY"),
    "openai-responses": ("openai_responses", "OpenAIResponsesAdapter", "OPENAI_API_KEY"),
    "anthropic": ("anthropic", "AnthropicAdapter", "ANTHROPIC_API_KEY"),
    "gemini": ("gemini", "GeminiAdapter", "GEMINI_API_KEY"),
    "ollama": ("ollama", "OllamaAdapter", "OLLAMA_API_KEY"),
}

__all__ = [
    "BUILTIN_ROUTES",
    "DEFAULT_RETRY",
    "AnthropicAdapter",
    "BlockSequencer",
    "CutAwareNDJSONDecoder",
    "CutAwareSSEDecoder",
    "DeepSeekAdapter",
    "GeminiAdapter",
    "HttpAdapter",
    "NDJSONDecoder",
    "OllamaAdapter",
    "OpenAIChatAdapter",
    "OpenAICompatibleAdapter",
    "OpenAIResponsesAdapter",
    "RetryPolicy",
    "SSEDecoder",
    "SSEEvent",
    "StreamRequest",
    "Translator",
    "adapter_class",
    "count",
    "error_from_payload",
    "error_from_response",
    "history_arguments",
    "merge_extra",
    "parse_json",
]

# name -> module it lives in; imported on first use, so the route table and
# ``dsh-replay routes`` read BUILTIN_ROUTES without loading httpx or any adapter
_LAZY = {cls: module for module, cls, _ in BUILTIN_ROUTES.values()}
_LAZY.update(dict.fromkeys(["DEFAULT_RETRY", "RetryPolicy", "StreamRequest"], "..wire.transport"))
_LAZY.update({"BlockSequencer": "..wire.sequencer", "NDJSONDecoder": "..wire.ndjson", "SSEDecoder": "..wire.sse",
              "SSEEvent": "..wire.sse", "error_from_payload": "..wire.provider_errors",
              "error_from_response": "..wire.provider_errors"})
_LAZY.update(dict.fromkeys(["CutAwareNDJSONDecoder", "CutAwareSSEDecoder", "HttpAdapter", "Translator", "count",
                            "history_arguments", "merge_extra", "parse_json"], "._base"))


def adapter_class(route: str) -> type[Any]:
    """The adapter class of a built-in route (``KeyError`` if there is none)."""
    module, name, _ = BUILTIN_ROUTES[route]
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        where = _LAZY[name]
        value = getattr(importlib.import_module(where if where.startswith(".") else f".{where}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
