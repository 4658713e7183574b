"""What the cassette server answers: which recorded interaction a request gets, and how it is played.

This is the server's core, with no socket in it: :class:`CassetteServer` takes
a request (method, target, headers, body) and returns a :class:`Playback` (the
recorded status and headers, the body's pieces with the seconds to wait before
each, and how the response ends) or a :class:`NoMatch` (the nearest cassette
and what differs). :mod:`.server_http` puts it on the wire.

Matching is replay's, with its default matchers (method, path and query as
vcrpy compares them, and the JSON body as data). Host and scheme never count,
so a client pointed at ``http://127.0.0.1:PORT`` matches requests recorded
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

How a response ends is how the recording ended (:func:`.pacing.stop_for`):

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
=====================================  ==========================================
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import orjson

from ..errors import CassetteError
from .matching import Matcher, changed_fields, default_matchers, describe_mismatch, requests_match
from .pacing import CLOCK, Clock, Fragmentation, Pacing, clip, parse_speed, piece_plan, stop_for
from .store import Cassette, Interaction

if TYPE_CHECKING:
    from vcr.request import Request as VcrRequest

__all__ = ["SELECT_HEADER", "SELECT_PREFIX", "CassetteServer", "Ending", "NoMatch", "Playback", "response_headers"]

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


def response_headers(interaction: Interaction) -> list[tuple[str, str]]:
    """The recorded response headers a server may send again, in recorded order."""
    return [(name, value) for name, value in interaction.headers if name.lower() not in _NOT_FORWARDED]


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
    """A request no cassette answers: the nearest cassette and the parts that differ."""

    message: str
    nearest: Path | None
    diff: list[str]

    def body(self) -> bytes:
        nearest = str(self.nearest) if self.nearest is not None else None
        error = {"type": "dsh_replay_no_match", "message": self.message, "nearest": nearest, "diff": self.diff}
        return orjson.dumps({"error": error})


@dataclass(slots=True)
class _Served:
    """One cassette and how often each of its interactions was played."""

    cassette: Cassette
    plays: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.plays = [0] * len(self.cassette.interactions)

    @property
    def name(self) -> str:
        return self.cassette.path.with_suffix("").as_posix()


def _ending(interaction: Interaction) -> Ending:
    stop = stop_for(interaction, None)
    if stop is None:
        return "complete"
    if stop.kind == "stall":
        return "stall"
    if stop.kind == "abandoned" or stop.error in _CLOSED_KINDS:
        return "cut"
    return "reset"


class CassetteServer:
    """Answers requests from cassettes; keeps, per cassette, which interactions were played.

    ``clock`` is what pacing sleeps through and reads the time from (tests
    pass a fake one and assert on the sleeps asked for); ``speed`` multiplies
    the recorded gaps (0: no waiting).
    """

    def __init__(
        self,
        cassettes: Sequence[Cassette],
        *,
        speed: float = 0.0,
        clock: Clock | None = None,
        matchers: Sequence[Matcher] | None = None,
    ) -> None:
        if not cassettes:
            raise CassetteError("the server needs at least one cassette to serve")
        self.speed = parse_speed(speed)
        self.clock = clock or CLOCK
        self.matchers = list(matchers if matchers is not None else default_matchers())
        self._served = [_Served(c) for c in cassettes]
        self.requests = 0
        self.unmatched = 0

    @classmethod
    def load(cls, paths: Sequence[Path], **options: Any) -> CassetteServer:
        """A server for the cassette files at ``paths`` (each read and checked now, not at the first request)."""
        return cls([Cassette.load(p) for p in paths], **options)

    @property
    def cassettes(self) -> list[Cassette]:
        return [served.cassette for served in self._served]

    def shadowed(self) -> list[tuple[Path, Path]]:
        """(cassette, earlier cassette) pairs where every request of the first is answered by the second.

        Such a cassette answers only when a request picks it by name.
        """
        out: list[tuple[Path, Path]] = []
        for later, served in enumerate(self._served):
            requests = [i.request for i in served.cassette.interactions]
            for earlier in self._served[:later]:
                if requests and all(any(self._matches(earlier, r, i) for i in earlier.cassette.interactions)
                                    for r in requests):
                    out.append((served.cassette.path, earlier.cassette.path))
                    break
        return out

    def answer(self, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes) -> Playback | NoMatch:
        """The response to one request; ``target`` is the request line's path and query."""
        from vcr.request import Request as VcrRequest

        self.requests += 1
        split = urlsplit(target)
        path, selected = _selection(split.path or "/")
        selected += [value for name, value in headers if name.lower() == SELECT_HEADER]
        host = next((value for name, value in headers if name.lower() == "host"), "127.0.0.1")
        uri = f"http://{host}{path}" + (f"?{split.query}" if split.query else "")
        wanted = VcrRequest(method.upper(), uri, body, {name: value for name, value in headers})
        candidates = self._candidates(selected)
        for served in candidates:
            positions = [n for n, i in enumerate(served.cassette.interactions) if self._matches(served, wanted, i)]
            if positions:
                unplayed = [n for n in positions if not served.plays[n]]
                return self._play(served, unplayed[0] if unplayed else positions[-1], repeated=not unplayed)
        self.unmatched += 1
        return self._no_match(wanted, candidates, selected)

    def _candidates(self, selected: list[str]) -> list[_Served]:
        names = [value.strip().removesuffix(".yaml").removesuffix(".yml").strip("/") for value in selected]
        if not names:
            return self._served
        return [s for s in self._served if any(s.name == name or s.name.endswith(f"/{name}") for name in names)]

    def _matches(self, served: _Served, wanted: VcrRequest, interaction: Interaction) -> bool:
        return requests_match(self.matchers, wanted, interaction.request, served.cassette.path)

    def _play(self, served: _Served, position: int, *, repeated: bool) -> Playback:
        served.plays[position] += 1
        interaction = served.cassette.interactions[position]
        plan = piece_plan(interaction, Fragmentation("recorded"))
        stop = stop_for(interaction, None)
        if stop is not None:
            plan = clip(plan, stop.at)
        # a stall's wait is the server's (stall_seconds), not pacing's: give pacing no read timeout
        pacing = Pacing(interaction.body, plan, self.speed, stop, None, False, self.clock)
        return Playback(
            cassette=served.cassette.path, position=position, status=interaction.status,
            reason=interaction.reason, headers=response_headers(interaction), pacing=pacing,
            ending=_ending(interaction), repeated=repeated,
        )

    def _no_match(self, wanted: VcrRequest, candidates: list[_Served], selected: list[str]) -> NoMatch:
        head = f"{wanted.method} {urlsplit(wanted.uri).path}"
        if not candidates:
            served = ", ".join(s.name for s in self._served[:20])
            return NoMatch(message=f"no served cassette is named {', '.join(selected)!r} (selected by "
                           f"{SELECT_HEADER} or {SELECT_PREFIX}NAME/-/); serving: {served}",
                           nearest=None, diff=["cassette"])
        scored = [self._distance(wanted, served) for served in candidates]
        _, _, diff, nearest = min(scored, key=lambda item: item[:2])
        interactions = nearest.cassette.interactions
        if not interactions:
            message = f"cassette {nearest.cassette.path} has no interactions; nothing matches {head}"
        else:
            message = f"cassette {nearest.cassette.path}: " + describe_mismatch(wanted, interactions, self.matchers)
        return NoMatch(message=message, nearest=nearest.cassette.path, diff=diff)

    def _distance(self, wanted: VcrRequest, served: _Served) -> tuple[int, float, list[str], _Served]:
        """How far ``wanted`` is from the cassette's nearest interaction: failed parts, body dissimilarity, the diff."""
        from vcr.matchers import get_matchers_results

        best: tuple[int, float, list[str], _Served] = (len(self.matchers) + 1, 1.0, ["no interactions"], served)
        for interaction in served.cassette.interactions:
            _, failures = get_matchers_results(wanted, interaction.request, self.matchers)
            parts = ["body" if name == "body_matcher" else name for name, _ in failures]
            # line by line, as describe_mismatch compares: character by character, a long prompt
            # would hold the event loop (and every stream on it) for seconds per no-match
            similarity = difflib.SequenceMatcher(None, _canonical(interaction.request.body).splitlines(),
                                                 _canonical(wanted.body).splitlines())
            candidate = (len(parts), 1.0 - similarity.ratio(), _diff(parts, interaction.request, wanted), served)
            best = min(best, candidate, key=lambda item: item[:2])
        return best


