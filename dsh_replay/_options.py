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
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content", ""),
            tool_calls=tuple(
                MessageToolCall(id=CallId(c["id"]), name=c["name"], arguments=c.get("arguments", "{}"))
                for c in data.get("toolCalls", ())
            ),
            call_id=CallId(data["callId"]) if data.get("callId") is not None else None,
            name=data.get("name"),
            reasoning=tuple(
                ReasoningBlock(text=r["text"], signature=r.get("signature")) for r in data.get("reasoning", ())
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A tool the model may call: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolDefinition:
        return cls(
            name=data["name"],
            description=data.get("description", ""),
            parameters=data.get("parameters", {"type": "object", "properties": {}}),
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
    def from_json(cls, data: Mapping[str, Any]) -> GenerateOptions:
        """Build options from their JSON; a malformed document raises ``ConfigError``."""
        try:
            return cls(
                model=data["model"],
                messages=[Message.from_json(m) for m in data["messages"]],
                tools=[ToolDefinition.from_json(t) for t in data.get("tools", ())],
                temperature=data.get("temperature"),
                max_tokens=data.get("maxTokens"),
                extra=data.get("extra", {}),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"malformed GenerateOptions: {type(exc).__name__}: {exc}") from None
