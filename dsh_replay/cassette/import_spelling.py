"""Spellings of one request that a provider reads alike, rewritten as the route's adapter writes them.

A recorded request may say in another way what the adapter says: the OpenAI
SDK omits an assistant turn's ``content`` when the turn only calls tools (the
Chat adapter sends ``null``), SDKs send a text as a list of one text part (the
adapters send the string), the Responses SDK's short form of a message has no
``type``. Replay compares requests as data, so ``dsh-replay import`` keeps such
a request as the adapter writes it, and names every field it rewrote.

Only what the provider documents as the same request is rewritten: an omitted
nullable field, a string that is documented shorthand for one text part, a
``type`` that is the default. Two text parts, a part with ``cache_control`` or
any other key, any other field: left as recorded, for the reverse mapping and
the check to take or refuse. A changed prompt still changes the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["respell"]

_CHAT_ROUTES = frozenset({"openai", "openai-compatible", "deepseek"})
#: why each respelling is the same request (the route's adapter is named in the note)
_NULL_CONTENT = ("omitted in the recording and null in the {route} adapter's request; an assistant turn that calls "
                 "tools needs no content and the API reads both alike, so the case keeps null")
_ONE_PART = ("a list of one text part in the recording and a string in the {route} adapter's request; the API reads "
             "a string as one text part, so the case keeps the string")
_SHORT_FORM = ("the SDK's short form of a message (no type) in the recording; the {route} adapter writes the same "
               "message with type 'message', so the case does")


def respell(route: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``body`` written as the ``route`` adapter writes the same request, and a note per kind of change.

    Only spellings the provider documents as the same request are rewritten (see
    the module docstring); ``body`` itself is left as it is.
    """
    out = dict(body)
    changed: dict[str, list[str]] = {}
    if route in _CHAT_ROUTES:
        _chat_spelling(out, changed)
    elif route == "openai-responses":
        _responses_spelling(out, changed)
    elif route == "anthropic":
        _anthropic_spelling(out, changed)
    notes = []
    for why, paths in changed.items():
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        notes.append(f"request field {shown} is {why.format(route=route)}")
    return out, notes


def _list(body: dict[str, Any], key: str) -> list[Any]:
    """The list field ``key`` of ``body``, copied into it (so that changing it leaves the recording alone)."""
    value = body.get(key)
    if not isinstance(value, list):
        return []
    body[key] = value = list(value)
    return value


def _one_text(content: Any, kind: str) -> str | None:
    """The text of a content list of exactly one plain text part of type ``kind``; ``None`` for anything else."""
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        part = content[0]
        if part.get("type") == kind and set(part) == {"type", "text"} and isinstance(part["text"], str):
            return part["text"]
    return None


def _chat_spelling(body: dict[str, Any], changed: dict[str, list[str]]) -> None:
    messages = _list(body, "messages")
    for n, item in enumerate(messages):
        if (isinstance(item, Mapping) and item.get("role") == "assistant" and "content" not in item
                and isinstance(item.get("tool_calls"), list) and item["tool_calls"]):
            messages[n] = {**item, "content": None}
            changed.setdefault(_NULL_CONTENT, []).append(f"messages[{n}].content")


def _responses_spelling(body: dict[str, Any], changed: dict[str, list[str]]) -> None:
    items = _list(body, "input")
    for n, item in enumerate(items):
        if not isinstance(item, Mapping) or "role" not in item or item.get("type", "message") != "message":
            continue
        if "type" not in item:
            item = {"type": "message", **item}
            changed.setdefault(_SHORT_FORM, []).append(f"input[{n}]")
        text = _one_text(item.get("content"), "output_text" if item.get("role") == "assistant" else "input_text")
        if text is not None:
            item = {**item, "content": text}
            changed.setdefault(_ONE_PART, []).append(f"input[{n}].content")
        items[n] = item


def _anthropic_spelling(body: dict[str, Any], changed: dict[str, list[str]]) -> None:
    system = _one_text(body.get("system"), "text")
    if system is not None:
        body["system"] = system
        changed.setdefault(_ONE_PART, []).append("system")
    for n, item in enumerate(_list(body, "messages")):
        if not isinstance(item, Mapping):
            continue
        text = _one_text(item.get("content"), "text")
        if text is not None:
            body["messages"][n] = {**item, "content": text}
            changed.setdefault(_ONE_PART, []).append(f"messages[{n}].content")
        elif isinstance(item.get("content"), list):  # tool results, whose content is text or text parts too
            blocks = list(item["content"])
            for m, block in enumerate(blocks):
                result = _one_text(block.get("content"), "text") if isinstance(block, Mapping) else None
                if result is not None and block.get("type") == "tool_result":
                    blocks[m] = {**block, "content": result}
                    body["messages"][n] = {**item, "content": blocks}
                    changed.setdefault(_ONE_PART, []).append(f"messages[{n}].content[{m}].content")
