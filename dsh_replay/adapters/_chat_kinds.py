"""The kinds of a Chat Completions chunk, for wire coverage (see ``openai_chat``'s module docstring).

A chunk's kinds are what it carries: each ``delta.<field>`` of choice 0 whose
value is truthy (``null``, ``""``, ``[]`` and ``{}`` carry nothing: DeepSeek
sends ``"reasoning_content": null`` in every chunk), its ``finish_reason``, a
``usage`` (top level or Groq's ``x_groq.usage``), another choice; or
``[DONE]``, or ``error``. This runs once per event while coverage is collected,
so the usual chunk (one choice, one field in its delta, nothing else) is
answered first, from prepared tuples, and the rest by :func:`any_chunk_kinds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..wire.sse import SSEEvent

__all__ = ["DONE", "NOTHING", "OTHER_CHOICE", "any_chunk_kinds", "chunk_kinds"]

DONE = "[DONE]"
OTHER_CHOICE = "choices[index>0]"
NOTHING = "chunk without choice or usage"
_NOTHING_KINDS = (NOTHING,)
_DELTA_KINDS = {key: (f"delta.{key}",) for key in (
    "role", "content", "tool_calls", "refusal", "reasoning_content", "reasoning", "reasoning_details")}


def chunk_kinds(payload: Any, event: SSEEvent) -> tuple[str, ...]:
    """The kinds of one decoded chunk (``DONE`` for ``data: [DONE]``)."""
    if payload is DONE:
        return (DONE,)
    choices = payload.get("choices")
    if type(choices) is list and len(choices) == 1:
        choice = choices[0]
        if type(choice) is dict:
            delta = choice.get("delta")
            if type(delta) is dict and len(delta) == 1 and not (
                choice.get("finish_reason") or choice.get("index")
                or payload.get("usage") or payload.get("error") or "x_groq" in payload
            ):
                (key,) = delta
                if delta[key]:
                    return _DELTA_KINDS.get(key) or (f"delta.{key}",)
    return any_chunk_kinds(payload, event)


def any_chunk_kinds(payload: Mapping[str, Any], event: SSEEvent) -> tuple[str, ...]:
    """The kinds of any chunk, the slow way."""
    if payload.get("error"):
        return ("error",)
    kinds: list[str] = []
    choices = payload.get("choices")
    for choice in choices if type(choices) is list else ():
        if type(choice) is not dict:
            continue
        if choice.get("index"):
            kinds.append(OTHER_CHOICE)
            continue
        delta = choice.get("delta")
        if type(delta) is dict:
            kinds += [f"delta.{key}" for key, value in delta.items() if value]
        if choice.get("finish_reason"):
            kinds.append("finish_reason")
    if payload.get("usage") or _groq_usage(payload):
        kinds.append("usage")
    if kinds:
        return tuple(kinds)
    return ("error",) if event.event == "error" else _NOTHING_KINDS


def _groq_usage(payload: Mapping[str, Any]) -> bool:
    groq = payload.get("x_groq")
    return isinstance(groq, dict) and isinstance(groq.get("usage"), dict)
