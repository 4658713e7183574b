"""The provider-agnostic request: GenerateOptions, Message, ToolDefinition.

They serialize to plain JSON (``to_json`` / ``from_json``) because cassettes
store the options of the recorded call, so a case can be replayed without the
test function that made it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._chunks import CallId, ReasoningBlock
from ._exceptions import ConfigError

__all__ = ["GenerateOptions", "Message", "MessageToolCall", "Role", "ToolDefinition"]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES = ("system", "user", "assistant", "tool")


_MISSING: Any = object()


class _Fields:
    """Typed reads from one JSON object of the options, each error naming the field's path.

    ``known`` lists the object's fields: any other is refused (with the closest
    known name), since a misspelt ``temprature`` would otherwise be dropped unseen.
    """

    def __init__(self, data: object, path: str, known: Sequence[str]) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path} must be a JSON object, got {_shown(data)}")
        for name in data:
            if name not in known:
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise ConfigError(f"{path} has an unknown field {name!r}{hint}; known: {', '.join(known)}")
        self.data, self.path = data, path

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = _MISSING) -> Any:
        """The field's value, of ``kind``; ``default`` when it is absent (or null, for a None default)."""
        value = self.data.get(name, _MISSING)
        if value is _MISSING or (value is None and default is None):
            if default is _MISSING:
                raise ConfigError(f"{self.path} needs the field {name!r}")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
            raise ConfigError(f"{self.path}.{name} must be {wanted}, got {_shown(value)}")
        return value

    def each(self, name: str) -> list[tuple[object, str]]:
        """The items of a list field (empty when absent), each with its path."""
        items: list[object] = self.get(name, list, [])
        return [(item, f"{self.path}.{name}[{position}]") for position, item in enumerate(items)]


_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "a JSON object"}


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


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
        fields = _Fields(data, path, ("role", "content", "toolCalls", "callId", "name", "reasoning"))
        calls = [_Fields(c, where, ("id", "name", "arguments")) for c, where in fields.each("toolCalls")]
        reasoning = [_Fields(r, where, ("text", "signature")) for r, where in fields.each("reasoning")]
        call_id = fields.get("callId", str, None)
        values = {
            "role": fields.get("role", str),
            "content": fields.get("content", str, ""),
            "tool_calls": tuple(
                MessageToolCall(id=CallId(c.get("id", str)), name=c.get("name", str), arguments=c.get("arguments", str, "{}"))
                for c in calls
            ),
            "call_id": CallId(call_id) if call_id is not None else None,
            "name": fields.get("name", str, None),
            "reasoning": tuple(ReasoningBlock(text=r.get("text", str), signature=r.get("signature", str, None)) for r in reasoning),
        }
        try:
            return cls(**values)
        except ConfigError as exc:  # the message's own rules (role, call id) name no field
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
        fields = _Fields(data, path, ("name", "description", "parameters"))
        return cls(
            name=fields.get("name", str),
            description=fields.get("description", str, ""),
            parameters=fields.get("parameters", dict, {"type": "object", "properties": {}}),
        )


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
        fields = _Fields(data, path, ("model", "messages", "tools", "temperature", "maxTokens", "extra"))
        messages = [Message.from_json(m, where) for m, where in fields.each("messages")]
        if not messages:
            raise ConfigError(f"{path}.messages must hold at least one message")
        return cls(
            model=fields.get("model", str),
            messages=messages,
            tools=[ToolDefinition.from_json(t, where) for t, where in fields.each("tools")],
            temperature=fields.get("temperature", (int, float), None),
            max_tokens=fields.get("maxTokens", int, None),
            extra=fields.get("extra", dict, {}),
        )
