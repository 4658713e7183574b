"""The shipped provider adapters, one module per provider.

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
light. The building blocks for writing an adapter of your own are public here
too: :class:`HttpAdapter` (request mapping + event mapping over the shared
streaming transport), :class:`Translator`, :class:`StreamRequest`,
:class:`RetryPolicy`, the cut-aware decoders and small mapping helpers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    "CutAwareNDJSONDecoder",
    "CutAwareSSEDecoder",
    "DeepSeekAdapter",
    "GeminiAdapter",
    "HttpAdapter",
    "OllamaAdapter",
    "OpenAIChatAdapter",
    "OpenAICompatibleAdapter",
    "OpenAIResponsesAdapter",
    "RetryPolicy",
    "StreamRequest",
    "Translator",
    "adapter_class",
    "count",
    "history_arguments",
    "merge_extra",
    "parse_json",
]

# name -> module it lives in; imported on first use, so the route table and
# ``dsh-replay routes`` read BUILTIN_ROUTES without loading httpx or any adapter
_LAZY = {cls: module for module, cls, _ in BUILTIN_ROUTES.values()}
_LAZY.update(dict.fromkeys(["DEFAULT_RETRY", "RetryPolicy", "StreamRequest"], "..wire.transport"))
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
