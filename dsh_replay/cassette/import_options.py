"""Each route's request mapping read backwards: a recorded request body to the GenerateOptions of the call.

Only what :class:`GenerateOptions` hold is read here: the model, the messages
with their roles, tool calls and results, the tools, temperature and the max
tokens. Every other field is left to :mod:`.import_requests`, which carries it
as an extra provider parameter and then checks the whole: the route's adapter
builds the request again from the options, and it must equal the recorded one
as data. A reverse mapping may therefore stay simple where that check catches
a difference; it raises :class:`NotImportable` for what the options cannot
hold at all (a list of content parts where they hold text, a role they do not
have), naming the field.

Before that, :func:`.import_spelling.respell` writes what the provider
documents as the same request the way the route's adapter writes it (an
assistant turn's omitted ``content`` as ``null``, a list of one text part as
the string, the SDK's short form of a Responses message with its ``type``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from ..errors import CassetteError
from ..protocol.chunks import CallId, ReasoningBlock
from ..protocol.options import GenerateOptions, Message, MessageToolCall, ToolDefinition

__all__ = ["NotImportable", "ReverseMapping", "reverse_mapping"]

#: (request URL, request JSON body) -> the options of the call
ReverseMapping = Callable[[str, Mapping[str, Any]], GenerateOptions]


class NotImportable(CassetteError):
    """An interaction ``dsh-replay import`` cannot turn into a replayable case; the message says why."""


# -- shared reading --------------------------------------------------------------------


def _items(body: Mapping[str, Any], key: str) -> list[tuple[str, Any]]:
    """The items of the list field ``key`` (none when absent), each with its path."""
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise NotImportable(f"request field '{key}' cannot be mapped: it is a {_kind(value)}, not a list")
    return [(f"{key}[{n}]", item) for n, item in enumerate(value)]


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise NotImportable(f"request field '{where}' cannot be mapped: it is a {_kind(value)}, not an object")
    return value


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    what = "a list of content parts" if isinstance(value, list) else f"a {_kind(value)}"
    raise NotImportable(f"request field '{where}' cannot be mapped: it is {what}; GenerateOptions messages "
                        "hold text, which the adapter sends as a string")


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", type(None): "null"}.get(type(value), type(value).__name__)


def _get(raw: Mapping[str, Any], key: str) -> Any:
    """A field as it is: GenerateOptions, Message and MessageToolCall check it (a ConfigError naming it)."""
    return raw.get(key)


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _tools(items: Iterable[tuple[str, Any]], read: Callable[[Mapping[str, Any]], ToolDefinition | None]) -> list[ToolDefinition]:
    """Every tool as a ToolDefinition, or none: a tool the options cannot hold leaves them all to ``extra``."""
    tools = []
    for _, raw in items:
        tool = read(raw) if isinstance(raw, Mapping) else None
        if tool is None:
            return []
        tools.append(tool)
    return tools


def _tool(name: Any, description: Any, parameters: Any) -> ToolDefinition | None:
    if not isinstance(name, str) or not name or not isinstance(parameters, Mapping):
        return None
    return ToolDefinition(name=name, description=description if isinstance(description, str) else "",
                          parameters=parameters)


def _options(model: Any, messages: list[Message], tools: list[ToolDefinition],
             temperature: Any, max_tokens: Any) -> GenerateOptions:
    """The options; a temperature or max tokens of a type the options refuse is left to ``extra``."""
    if not messages:
        raise NotImportable("the request has no message; GenerateOptions need at least one")
    if model is None:  # Azure AI Inference, say: an Azure deployment URL names the model in its path instead
        raise NotImportable("request field 'model' cannot be mapped: the recorded request names no model, and "
                            "GenerateOptions need one, which the adapter sends in every request")
    number = isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature >= 0
    whole = isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1
    return GenerateOptions(model=model, messages=messages, tools=tools,
                           temperature=temperature if number else None, max_tokens=max_tokens if whole else None)


# -- Chat Completions (openai, openai-compatible, deepseek) ------------------------------


def chat_options(url: str, body: Mapping[str, Any], *, max_tokens_field: str) -> GenerateOptions:
    """The inverse of ``OpenAIChatAdapter.body`` (``max_tokens_field`` as the route's adapter names it)."""
    messages = [_chat_message(_object(raw, where), where) for where, raw in _items(body, "messages")]
    tools = _tools(_items(body, "tools"), _chat_tool)
    return _options(body.get("model"), messages, tools, body.get("temperature"), body.get(max_tokens_field))


def _chat_message(raw: Mapping[str, Any], where: str) -> Message:
    role = raw.get("role")
    if role == "tool":
        return Message(role="tool", call_id=raw.get("tool_call_id"), content=_text(raw.get("content"), f"{where}.content"))
    if role not in ("system", "user", "assistant"):
        raise NotImportable(f"request field '{where}.role' cannot be mapped: {role!r} is none of the "
                            "GenerateOptions roles (system, user, assistant, tool)")
    calls = tuple(_chat_call(_object(call, w), w) for w, call in _items(raw, "tool_calls"))
    content = raw.get("content")
    text = "" if content is None and calls else _text(content, f"{where}.content")
    name = raw.get("name")
    return Message(role=role, content=text, tool_calls=calls, name=name if isinstance(name, str) else None)


def _chat_call(raw: Mapping[str, Any], where: str) -> MessageToolCall:
    function = _object(raw.get("function"), f"{where}.function")
    arguments = function.get("arguments")
    return MessageToolCall(id=_get(raw, "id"), name=_get(function, "name"),
                           arguments=arguments if isinstance(arguments, str) else _json_text(arguments))


def _chat_tool(raw: Mapping[str, Any]) -> ToolDefinition | None:
    function = raw.get("function")
    if raw.get("type") != "function" or not isinstance(function, Mapping):
        return None
    return _tool(function.get("name"), function.get("description"), function.get("parameters"))


# -- Responses API (openai-responses) ---------------------------------------------------


def responses_options(url: str, body: Mapping[str, Any]) -> GenerateOptions:
    """The inverse of ``OpenAIResponsesAdapter.build_request``: ``input`` items back into messages."""
    if isinstance(body.get("input"), str):
        raise NotImportable("request field 'input' cannot be mapped: it is a string; the openai-responses "
                            "adapter sends the conversation as a list of input items")
    messages: list[Message] = []
    for where, raw in _items(body, "input"):
        item = _object(raw, where)
        kind = item.get("type")
        if kind == "message" or (kind is None and "role" in item):  # the short form (respelt with its type first)
            messages.append(Message(role=_get(item, "role"), content=_text(item.get("content"), f"{where}.content")))
        elif kind == "function_call":
            call = MessageToolCall(id=_get(item, "call_id"), name=_get(item, "name"),
                                   arguments=_get(item, "arguments"))
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":  # calls follow the turn's text
                messages[-1] = Message(role="assistant", content=last.content, tool_calls=(*last.tool_calls, call))
            else:
                messages.append(Message(role="assistant", tool_calls=(call,)))
        elif kind == "function_call_output":
            messages.append(Message(role="tool", call_id=item.get("call_id"),
                                    content=_text(item.get("output"), f"{where}.output")))
        else:
            raise NotImportable(f"request field '{where}' cannot be mapped: input items of type {kind!r} have "
                                "no place in GenerateOptions (message, function_call, function_call_output do)")
    tools = _tools(_items(body, "tools"), lambda t: _tool(t.get("name"), t.get("description"), t.get("parameters"))
                   if t.get("type") == "function" else None)
    return _options(body.get("model"), messages, tools, body.get("temperature"), body.get("max_output_tokens"))


# -- Anthropic Messages -----------------------------------------------------------------


def anthropic_options(url: str, body: Mapping[str, Any]) -> GenerateOptions:
    """The inverse of the anthropic ``request_body``: ``system`` first, tool results as tool messages."""
    messages = []
    if body.get("system") is not None:
        messages += [Message(role="system", content=_text(body["system"], "system"))]
    for where, raw in _items(body, "messages"):
        messages += _anthropic_turn(_object(raw, where), where)
    tools = _tools(_items(body, "tools"), lambda t: _tool(t.get("name"), t.get("description"), t.get("input_schema")))
    return _options(body.get("model"), messages, tools, body.get("temperature"), body.get("max_tokens"))


def _anthropic_turn(raw: Mapping[str, Any], where: str) -> list[Message]:
    role, content = raw.get("role"), raw.get("content")
    if role not in ("user", "assistant"):
        raise NotImportable(f"request field '{where}.role' cannot be mapped: {role!r} (user or assistant)")
    if isinstance(content, str):
        return [Message(role=role, content=content)]
    blocks = [(w, _object(block, w)) for w, block in _items(raw, "content")]
    if role == "user" and blocks and all(block.get("type") == "tool_result" for _, block in blocks):
        return [Message(role="tool", call_id=block.get("tool_use_id"), content=_text(block.get("content"), f"{w}.content"))
                for w, block in blocks]
    if role == "assistant":
        return [_anthropic_assistant(blocks)]
    return [Message(role=role, content=_text(content, f"{where}.content"))]  # content blocks: named


def _anthropic_assistant(blocks: list[tuple[str, Mapping[str, Any]]]) -> Message:
    text, calls, reasoning = "", [], []
    for where, block in blocks:
        kind = block.get("type")
        if kind == "text":
            text += _text(block.get("text"), f"{where}.text")
        elif kind == "tool_use":
            calls.append(MessageToolCall(id=_get(block, "id"), name=_get(block, "name"),
                                         arguments=_json_text(block.get("input"))))
        elif kind == "thinking":
            reasoning.append(ReasoningBlock(text=_text(block.get("thinking"), f"{where}.thinking"),
                                            signature=block.get("signature")))
        else:
            raise NotImportable(f"request field '{where}' cannot be mapped: assistant content blocks of type "
                                f"{kind!r} have no place in GenerateOptions")
    return Message(role="assistant", content=text, tool_calls=tuple(calls), reasoning=tuple(reasoning))


# -- Gemini --------------------------------------------------------------------------------

_GEMINI_MODEL = re.compile(r"/models/([^/:]+):streamGenerateContent$")


def gemini_options(url: str, body: Mapping[str, Any]) -> GenerateOptions:
    """The inverse of the gemini ``request_body``; the model comes from the URL path."""
    found = _GEMINI_MODEL.search(urlsplit(url).path)
    if found is None:
        raise NotImportable(f"the URL {url} names no model (…/models/MODEL:streamGenerateContent)")
    messages = []
    instruction = body.get("systemInstruction")
    if instruction is not None:
        for where, part in _items(_object(instruction, "systemInstruction"), "parts"):
            messages.append(Message(role="system", content=_text(_object(part, where).get("text"), f"systemInstruction.{where}.text")))
    for where, raw in _items(body, "contents"):
        messages += _gemini_turn(_object(raw, where), where)
    tools = _gemini_tools(body.get("tools"))
    config = body.get("generationConfig")
    config = config if isinstance(config, Mapping) else {}
    return _options(unquote(found.group(1)), messages, tools, config.get("temperature"), config.get("maxOutputTokens"))


def _gemini_tools(tools: Any) -> list[ToolDefinition]:
    # the adapter sends one {functionDeclarations: [...]} entry; anything else stays as recorded (extra)
    if not (isinstance(tools, list) and len(tools) == 1 and isinstance(tools[0], Mapping)
            and set(tools[0]) == {"functionDeclarations"}):
        return []
    return _tools(_items(tools[0], "functionDeclarations"),
                  lambda t: _tool(t.get("name"), t.get("description"), t.get("parameters")))


def _gemini_turn(raw: Mapping[str, Any], where: str) -> list[Message]:
    role: Any = {"user": "user", "model": "assistant"}.get(raw.get("role") or "")
    if role is None:
        raise NotImportable(f"request field '{where}.role' cannot be mapped: {raw.get('role')!r} (user or model)")
    parts = [(f"{where}.{w}", _object(part, f"{where}.{w}")) for w, part in _items(raw, "parts")]
    if parts and all("functionResponse" in part for _, part in parts):
        return [_gemini_result(_object(part["functionResponse"], f"{w}.functionResponse")) for w, part in parts]
    text, calls = "", []
    for w, part in parts:
        if "functionCall" in part:
            call = _object(part["functionCall"], f"{w}.functionCall")
            calls.append(MessageToolCall(id=_get(call, "id"), name=_get(call, "name"),
                                         arguments=_json_text(call.get("args") or {})))
        elif set(part) == {"text"}:
            text += _text(part["text"], f"{w}.text")
        else:
            raise NotImportable(f"request field '{w}' cannot be mapped: parts with {', '.join(sorted(part))} "
                                "have no place in GenerateOptions (text, functionCall and functionResponse do)")
    return [Message(role=role, content=text, tool_calls=tuple(calls))]


def _gemini_result(response: Mapping[str, Any]) -> Message:
    result = response.get("response")
    output = result.get("output") if isinstance(result, Mapping) and set(result) == {"output"} else None
    # the adapter wraps a result that is no JSON object as {"output": text}: unwrap it the same way
    content = output if isinstance(output, str) and not output.lstrip().startswith("{") else _json_text(result)
    return Message(role="tool", call_id=response.get("id"), name=response.get("name"), content=content)


# -- Ollama -----------------------------------------------------------------------------------


def ollama_options(url: str, body: Mapping[str, Any]) -> GenerateOptions:
    """The inverse of the ollama ``request_body``; calls get ids (``call_N``), results their name."""
    messages: list[Message] = []
    calls = 0
    for where, raw in _items(body, "messages"):
        item = _object(raw, where)
        role = _get(item, "role")
        tool_calls = []
        for w, call in _items(item, "tool_calls"):
            function = _object(_object(call, w).get("function"), f"{w}.function")
            tool_calls.append(MessageToolCall(id=CallId(f"call_{calls}"), name=_get(function, "name"),
                                              arguments=_json_text(function.get("arguments") or {})))
            calls += 1
        content = _text(item.get("content", ""), f"{where}.content")
        if role == "tool":
            name = item.get("tool_name")
            messages.append(Message(role="tool", call_id=CallId(f"result_{len(messages)}"), content=content,
                                    name=name if isinstance(name, str) else None))
        else:
            messages.append(Message(role=role, content=content, tool_calls=tuple(tool_calls)))
    tools = _tools(_items(body, "tools"), _chat_tool)
    settings = body.get("options")
    settings = settings if isinstance(settings, Mapping) else {}
    return _options(body.get("model"), messages, tools, settings.get("temperature"), settings.get("num_predict"))


def reverse_mapping(route: str) -> ReverseMapping | None:
    """The reverse request mapping of a built-in route; ``None`` for a configured one."""
    from ..adapters import BUILTIN_ROUTES, adapter_class

    if route not in BUILTIN_ROUTES:
        return None
    if route in ("openai", "openai-compatible", "deepseek"):
        return functools.partial(chat_options, max_tokens_field=adapter_class(route).max_tokens_field)
    mappings: dict[str, ReverseMapping] = {"openai-responses": responses_options, "anthropic": anthropic_options,
                                           "gemini": gemini_options, "ollama": ollama_options}
    return mappings.get(route)