def _selection(path: str) -> tuple[str, list[str]]:
    """``/_dsh/openai/text/-/v1/chat`` -> (``/v1/chat``, [``openai/text``]); any other path is its own."""
    if path.startswith(SELECT_PREFIX) and "/-/" in path:
        name, _, rest = path[len(SELECT_PREFIX):].partition("/-/")
        return f"/{rest}", [name]
    if path.startswith(SELECT_PREFIX) and path.endswith("/-"):
        return "/", [path[len(SELECT_PREFIX):-2]]
    return path, []


def _json(body: Any) -> Any:
    try:
        return orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        return None


def _canonical(body: Any) -> str:
    data = _json(body)
    if data is None:
        return bytes(body or b"").decode("utf-8", "replace") if not isinstance(body, str) else body
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode()


def _diff(parts: list[str], recorded: VcrRequest, wanted: VcrRequest) -> list[str]:
    """The differing parts, the body's as the JSON fields that changed (``body.messages[1].content``)."""
    out: list[str] = []
    for part in parts:
        fields = changed_fields(_json(recorded.body), _json(wanted.body)) if part == "body" else []
        fields = [name for name in fields if name != "<body>"]  # not JSON on both sides: the body as a whole
        out += [f"body{name}" if name.startswith("[") else f"body.{name}" for name in fields] or [part]
    return out
