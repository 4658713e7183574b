"""Which route a recorded request went to, and the options that make its adapter send that request again.

Theory of operation, for one recorded streamed request:

1. **Route**: from the host and the path (:func:`detect_route`), unless the
   user forces one.
2. **Base URL**: the URL up to the route's endpoint (``…/chat/completions``,
   ``…/v1/messages``, ``…/models/M:streamGenerateContent``); the adapter is
   built with it, as replay builds it.
3. **Options**: the route's reverse request mapping (:mod:`.import_options`).
4. **Extra**: the adapter builds the request from those options; every
   top-level field where it differs from the recording becomes an extra
   provider parameter (merged into the body by the adapter; ``null`` removes a
   field the adapter would add), and is named in the report. Fields that carry
   the conversation (those that change when the prompt, the model or a tool
   changes) are never replaced that way: a changed prompt must still change
   the request, or replay would no longer check the request translation. One
   of them may only gain keys the adapter does not set (Gemini's
   ``systemInstruction.role``). Tools the options cannot hold exactly
   (``strict`` schemas...) are the exception, carried whole, and said so.
5. **Check**: the adapter builds the request once more, with the extra, and
   replay's own matchers (method, path, query, body as data) must take it for
   the recording. What they do not (a query parameter the adapter never sends,
   such as Azure's ``api-version`` or the Anthropic SDK's ``beta=true``) is not
   importable, and the reason names it: matchers are never loosened to fit.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from ..adapters._base import HttpAdapter
from ..errors import ConfigError
from ..protocol.fields import MISSING, shown
from ..protocol.options import GenerateOptions, Message
from .import_options import NotImportable, reverse_mapping
from .matching import changed_fields, default_matchers, requests_match

if TYPE_CHECKING:
    from vcr.request import Request as VcrRequest

    from ..adapters.route_table import RouteTable

__all__ = ["ENDPOINTS", "MappedRequest", "base_url_of", "detect_route", "map_request"]

#: route -> its endpoint at the end of the URL path; what comes before it is the base URL
ENDPOINTS: dict[str, re.Pattern[str]] = {
    "openai": re.compile(r"/chat/completions$"),
    "openai-compatible": re.compile(r"/chat/completions$"),
    "deepseek": re.compile(r"/chat/completions$"),
    "openai-responses": re.compile(r"/responses$"),
    "anthropic": re.compile(r"/v1/messages$"),
    "gemini": re.compile(r"/models/[^/]+:streamGenerateContent$"),
    "ollama": re.compile(r"/api/chat$"),
}

#: hosts that serve the Chat Completions dialect (route openai-compatible)
COMPATIBLE_HOSTS = frozenset({
    "api.groq.com", "api.mistral.ai", "api.together.xyz", "api.together.ai", "openrouter.ai",
    "api.fireworks.ai", "api.x.ai", "api.perplexity.ai", "api.cerebras.ai",
})
_RESPONSES_HOSTS = frozenset({"api.openai.com", "openrouter.ai", "api.deepseek.com"})
_MARK = "\u2063(changed)"  # appended to every text to find the fields that carry the conversation


@dataclasses.dataclass(frozen=True, slots=True)
class MappedRequest:
    """A recorded request as a replayable call: its route, the adapter's base URL, the options."""

    route: str
    base_url: str
    options: GenerateOptions
    #: what the report says about it: the fields kept as extra parameters
    notes: tuple[str, ...]


def detect_route(uri: str) -> str | None:
    """The built-in route whose endpoint ``uri`` is, from its host and path; ``None`` when unknown."""
    parts = urlsplit(uri)
    host, path = (parts.hostname or "").lower(), parts.path
    azure = host.endswith(".openai.azure.com")
    if path.endswith("/chat/completions"):
        if host == "api.openai.com" or azure:
            return "openai"
        if host == "api.deepseek.com":
            return "deepseek"
        return "openai-compatible" if host in COMPATIBLE_HOSTS else None
    if path.endswith("/responses") and (host in _RESPONSES_HOSTS or azure):
        return "openai-responses"
    if path.endswith("/v1/messages") and host == "api.anthropic.com":
        return "anthropic"
    if path.endswith(":streamGenerateContent") and host.endswith(".googleapis.com"):
        return "gemini"
    if path.endswith("/api/chat"):
        return "ollama"
    return None


