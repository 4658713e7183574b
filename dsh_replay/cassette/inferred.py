"""A plain vcrpy cassette of streamed LLM calls, read as a case: its route, options and fragments inferred.

``dsh-replay import`` writes such a case to disk; ``check``, ``report``,
``serve`` and the plugin's collection read it in place when told what the
cassette holds (:class:`Inference`: ``--route``, or a host in
``[tool.dsh_replay.hosts]``). Both read a recorded interaction the same way
(:func:`plan_interaction`):

- the route from ``--route``, the hosts table, or the built-in hosts;
- the :class:`GenerateOptions` read back from the request body, and the
  request rebuilt by the route's adapter and compared with the recorded one,
  so that a replay still checks the request translation (nothing is matched
  more loosely than a recorded case is);
- the body kept byte for byte, scrubbed as a recording is, and cut into
  **inferred** fragments, one per SSE event or NDJSON line (a vcrpy cassette
  keeps no network fragmentation); the metadata says ``fragments: inferred``.

A case read in place has its goldens beside the plain cassette
(``name.chunks.jsonl``, ``name.2.chunks.jsonl`` for a second call), written by
``check --update`` or ``pytest --update-golden`` like any other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from .._version import __version__
from ..adapters import BUILTIN_ROUTES
from ..errors import CassetteError
from .import_formats import (
    STREAM_TYPES,
    ForeignCassette,
    ForeignInteraction,
    infer_fragments,
    read_foreign,
)
from .import_options import NotImportable
from .import_requests import MappedRequest, detect_route, map_request
from .interaction import Interaction, headers_dict
from .scrub import Scrubber, mask_echoes, mask_echoes_in_body
from .store import FORMAT_VERSION, Cassette

if TYPE_CHECKING:
    from vcr.request import Request as VcrRequest

    from ..adapters.route_table import RouteTable

__all__ = ["INFERRED", "Inference", "NotACase", "Planned", "Remark", "case_metadata", "endpoint",
           "plan_interaction", "read_plain_case", "shown_uri"]

#: the value of the metadata key ``fragments`` in a case whose fragments were inferred
INFERRED = "inferred"
#: routes whose adapter reads NDJSON; every other built-in one reads SSE
_NDJSON_ROUTES = frozenset({"ollama"})
#: the paths LLM providers stream generations from
_LLM_PATH = re.compile(r"(/chat/completions|/completions|/responses|/messages|:streamGenerateContent|/api/chat"
                       r"|/api/generate)$")


@dataclass(frozen=True, slots=True)
class Inference:
    """Which plain vcrpy cassettes are read as cases, and as which route.

    ``route``: every streamed LLM call in them is that route's (``--route``).
    ``hosts``: host (or ``host:port``) -> route, from ``[tool.dsh_replay.hosts]``;
    without ``route``, a cassette is read only when its calls go to a host named there.
    """

    route: str | None = None
    hosts: Mapping[str, str] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return self.route is not None or bool(self.hosts)

    def reads(self, uri: str) -> bool:
        """Whether a call to ``uri`` is read in place: with ``route``, every one; else one to a host named."""
        if self.route is not None:
            return True
        parts = urlsplit(uri)
        host = (parts.hostname or "").lower()
        return host in self.hosts or (parts.port is not None and f"{host}:{parts.port}" in self.hosts)


class NotACase(CassetteError):
    """A plain cassette with no streamed LLM call to read: not a case, and no failure either."""


@dataclass(frozen=True, slots=True)
class Remark:
    """What reading says about one interaction: ``kind`` "note", "skipped" or "failed"."""

    position: int
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Planned:
    """A recorded interaction as it will be replayed: the call it makes, and what answers it."""

    position: int
    mapped: MappedRequest
    interaction: Interaction


def plan_interaction(item: ForeignInteraction, *, route: str | None, routes: RouteTable,
                     ) -> tuple[Planned | None, list[Remark]]:
    """``item`` as a replayable call (``route`` forced, else from its host and path), and the remarks on it."""
    remarks: list[Remark] = []

    def say(kind: str, message: str) -> tuple[None, list[Remark]]:
        remarks.append(Remark(item.position, kind, message))
        return None, remarks

    target = f"{item.method} {shown_uri(item.uri)}"
    if not item.streamed:
        return say("failed" if item.problem and item.content_type in STREAM_TYPES else "skipped",
                   item.problem or f"not streamed ({item.content_type or 'no content type'} response to {target})")
    if item.problem:
        return say("failed", f"{target}: {item.problem}")
    if not _llm_call(item):
        return say("skipped", f"{target}: a streamed response, but no LLM call (no model in the request, no "
                              "chat endpoint: an MCP server, a stored response read back...)")
    route = route or detect_route(item.uri, routes.hosts)
    if route is None:
        return say("failed", f"{target}: a streamed response from an endpoint of no built-in route; pass --route "
                             "ROUTE if it is one (dsh-replay routes lists them)")
    ndjson = STREAM_TYPES[item.content_type]
    if route in BUILTIN_ROUTES and (route in _NDJSON_ROUTES) != ndjson:
        return say("failed", f"{target}: the {route} adapter reads {'NDJSON' if route in _NDJSON_ROUTES else 'SSE'}, "
                             f"the response is {item.content_type}")
    scrubber = Scrubber()
    scrubbed = scrubber.request(item.uri, item.request_headers, item.request_body)
    request = _vcr_request(item.method, scrubbed.uri, scrubbed.body, scrubbed.headers)
    try:
        mapped = map_request(routes, route, request)
    except NotImportable as exc:
        return say("failed", f"{target}: {exc}")
    remarks += (Remark(item.position, "note", note) for note in (*item.decoded, *mapped.notes))
    body = mask_echoes_in_body(item.body, scrubbed.removed)[0]  # a key quoted back by the provider
    headers, _ = scrubber.headers(item.headers, scrubber.response_headers)
    sizes = infer_fragments(body, ndjson=ndjson)
    interaction = Interaction(
        request=request, status=item.status, reason=item.reason,
        headers=[(name, mask_echoes(value, scrubbed.removed)) for name, value in headers],
        body=body, fragments=[(0.0, size) for size in sizes] or None,
    )
    return Planned(item.position, mapped, interaction), remarks


def endpoint(mapped: MappedRequest) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """What the calls of one case share: the route, base URL and default query of the adapter that replays them."""
    return mapped.route, mapped.base_url, tuple(sorted(mapped.default_query.items()))


def case_metadata(foreign: ForeignCassette, route: str, calls: list[Planned]) -> dict[str, Any]:
    """The ``dsh_replay:`` metadata of the case that replays ``calls`` (one route and base URL) of ``foreign``."""
    first, *others = calls
    return {
        "format": FORMAT_VERSION,
        "route": route,
        "options": first.mapped.options.to_json(),
        **({"follow_ups": [call.mapped.options.to_json() for call in others]} if others else {}),
        "base_url": first.mapped.base_url,
        **({"adapter": {"default_query": dict(first.mapped.default_query)}} if first.mapped.default_query else {}),
        "fragments": INFERRED,
        "imported_from": {"file": foreign.path.as_posix(), "style": foreign.style,
                          "interactions": [call.position for call in calls]},
        "library": f"dsh-replay {__version__}",
    }


def read_plain_case(path: Path, routes: RouteTable, inference: Inference) -> Cassette:
    """The plain cassette at ``path`` as one case, in memory; nothing is written.

    :class:`NotACase` when it holds no streamed LLM call to read (or none to a
    host ``inference`` names); :class:`CassetteError` naming the interaction
    when one cannot be read, or when its calls go to two endpoints (``import``
    splits those into a case each).
    """
    foreign = read_foreign(path)
    if foreign is None:
        raise NotACase(f"{path} is not a cassette (no 'interactions' list)", path=str(path))
    if foreign.style == "dsh-replay":
        raise NotACase(f"{path} is a dsh-replay cassette, not a plain one", path=str(path))
    planned: list[Planned] = []
    failures: list[str] = []
    for item in foreign.interactions:
        if not inference.reads(item.uri):
            continue
        call, remarks = plan_interaction(item, route=inference.route, routes=routes)
        failures += (f"interaction {r.position}: {r.message}" for r in remarks if r.kind == "failed")
        if call is not None:
            planned.append(call)
    if failures:
        raise CassetteError(f"cassette {path} cannot be read as a case: {'; '.join(failures)}", path=str(path))
    if not planned:
        hosts = "" if inference.route is not None else " to a host of [tool.dsh_replay.hosts]"
        raise NotACase(f"{path} holds no streamed LLM call{hosts}", path=str(path))
    endpoints = {endpoint(call.mapped) for call in planned}
    if len(endpoints) > 1:
        listed = ", ".join(f"{route} at {base}" for route, base, *_ in sorted(endpoints))
        raise CassetteError(f"cassette {path} calls {len(endpoints)} endpoints ({listed}); one case replays one: "
                            "dsh-replay import writes a case for each", path=str(path))
    route = planned[0].mapped.route
    return Cassette(path=path, interactions=[call.interaction for call in planned],
                    metadata=case_metadata(foreign, route, planned))


def _llm_call(item: ForeignInteraction) -> bool:
    """Whether a streamed interaction is an LLM call: a generation endpoint, or a model in the request."""
    if _LLM_PATH.search(urlsplit(item.uri).path):
        return True
    try:
        body = orjson.loads(item.request_body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and "model" in body


def shown_uri(uri: str) -> str:
    """``uri`` for a message: no userinfo, no credential in its query or of a known shape anywhere.

    A plain cassette was never scrubbed, and its messages go into ``check``'s
    JSON, JUnit XML and reports, which CI keeps.
    """
    from .secrets import redact  # a message about a plain cassette only

    parts = urlsplit(Scrubber().uri(uri)[0])
    return redact(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
                  + (f"?{parts.query}" if parts.query else ""))


def _vcr_request(method: str, uri: str, body: bytes, headers: list[tuple[str, str]]) -> VcrRequest:
    from vcr.request import Request as VcrRequest

    return VcrRequest(method, uri, body, headers_dict(headers))
