"""DeepSeek (route ``deepseek``): Chat Completions with ``reasoning_content``.

DeepSeek speaks the OpenAI Chat Completions wire format
(https://api-docs.deepseek.com/api/create-chat-completion), so this adapter is
the chat adapter with DeepSeek's defaults; the shared
:class:`~dsh_replay.adapters.openai_chat.ChatTranslator` already maps what is
DeepSeek's own:

- ``delta.reasoning_content`` (deepseek-reasoner, thinking mode) becomes a
  reasoning block, streamed before the answer while ``content`` is ``null``
  (https://api-docs.deepseek.com/guides/reasoning_model);
- usage rides on the ``finish_reason`` chunk, with the context-cache counts
  ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens``; the hits are
  ``cachedInputTokens`` (https://api-docs.deepseek.com/guides/kv_cache).

The request sends ``max_tokens`` (DeepSeek has no ``max_completion_tokens``).
"""

from __future__ import annotations

from typing import ClassVar

from .openai_chat import OpenAIChatAdapter

__all__ = ["DeepSeekAdapter"]


class DeepSeekAdapter(OpenAIChatAdapter):
    """DeepSeek chat, streamed (route ``deepseek``).

    ``DeepSeekAdapter(api_key, *, base_url=None, client=None, drop_reasoning=False,
    retry=DEFAULT_RETRY, read_timeout=60.0, headers=None)``; the key goes in the
    ``Authorization: Bearer`` header only.
    """

    route: ClassVar[str] = "deepseek"
    default_base_url: ClassVar[str | None] = "https://api.deepseek.com"
    max_tokens_field: ClassVar[str] = "max_tokens"