def base_url_of(route: str, uri: str) -> str | None:
    """``uri`` up to the route's endpoint, without query or credentials; ``None`` if it is not that endpoint."""
    endpoint = ENDPOINTS.get(route)
    parts = urlsplit(uri)
    found = endpoint.search(parts.path) if endpoint is not None else None
    if found is None:
        return None
    host = parts.netloc.rpartition("@")[2]  # userinfo is a credential, and the adapter refuses it
    return f"{parts.scheme}://{host}{parts.path[: found.start()]}"


def map_request(routes: RouteTable, route: str, recorded: VcrRequest) -> MappedRequest:
    """The options that make ``route``'s adapter send ``recorded`` again; :class:`NotImportable` if none can."""
    reverse = reverse_mapping(route)
    if reverse is None:
        raise NotImportable(f"route {route!r} has no reverse request mapping (the built-in routes have one), "
                            "so its options cannot be read back from the request")
    base = base_url_of(route, recorded.uri)
    if base is None:
        raise NotImportable(f"{urlsplit(recorded.uri).path} is not the {route} endpoint "
                            f"(a path ending in {ENDPOINTS[route].pattern.rstrip('$')})")
    adapter = routes.adapter(route, base_url=base)
    if not isinstance(adapter, HttpAdapter):
        raise NotImportable(f"route {route!r} is served by a plugin's adapter, which builds its own requests")
    # the query first: no options can change it, and a mapping problem too is reported beside it
    query = _query_problem(adapter, route, recorded)
    try:
        body = _json_object(recorded.body)
        mapped = _reconcile(adapter, route, base, reverse(recorded.uri, body), body, recorded)
    except ConfigError as exc:  # options the request gives, which GenerateOptions refuse
        raise NotImportable(_joined(query, f"the request cannot be mapped: {exc}")) from None
    except NotImportable as exc:
        raise NotImportable(_joined(query, str(exc))) from None
    if query:
        raise NotImportable(query)
    return mapped


def _joined(first: str, then: str) -> str:
    return f"{first}; and {then}" if first else then


def _query_problem(adapter: HttpAdapter[Any], route: str, recorded: VcrRequest) -> str:
    """Why the adapter's query can never be the recording's, or ""; it depends on no option."""
    probe = GenerateOptions(model="m", messages=[Message(role="user", content="x")])
    sent = set(parse_qsl(urlsplit(adapter.build_request(probe).url).query, keep_blank_values=True))
    kept = set(parse_qsl(urlsplit(recorded.uri).query, keep_blank_values=True))
    if sent == kept:
        return ""
    unsent = ", ".join(f"{k}={v}" for k, v in sorted(kept - sent))
    added = ", ".join(f"{k}={v}" for k, v in sorted(sent - kept))
    parts = [f"the recorded query parameter(s) {unsent} are never sent by the {route} adapter"] if unsent else []
    parts += [f"the {route} adapter adds {added}, which the recording has not"] if added else []
    return (f"{' and '.join(parts)}; it has no setting for query parameters, so replay could not match this "
            "request without loosening its matchers")


def _json_object(body: bytes | str | None) -> Mapping[str, Any]:
    try:
        data = orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        raise NotImportable("the request body is not JSON") from None
    if not isinstance(data, dict):
        raise NotImportable(f"the request body is a JSON {type(data).__name__}, not an object")
    return data


def _reconcile(adapter: HttpAdapter[Any], route: str, base: str, options: GenerateOptions,
               body: Mapping[str, Any], recorded: VcrRequest) -> MappedRequest:
    built = _body(adapter, options)
    why: dict[str, str] = {}
    if options.tools and built.get("tools") != body.get("tools"):
        first = changed_fields(body.get("tools"), built.get("tools"), "tools")[0]
        why["tools"] = (f" ({first} is not what the {route} adapter makes of a ToolDefinition): the recorded "
                        "tools are sent as they are, not built from the options")
        options = dataclasses.replace(options, tools=())
        built = _body(adapter, options)
    extra, notes = _extra(body, built, _conversation(adapter, options, built), route, why)
    options = dataclasses.replace(options, extra=extra)
    _check(adapter, route, options, recorded, body)
    return MappedRequest(route=route, base_url=base, options=options, notes=tuple(notes))


