"""Which route a recorded request went to, and the options that make its adapter send that request again.

Theory of operation, for one recorded streamed request:

1. **Route**: from ``[tool.dsh_replay.hosts]`` or else the host and the path
   (:func:`detect_route`), unless the user forces one.
2. **Base URL**: the URL up to the route's endpoint (``…/chat/completions``,
   ``…/v1/messages``, ``…/models/M:streamGenerateContent``); the adapter is
   built with it, as replay builds it.
3. **Query**: the recorded query parameters the adapter does not send
   (Azure's ``api-version``, the Anthropic SDK's ``beta=true``) become the
   case's default query (``dsh_replay.adapter.default_query``), sent on every
   request; one the adapter sends with another value, or one it sends that
   the recording lacks, is a reason the request is not importable. A
   credential (``key=REDACTED``) is left out: the adapter sends it in a header.
4. **Options**: the route's reverse request mapping (:mod:`.import_options`),
   on the body written as the adapter writes the same request
   (:mod:`.import_spelling`).
5. **Extra**: the adapter builds the request from those options; every
   top-level field where it differs from the recording becomes an extra
   provider parameter (merged into the body by the adapter; ``null`` removes a
   field the adapter would add), and is named in the report. Fields that carry
   the conversation (those that change when the prompt, the model or a tool
   changes) are never replaced that way: a changed prompt must still change
   the request, or replay would no longer check the request translation. One
   of them may only gain keys the adapter does not set (Gemini's
   ``systemInstruction.role``). Tools the options cannot hold exactly
   (``strict`` schemas...) are the exception, carried whole, and said so.
6. **Check**: the adapter builds the request once more, with the extra and
   the default query, and replay's own matchers (method, path, query, body as
   data) must take it for the recording. What they do not is not importable,
   and the reason names it: matchers are never loosened to fit.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from ..adapters._base import HttpAdapter
from ..errors import ConfigError
from ..protocol.fields import MISSING, shown
from ..protocol.options import GenerateOptions, Message
from ..wire.credentials import REDACTED, is_credential_parameter
from .import_options import NotImportable, reverse_mapping
from .import_spelling import respell
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
#: options any request mapping can build a request from: what its query is asked of
_PROBE = GenerateOptions(model="m", messages=[Message(role="user", content="x")])


@dataclasses.dataclass(frozen=True, slots=True)
class MappedRequest:
    """A recorded request as a replayable call: its route, the adapter's base URL and default query, the options."""

    route: str
    base_url: str
    options: GenerateOptions
    #: what the report says about it: the fields kept as extra parameters, the query, the respelt fields
    notes: tuple[str, ...]
    #: the recorded query parameters the adapter does not send: sent on every request of the case
    default_query: Mapping[str, str] = dataclasses.field(default_factory=dict)


def detect_route(uri: str, hosts: Mapping[str, str] | None = None) -> str | None:
    """The route whose endpoint ``uri`` is, from its host and path; ``None`` when unknown.

    ``hosts`` (``[tool.dsh_replay.hosts]``: host or ``host:port`` -> route) is asked
    first, ``host:port`` before ``host``; its route is taken when ``uri`` is that
    route's endpoint, and the built-in detection decides otherwise.
    """
    parts = urlsplit(uri)
    host, path = (parts.hostname or "").lower(), parts.path
    configured = _configured_route(parts.scheme, host, parts.port, path, hosts) if hosts else None
    if configured is not None:
        return configured
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


def _configured_route(scheme: str, host: str, port: int | None, path: str,
                      hosts: Mapping[str, str]) -> str | None:
    name = f"[{host}]" if ":" in host else host  # an IPv6 address is written in brackets
    port = port or {"http": 80, "https": 443}.get(scheme)
    for key in (f"{name}:{port}", name):
        route = hosts.get(key)
        if route is not None:
            endpoint = ENDPOINTS.get(route)  # a configured route's endpoint is its own adapter's business
            return route if endpoint is None or endpoint.search(path) else None
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
    """The options that make ``route``'s adapter send ``recorded`` again; :class:`NotImportable` if none can.

    Where the recording spells the request otherwise than the adapter and the
    provider reads both alike (:mod:`.import_spelling`), or carries a credential
    in its query, ``recorded`` is rewritten in place as the adapter sends it,
    and the notes name every field so rewritten: the case keeps that request.
    """
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
    query, uri, notes, problem = _query(adapter, route, recorded.uri)
    try:
        if query and not problem:
            adapter = _with_query(routes, route, base, query)
        body, respelt = respell(route, _json_object(recorded.body))
        # with the query already a reason, the rest is checked against the adapter's own query
        checked = _own_query(adapter, uri) if problem else uri
        wanted = _vcr_request(recorded.method, checked, orjson.dumps(body), recorded.headers)
        mapped = _reconcile(adapter, route, base, reverse(uri, body), body, wanted)
    except ConfigError as exc:  # options the request gives, which GenerateOptions refuse
        raise NotImportable(_joined(problem, f"the request cannot be mapped: {exc}")) from None
    except NotImportable as exc:
        raise NotImportable(_joined(problem, str(exc))) from None
    if problem:
        raise NotImportable(problem)
    recorded.uri = uri
    if respelt:
        recorded.body = wanted.body
    return dataclasses.replace(mapped, notes=(*notes, *respelt, *mapped.notes), default_query=query)


