"""The provider-agnostic request: GenerateOptions, Message, ToolDefinition.

They serialize to plain JSON (``to_json`` / ``from_json``) because cassettes
store the options of the recorded call, so a case can be replayed without the
test function that made it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._chunks import CallId, ReasoningBlock
from ._exceptions import ConfigError
from ._fields import (
    FieldError,
    check,
    is_int,
    is_list,
    is_mapping,
    is_name,
    is_number,
    is_text,
    or_null,
    read,
    refuse_unknown,
)

__all__ = ["GenerateOptions", "Message", "MessageToolCall", "Role", "ToolDefinition"]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageToolCall:
    """A tool call the assistant made earlier in the conversation (history)."""

    id: CallId
    name: str
    arguments: str = "{}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One conversation message.

    ``assistant`` messages may carry ``tool_calls``, and the ``reasoning`` blocks
    the turn produced (a provider that signs its reasoning, like Anthropic's
    extended thinking, wants them back with their signatures when the turn
    called tools); ``tool`` messages carry the ``call_id`` they answer and the
    result in ``content``.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[MessageToolCall, ...] = ()
    call_id: CallId | None = None
    name: str | None = None
    reasoning: tuple[ReasoningBlock, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ConfigError(f"message role must be one of {', '.join(_ROLES)}; got {self.role!r}")
        if self.role == "tool" and not self.call_id:
            raise ConfigError("a tool message needs the call_id of the tool call it answers")
        if self.tool_calls and self.role != "assistant":
            raise ConfigError(f"only assistant messages carry tool_calls; got role {self.role!r}")
        if self.reasoning and self.role != "assistant":
            raise ConfigError(f"only assistant messages carry reasoning; got role {self.role!r}")
        # accept any sequence from callers, store a tuple so the value stays hashable/frozen
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "reasoning", tuple(self.reasoning))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["toolCalls"] = [call.to_json() for call in self.tool_calls]
        if self.call_id is not None:
            out["callId"] = self.call_id
        if self.name is not None:
            out["name"] = self.name
        if self.reasoning:
            out["reasoning"] = [
                {"text": r.text, **({"signature": r.signature} if r.signature is not None else {})}
                for r in self.reasoning
            ]
        return out

    @classmethod
    def from_json(cls, data: object, path: str = "message") -> Message:
        """A message from its JSON; a malformed one raises ``ConfigError`` naming the field at ``path``."""
        try:
            raw = _object(data, path, ("role", "content", "toolCalls", "callId", "name", "reasoning"))
            call_id = read(raw, "callId", path, "a string or null", or_null(is_text), None)
            values: dict[str, Any] = {
                "role": read(raw, "role", path, f"one of {', '.join(_ROLES)}", lambda role: role in _ROLES),
                "content": read(raw, "content", path, "a string", is_text, ""),
                "tool_calls": tuple(_tool_call(c, where) for c, where in _items(raw, "toolCalls", path)),
                "call_id": CallId(call_id) if call_id is not None else None,
                "name": read(raw, "name", path, "a string or null", or_null(is_text), None),
                "reasoning": tuple(_reasoning(r, where) for r, where in _items(raw, "reasoning", path)),
            }
            return cls(**values)
        except FieldError as exc:
            raise ConfigError(str(exc)) from None
        except ConfigError as exc:  # the message's own rules (a tool message's call id...) name no field
            raise ConfigError(f"{path}: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A tool the model may call: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}

    @classmethod
    def from_json(cls, data: object, path: str = "tool") -> ToolDefinition:
        """A tool from its JSON; a malformed one raises ``ConfigError`` naming the field at ``path``."""
        try:
            raw = _object(data, path, ("name", "description", "parameters"))
            return cls(
                name=read(raw, "name", path, "a non-empty string", is_name),
                description=read(raw, "description", path, "a string", is_text, ""),
                parameters=read(raw, "parameters", path, "a JSON object", is_mapping, {"type": "object", "properties": {}}),
            )
        except FieldError as exc:
            raise ConfigError(str(exc)) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateOptions:
    """One generation request from the harness's point of view.

    ``extra`` holds provider parameters passed through as they are (merged into
    the request body by the adapter).
    """

    model: str
    messages: Sequence[Message]
    tools: Sequence[ToolDefinition] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "messages": [m.to_json() for m in self.messages]}
        if self.tools:
            out["tools"] = [t.to_json() for t in self.tools]
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["maxTokens"] = self.max_tokens
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_json(cls, data: object, path: str = "options") -> GenerateOptions:
        """Options from their JSON; a malformed document raises ``ConfigError`` naming the field."""
        try:
            raw = _object(data, path, ("model", "messages", "tools", "temperature", "maxTokens", "extra"))
            messages = [Message.from_json(m, where) for m, where in _items(raw, "messages", path)]
            if not messages:
                raise FieldError(f"{path}.messages must hold at least one message")
            return cls(
                model=read(raw, "model", path, "a non-empty string", is_name),
                messages=messages,
                tools=[ToolDefinition.from_json(t, where) for t, where in _items(raw, "tools", path)],
                temperature=read(raw, "temperature", path, "a number or null", or_null(is_number), None),
                max_tokens=read(raw, "maxTokens", path, "an integer >= 1 or null", or_null(lambda n: is_int(n, 1)), None),
                extra=read(raw, "extra", path, "a JSON object", is_mapping, {}),
            )
        except FieldError as exc:
            raise ConfigError(str(exc)) from None


def _object(data: object, path: str, known: tuple[str, ...]) -> Mapping[str, Any]:
    raw: Mapping[str, Any] = check(data, path, "a JSON object", is_mapping)
    refuse_unknown(raw, path, known)
    return raw


def _items(raw: Mapping[str, Any], key: str, path: str) -> list[tuple[object, str]]:
    """The items of a list field (none when it is absent), each with its path."""
    items: list[object] = read(raw, key, path, "a list", is_list, [])
    return [(item, f"{path}.{key}[{position}]") for position, item in enumerate(items)]


def _tool_call(data: object, path: str) -> MessageToolCall:
    raw = _object(data, path, ("id", "name", "arguments"))
    return MessageToolCall(
        id=CallId(read(raw, "id", path, "a non-empty string", is_name)),
        name=read(raw, "name", path, "a non-empty string", is_name),
        arguments=read(raw, "arguments", path, "a string (JSON text)", is_text, "{}"),
    )


def _reasoning(data: object, path: str) -> ReasoningBlock:
    raw = _object(data, path, ("text", "signature"))
    return ReasoningBlock(
        text=read(raw, "text", path, "a string", is_text),
        signature=read(raw, "signature", path, "a string or null", or_null(is_text), None),
    )