def _body(adapter: HttpAdapter[Any], options: GenerateOptions) -> dict[str, Any]:
    data = adapter.build_request(options).json
    return dict(data) if isinstance(data, Mapping) else {}


def _conversation(adapter: HttpAdapter[Any], options: GenerateOptions, built: Mapping[str, Any]) -> frozenset[str]:
    """The body fields that change when the model, any message's text or any tool changes."""
    changed = GenerateOptions(
        model=options.model + _MARK,
        messages=[dataclasses.replace(m, content=m.content + _MARK) for m in options.messages],
        tools=[dataclasses.replace(t, description=t.description + _MARK) for t in options.tools],
        temperature=options.temperature, max_tokens=options.max_tokens,
    )
    other = _body(adapter, changed)
    return frozenset(key for key in {*built, *other} if built.get(key, MISSING) != other.get(key, MISSING))


def _extra(recorded: Mapping[str, Any], built: Mapping[str, Any], conversation: frozenset[str],
           route: str, why: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The extra parameters that turn ``built`` into ``recorded``, and a note for each (``why``: more to say)."""
    extra: dict[str, Any] = {}
    notes: list[str] = []
    for key in sorted({*recorded, *built}):
        theirs, mine = recorded.get(key, MISSING), built.get(key, MISSING)
        if theirs == mine:
            continue
        if isinstance(theirs, dict) and isinstance(mine, dict) and all(
                name in theirs and theirs[name] == value for name, value in mine.items()):
            extra[key] = {name: value for name, value in theirs.items() if name not in mine}
            notes += [f"request field '{key}.{name}' is kept as an extra parameter" for name in extra[key]]
        elif key in conversation:
            raise NotImportable(f"request field '{key}' cannot be mapped: {_difference(key, theirs, mine, route)}")
        elif theirs is MISSING:
            extra[key] = None
            notes.append(f"request field '{key}', which the {route} adapter adds, is not in the recorded "
                         f"request: it is removed through the extra parameter {key}: null")
        else:
            extra[key] = theirs
            notes.append(f"request field '{key}' is kept as an extra parameter{why.get(key, '')}")
    return extra, notes


def _difference(key: str, theirs: Any, mine: Any, route: str) -> str:
    if theirs is MISSING:
        return f"the recorded request has none, and the {route} adapter always sends it"
    where = changed_fields(theirs, mine, key)[0]
    return (f"the {route} adapter sends {where} as {_at(mine, where, key)} where the recording has "
            f"{_at(theirs, where, key)}")


def _at(value: Any, where: str, key: str) -> str:
    """The value at the dotted path ``where`` (which starts with ``key``) inside ``value``, shown briefly."""
    for step in re.findall(r"\.([^.\[]+)|\[(\d+)\]", where[len(key):]):
        name, index = step
        if index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        elif name and isinstance(value, dict) and name in value:
            value = value[name]
        else:
            return "nothing"
    return shown(value)


def _check(adapter: HttpAdapter[Any], route: str, options: GenerateOptions, recorded: VcrRequest,
           body: Mapping[str, Any]) -> None:
    """Replay's matchers must take the adapter's request for the recording; else why not."""
    from vcr.request import Request as VcrRequest

    request = adapter.build_request(options)
    mine = VcrRequest(request.method, request.url, orjson.dumps(request.json), dict(request.headers))
    if requests_match(default_matchers(), mine, recorded, "<import>"):
        return
    ours, theirs = urlsplit(mine.uri), urlsplit(recorded.uri)
    if mine.method != recorded.method:
        raise NotImportable(f"the {route} adapter sends {mine.method}, the recording is a {recorded.method}")
    if ours.path != theirs.path:
        raise NotImportable(f"the {route} adapter requests {ours.path}, the recording {theirs.path}")
    fields = changed_fields(body, request.json)
    raise NotImportable(f"the request cannot be mapped: the {route} adapter's request still differs in "
                        f"{', '.join(fields[:5]) or 'its body'}")