def _joined(first: str, then: str) -> str:
    return f"{first}; and {then}" if first else then


def _query(adapter: HttpAdapter[Any], route: str, uri: str) -> tuple[dict[str, str], str, list[str], str]:
    """(default query, the URI the case keeps, notes, why the query can never be the recording's or "").

    The recorded parameters the adapter does not send become the default query;
    a credential among them is left out of the URI (the adapter sends its key in
    a header, and headers are not matched). It depends on no option.
    """
    sent = parse_qsl(urlsplit(adapter.request_for(_PROBE).url).query, keep_blank_values=True)
    parts = urlsplit(uri)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(name, value) for name, value in pairs if not is_credential_parameter(name)]
    recorded = dict(kept)
    otherwise = [f"the {route} adapter sends {name}={value} where the recording has {name}={recorded[name]}"
                 for name, value in sent if name in recorded and recorded[name] != value]
    otherwise += [f"the {route} adapter sends {name}={value}, which the recording has not"
                  for name, value in sent if name not in recorded]
    problems = [f"{' and '.join(otherwise)}, and a default query never overrides what the adapter sets "
                "itself"] if otherwise else []
    names = [name for name, _ in kept]
    repeated = sorted({name for name in names if names.count(name) > 1})
    problems += [f"the recording repeats the query parameter(s) {', '.join(repeated)}, and a default query holds "
                 "one value each"] if repeated else []
    mine = {name for name, _ in sent}
    query = {name: value for name, value in kept if name not in mine}
    notes = [f"the recorded query parameter(s) {_pairs(query)} are sent on every request of the case "
             "(dsh_replay.adapter.default_query)"] if query else []
    dropped = [name for name, _ in pairs if is_credential_parameter(name)]
    if dropped:
        uri = urlunsplit(parts._replace(query=urlencode(kept)))
        notes.append(f"the recorded query parameter(s) {', '.join(dropped)} (a credential, {REDACTED}) are left out "
                     f"of the case's request: the {route} adapter sends its credential in a header")
    problem = (f"{'; '.join(problems)}: replay could not match this request without loosening its matchers"
               if problems else "")
    return query, uri, notes, problem


def _own_query(adapter: HttpAdapter[Any], uri: str) -> str:
    return urlunsplit(urlsplit(uri)._replace(query=urlsplit(adapter.request_for(_PROBE).url).query))


def _pairs(query: Mapping[str, str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in query.items())


def _with_query(routes: RouteTable, route: str, base: str, query: Mapping[str, str]) -> HttpAdapter[Any]:
    """The route's adapter as the case's replay builds it: with ``query`` sent on every request."""
    adapter = routes.adapter(route, base_url=base, default_query=query)
    if not isinstance(adapter, HttpAdapter):  # the same route gave an HttpAdapter a moment ago
        raise NotImportable(f"route {route!r} gave no HttpAdapter when built with a default query")
    return adapter


def _vcr_request(method: str, uri: str, body: bytes, headers: Any) -> VcrRequest:
    from vcr.request import Request as VcrRequest

    return VcrRequest(method, uri, body, dict(headers))


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
    data = adapter.request_for(options).json
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
    request = adapter.request_for(options)
    mine = _vcr_request(request.method, request.url, orjson.dumps(request.json), request.headers)
    if requests_match(default_matchers(), mine, recorded, "<import>"):
        return
    ours, theirs = urlsplit(mine.uri), urlsplit(recorded.uri)
    if mine.method != recorded.method:
        raise NotImportable(f"the {route} adapter sends {mine.method}, the recording is a {recorded.method}")
    if ours.path != theirs.path:
        raise NotImportable(f"the {route} adapter requests {ours.path}, the recording {theirs.path}")
    if sorted(parse_qsl(ours.query)) != sorted(parse_qsl(theirs.query)):
        raise NotImportable(f"the {route} adapter requests ?{ours.query}, the recording ?{theirs.query}")
    fields = changed_fields(body, request.json)
    raise NotImportable(f"the request cannot be mapped: the {route} adapter's request still differs in "
                        f"{', '.join(fields[:5]) or 'its body'}")
