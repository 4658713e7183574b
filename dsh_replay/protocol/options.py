"""The provider-agnostic request: GenerateOptions, Message, ToolDefinition.

They serialize to plain JSON (``to_json`` / ``from_json``) because cassettes
store the options of the recorded call, so a case can be replayed without the
test function that made it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError
from .chunks import CallId, ReasoningBlock
from .fields import (
    FieldError,
    check,
    is_int,
    is_list,
    is_mapping,
    is_name,
    is_number,
    is_text,
    or_null,
    plain_json,
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

    def __post_init__(self) -> None:
        with _as_config_error():
            _set(self, "id", check(self.id, "MessageToolCall.id", "a non-empty string", is_name))
            _set(self, "name", check(self.name, "MessageToolCall.name", "a non-empty string", is_name))
            _set(self, "arguments", check(self.arguments, "MessageToolCall.arguments", "a string (JSON text)", is_text))

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
        with _as_config_error():
            _set(self, "content", check(self.content, "Message.content", "a string", is_text))
            _set(self, "name", check(self.name, "Message.name", "a string or None", or_null(is_text)))
            _set(self, "call_id", check(self.call_id, "Message.call_id", "a non-empty string or None", or_null(is_name)))
            # any sequence from callers, stored as a tuple so the value stays hashable/frozen
            _set(self, "tool_calls", _items_of(self.tool_calls, MessageToolCall, "Message.tool_calls"))
            _set(self, "reasoning", _items_of(self.reasoning, ReasoningBlock, "Message.reasoning"))

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

    def __post_init__(self) -> None:
        with _as_config_error():
            _set(self, "name", check(self.name, "ToolDefinition.name", "a non-empty string", is_name))
            _set(self, "description", check(self.description, "ToolDefinition.description", "a string", is_text))
            parameters = check(self.parameters, "ToolDefinition.parameters", "a JSON-schema mapping", is_mapping)
            _set(self, "parameters", plain_json(parameters, f"tool {self.name!r} parameters"))

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
        # Checked and made plain JSON here: the values are sent, stored in the
        # cassette's metadata and dumped as YAML, where an enum or a NaN fails late.
        with _as_config_error():
            _set(self, "model", plain_json(check(self.model, "GenerateOptions.model", "a non-empty string", is_name), ""))
            _set(self, "messages", _items_of(self.messages, Message, "GenerateOptions.messages"))
            if not self.messages:
                raise FieldError("GenerateOptions.messages must hold at least one message")
            _set(self, "tools", _items_of(self.tools, ToolDefinition, "GenerateOptions.tools"))
            temperature = check(self.temperature, "GenerateOptions.temperature", "a number >= 0 or None",
                                or_null(lambda t: is_number(t, 0)))
            _set(self, "temperature", plain_json(temperature, "GenerateOptions.temperature"))
            max_tokens = check(self.max_tokens, "GenerateOptions.max_tokens", "an integer >= 1 or None",
                               or_null(lambda n: is_int(n, 1)))
            _set(self, "max_tokens", plain_json(max_tokens, "GenerateOptions.max_tokens"))
            extra = check(self.extra, "GenerateOptions.extra", "a mapping of provider parameters", is_mapping)
            _set(self, "extra", plain_json(extra, "GenerateOptions.extra"))

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


def _set(instance: object, name: str, value: object) -> None:
    object.__setattr__(instance, name, value)  # frozen: only __post_init__ normalises


def _items_of(items: object, kind: type, where: str) -> tuple[Any, ...]:
    """``items`` as a tuple of ``kind`` values; a string or a stray value is a FieldError."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
        raise FieldError(f"{where} must be a list of {kind.__name__}, got {items!r}"[:200])
    for position, item in enumerate(items):
        check(item, f"{where}[{position}]", f"a {kind.__name__}", lambda value: isinstance(value, kind))
    return tuple(items)


@contextlib.contextmanager
def _as_config_error() -> Iterator[None]:
    try:
        yield
    except FieldError as exc:
        raise ConfigError(str(exc)) from None
