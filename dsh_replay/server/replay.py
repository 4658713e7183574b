"""What the cassette server answers: which recorded interaction a request gets, and how it is played.

This is the server's core, with no socket in it: :class:`CassetteServer` takes
a request (method, target, headers, body) and returns a :class:`Playback` (the
recorded status and headers, the body's pieces with the seconds to wait before
each, and how the response ends) or a :class:`NoMatch` (the nearest cassette
and what differs). :mod:`.http` puts it on the wire. Finding the answer
(:meth:`CassetteServer.find`) is cheap; explaining a miss
(:meth:`CassetteServer.diagnose`) compares the request with every candidate, so
it is a step of its own that a server runs in a worker thread.

Matching is replay's, with its default matchers (method, path and query as
vcrpy compares them, and the JSON body as data) unless others are given
(``--match-on``); a 404 names the ones used. Host and scheme never count, so
a client pointed at ``http://127.0.0.1:PORT`` matches requests recorded
against the provider.

Which interaction plays:

- the first cassette (in the order the paths were given, folders sorted) with
  an interaction that matches answers. Cassettes often share a request (the
  same prompt recorded as a success and as a 429), so a client can pick:
  a path starting ``/_dsh/NAME/-/`` (a base URL such as
  ``http://127.0.0.1:PORT/_dsh/openai/text/-/v1``) or the request header
  ``x-dsh-replay-cassette: NAME`` limits the choice to the cassettes whose
  path, without ``.yaml``, ends with NAME;
- within that cassette, repeated identical requests get its matching
  interactions in recorded order, as replay does (a 429 then the 200 that
  followed it); each cassette keeps its own count;
- when every matching interaction was played, the last one plays again
  (vcrpy's ``allow_playback_repeats``): a server outlives any one test, and a
  client that retries or runs twice should not start getting 404s.

A body goes out in the recorded fragments, or re-cut as ``fragmentation``
asks; a ``fault`` (the conformance suite's) cuts, resets or stalls it
instead of the recorded ending. How a response ends is how the recording
ended (:func:`.pacing.stop_for`):

=====================================  ==========================================
recorded                               on the wire
=====================================  ==========================================
complete                               the body, then the final chunk
abandoned by the caller (incomplete)   the recorded bytes, then the connection is
                                       closed without the final chunk
a recorded ``RemoteProtocolError``     the same: the peer closed mid-body
any other recorded transport error     the recorded bytes, then a TCP reset
a recorded read timeout                the recorded bytes, then nothing until the
                                       client gives up (or ``stall_seconds``)
an injected truncation                 the body up to the cut, then the final chunk
=====================================  ==========================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import orjson

from ..cassette.matching import (
    Body,
    Matcher,
    Nearest,
    body_matcher,
    changed_fields,
    default_matchers,
    explain,
    nearest,
    requests_match,
)
from ..cassette.pacing import (
    CLOCK,
    Clock,
    Fault,
    Fragmentation,
    Pacing,
    clip,
    parse_speed,
    piece_plan,
    stop_for,
)
from ..cassette.scrub import Scrubber
from ..cassette.store import Cassette, Interaction
from ..errors import CassetteError

if TYPE_CHECKING:
    from vcr.request import Request as VcrRequest

__all__ = [
    "SELECT_HEADER", "SELECT_PREFIX", "CassetteServer", "Ending", "NoMatch", "Playback", "Unmatched", "ending_for",
    "forwardable", "matcher_names", "response_headers", "selection",
]

#: the request header that picks the cassettes a request may be answered from
SELECT_HEADER = "x-dsh-replay-cassette"

#: a path that starts ``/_dsh/NAME/-/`` is answered from cassette NAME, as the rest of the path
SELECT_PREFIX = "/_dsh/"

Ending = Literal["complete", "cut", "reset", "stall"]

# Framing is the server's: the body is re-cut into the recorded fragments and
# sent chunked. Content-Encoding stays: the recorded body is the bytes as they
# came off the wire (a recorder that only saw a decoded body drops the header).
_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te",
    "trailer", "transfer-encoding", "upgrade", "content-length",
})

# a recorded error kind that means the peer closed the connection, rather than reset it
_CLOSED_KINDS = frozenset({"RemoteProtocolError", "IncompleteRead", "ProtocolError"})

# a 404's diff names this many fields, then counts the rest: a chat history that grew by
# 100,000 messages differs at 100,000 positions, and the list would be megabytes
_DIFF_FIELDS = 49


def forwardable(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``headers`` less the framing and hop-by-hop ones, which the server sets itself; order kept."""
    return [(name, value) for name, value in headers if name.lower() not in _NOT_FORWARDED]


def response_headers(interaction: Interaction) -> list[tuple[str, str]]:
    """The recorded response headers a server may send again, in recorded order."""
    return forwardable(interaction.headers)


def matcher_names(matchers: Sequence[Matcher]) -> list[str]:
    """The names ``--match-on`` and ``match_on`` give ``matchers`` (``body`` for ours)."""
    return ["body" if m is body_matcher else getattr(m, "__name__", repr(m)) for m in matchers]


def ending_for(kind: str) -> Ending:
    """How a stream that failed with the exception ``kind`` (as a cassette names it) ends on the wire."""
    if kind in ("ReadTimeout", "TimeoutException"):
        return "stall"
    return "cut" if kind in _CLOSED_KINDS else "reset"


@dataclass(frozen=True, slots=True, kw_only=True)
class Playback:
    """A recorded response to send: head, paced pieces, and how it ends."""

    cassette: Path
    position: int
    status: int
    reason: str
    headers: list[tuple[str, str]]
    pacing: Pacing
    ending: Ending
    repeated: bool

    def steps(self) -> Iterator[tuple[float, bytes]]:
        """``(seconds to wait, piece)`` pairs; the wait before a reset or stall comes last with ``b""``."""
        for delay, piece in self.pacing.steps():
            yield delay, b"" if piece is None else piece


@dataclass(frozen=True, slots=True, kw_only=True)
class NoMatch:
    """A request no cassette answers: the nearest cassette and the parts that differ.

    ``diff`` names at most 49 parts or JSON fields, then ``... and N more``.
    """

    message: str
    nearest: Path | None
    diff: list[str]
    #: the matchers the request was compared with (``method``, ``path``, ``query``, ``body``...)
    matchers: list[str] = field(default_factory=list)

    def body(self) -> bytes:
        nearest = str(self.nearest) if self.nearest is not None else None
        error = {"type": "dsh_replay_no_match", "message": self.message, "nearest": nearest, "diff": self.diff,
                 "matchers": self.matchers}
        return orjson.dumps({"error": error})


@dataclass(frozen=True, slots=True, kw_only=True)
class Unmatched:
    """A request no interaction answers, with what :meth:`CassetteServer.diagnose` needs to say why."""

    request: VcrRequest
    body: Body
    candidates: list[_Served]
    selected: list[str]


@dataclass(slots=True)
class _Served:
    """One cassette, its requests' bodies parsed once, and how often each of its interactions was played."""

    cassette: Cassette
    bodies: list[Body] = field(init=False)
    plays: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.bodies = [Body.of(i.request.body) for i in self.cassette.interactions]
        self.plays = [0] * len(self.cassette.interactions)

    @property
    def name(self) -> str:
        return self.cassette.path.with_suffix("").as_posix()


def _ending(interaction: Interaction, fault: Fault | None) -> Ending:
    stop = stop_for(interaction, fault)
    if stop is None or stop.kind == "truncate":
        return "complete"  # an injected truncation ends the body cleanly, early: the terminal event is missing
    if stop.kind == "stall":
        return "stall"
    return "cut" if stop.kind == "abandoned" else ending_for(stop.error)


class CassetteServer:
    """Answers requests from cassettes; keeps, per cassette, which interactions were played.

    ``clock`` is what pacing sleeps through and reads the time from (tests
    pass a fake one and assert on the sleeps asked for); ``speed`` multiplies
    the recorded gaps (0: no waiting); ``fragmentation`` re-cuts the bodies;
    ``fault`` strikes every played interaction (or the one it names).
    """

    def __init__(
        self,
        cassettes: Sequence[Cassette],
        *,
        speed: float = 0.0,
        clock: Clock | None = None,
        matchers: Sequence[Matcher] | None = None,
        fragmentation: Fragmentation | str = "recorded",
        fault: Fault | None = None,
    ) -> None:
        if not cassettes:
            raise CassetteError("the server needs at least one cassette to serve")
        self.speed = parse_speed(speed)
        self.fragmentation = Fragmentation.parse(fragmentation)
        self.fault = fault
        self.clock = clock or CLOCK
        self.matchers = list(matchers if matchers is not None else default_matchers())
        # body_matcher's place is taken by Body.same on bodies parsed once: called, it would parse a big
        # request again for every recorded interaction. The matchers around it keep their order.
        self._by_body = body_matcher in self.matchers
        at = self.matchers.index(body_matcher) if self._by_body else len(self.matchers)
        self._before, self._after = self.matchers[:at], self.matchers[at + 1:]
        self._served = [_Served(c) for c in cassettes]
        # a request is scrubbed as recording scrubbed it before it is matched: a client sends its
        # real key where the cassette holds REDACTED
        self._scrubber = Scrubber()
        self.requests = 0
        self.unmatched = 0

    @classmethod
    def load(cls, paths: Sequence[Path], preloaded: Mapping[Path, Cassette] | None = None,
             **options: Any) -> CassetteServer:
        """A server for the cassette files at ``paths`` (each read and checked now, not at the first request).

        ``preloaded``: those of ``paths`` already read (plain vcrpy cassettes read as cases).
        """
        ready = preloaded or {}
        return cls([ready.get(p) or Cassette.load(p) for p in paths], **options)

    @property
    def cassettes(self) -> list[Cassette]:
        return [served.cassette for served in self._served]

    def shadowed(self) -> list[tuple[Path, Path]]:
        """(cassette, earlier cassette) pairs where every request of the first is answered by the second.

        Such a cassette answers only when a request picks it by name.
        """
        out: list[tuple[Path, Path]] = []
        for later, served in enumerate(self._served):
            requests = list(zip((i.request for i in served.cassette.interactions), served.bodies, strict=True))
            for earlier in self._served[:later]:
                if requests and all(any(self._matches(earlier, r, body, n) for n in range(len(earlier.plays)))
                                    for r, body in requests):
                    out.append((served.cassette.path, earlier.cassette.path))
                    break
        return out

    def answer(self, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes) -> Playback | NoMatch:
        """The response to one request; ``target`` is the request line's path and query."""
        found = self.find(method, target, headers, body)
        return found if isinstance(found, Playback) else self.diagnose(found)

    def find(self, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes) -> Playback | Unmatched:
        """The recorded response to one request, or the request to :meth:`diagnose` when nothing answers it.

        The request's body is parsed once and compared as data with each recorded one.
        """
        from vcr.request import Request as VcrRequest

        self.requests += 1
        split = urlsplit(target)
        path, selected = selection(split.path or "/", headers)
        host = next((value for name, value in headers if name.lower() == "host"), "127.0.0.1")
        uri = f"http://{host}{path}" + (f"?{split.query}" if split.query else "")
        scrubbed = self._scrubber.request(uri, headers, body)
        wanted = VcrRequest(method.upper(), scrubbed.uri, scrubbed.body, dict(scrubbed.headers))
        parsed = Body.of(scrubbed.body)
        candidates = self._candidates(selected)
        for served in candidates:
            positions = [n for n in range(len(served.plays)) if self._matches(served, wanted, parsed, n)]
            if positions:
                unplayed = [n for n in positions if not served.plays[n]]
                return self._play(served, unplayed[0] if unplayed else positions[-1], repeated=not unplayed)
        self.unmatched += 1
        return Unmatched(request=wanted, body=parsed, candidates=candidates, selected=selected)

    def diagnose(self, unmatched: Unmatched) -> NoMatch:
        """Why nothing answers a request: the nearest cassette and what differs.

        It changes nothing and reads nothing :meth:`find` changes, so it may run
        in a worker thread while the server goes on answering.
        """
        wanted = unmatched.request
        if not unmatched.candidates:
            serving = ", ".join(s.name for s in self._served[:20])
            return NoMatch(message=f"no served cassette is named {', '.join(unmatched.selected)!r} (selected by "
                           f"{SELECT_HEADER} or {SELECT_PREFIX}NAME/-/); serving: {serving}",
                           nearest=None, diff=["cassette"], matchers=matcher_names(self.matchers))
        scored = [(nearest(wanted, unmatched.body, s.cassette.interactions, self.matchers, s.bodies), s)
                  for s in unmatched.candidates]
        # a cassette without interactions is the nearest only when every candidate is one
        near, served = min(scored, key=lambda item: (len(self.matchers) + 1, 0.0) if item[0] is None else item[0].rank)
        path = served.cassette.path
        if near is None:
            return NoMatch(message=f"cassette {path} has no interactions; nothing matches {wanted.method} "
                           f"{urlsplit(wanted.uri).path}", nearest=path, diff=["no interactions"],
                           matchers=matcher_names(self.matchers))
        used = matcher_names(self.matchers)
        return NoMatch(message=f"cassette {path}: {explain(wanted, unmatched.body, near)}\n(matched on: "
                       f"{', '.join(used)})", nearest=path, diff=_diff(near, unmatched.body), matchers=used)

    def _candidates(self, selected: list[str]) -> list[_Served]:
        names = [value.strip().removesuffix(".yaml").removesuffix(".yml").strip("/") for value in selected]
        if not names:
            return self._served
        return [s for s in self._served if any(s.name == name or s.name.endswith(f"/{name}") for name in names)]

    def _matches(self, served: _Served, wanted: VcrRequest, body: Body, position: int) -> bool:
        """Does interaction ``position`` answer ``wanted`` (whose body is ``body``)?"""
        recorded, path = served.cassette.interactions[position].request, served.cassette.path
        return (requests_match(self._before, wanted, recorded, path)
                and (not self._by_body or body.same(served.bodies[position]))
                and requests_match(self._after, wanted, recorded, path))

    def _play(self, served: _Served, position: int, *, repeated: bool) -> Playback:
        served.plays[position] += 1
        interaction = served.cassette.interactions[position]
        fault = self.fault if self.fault is not None and self.fault.interaction in (None, position) else None
        plan = piece_plan(interaction, self.fragmentation)
        stop = stop_for(interaction, fault)
        if stop is not None:
            plan = clip(plan, stop.at)
        # a stall's wait is the server's (stall_seconds), not pacing's: give pacing no read timeout
        pacing = Pacing(interaction.body, plan, self.speed, stop, None, False, self.clock)
        return Playback(
            cassette=served.cassette.path, position=position, status=interaction.status,
            reason=interaction.reason, headers=response_headers(interaction), pacing=pacing,
            ending=_ending(interaction, fault), repeated=repeated,
        )


def selection(path: str, headers: Sequence[tuple[str, str]] = ()) -> tuple[str, list[str]]:
    """The path to match and the cassette names a request picks (path prefix first, then headers).

    ``/_dsh/openai/text/-/v1/chat`` -> (``/v1/chat``, [``openai/text``]); any other path is its own.
    """
    picked = [value for name, value in headers if name.lower() == SELECT_HEADER]
    if path.startswith(SELECT_PREFIX) and "/-/" in path:
        name, _, rest = path[len(SELECT_PREFIX):].partition("/-/")
        return f"/{rest}", [name, *picked]
    if path.startswith(SELECT_PREFIX) and path.endswith("/-"):
        return "/", [path[len(SELECT_PREFIX):-2], *picked]
    return path, picked


def _diff(near: Nearest, wanted: Body) -> list[str]:
    """The differing parts, the body's as the JSON fields that changed (``body.messages[1].content``)."""
    out: list[str] = []
    for part in near.parts:
        fields = changed_fields(near.body.data, wanted.data) if part == "body" else []
        fields = [name for name in fields if name != "<body>"]  # not JSON on both sides: the body as a whole
        out += [f"body{name}" if name.startswith("[") else f"body.{name}" for name in fields] or [part]
    if len(out) > _DIFF_FIELDS + 1:
        out[_DIFF_FIELDS:] = [f"... and {len(out) - _DIFF_FIELDS} more"]
    return out
