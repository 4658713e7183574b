"""Which recorded request answers a live one, and why none does.

Requests match on method, path and query (vcrpy's matchers) and on the JSON
body compared as data, so key order never matters. When nothing matches, the
message shows the closest recorded request, the parts that differ, the JSON
fields that changed and a unified diff: a regression in an adapter's request
mapping reads as a review comment, not as "no match".
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ..errors import CassetteError

if TYPE_CHECKING:
    from vcr.request import Request as VcrRequest

    from .store import Interaction

__all__ = [
    "DIFF_CHARS", "DIFF_LINES", "Body", "Matcher", "Nearest", "Shown", "body_matcher", "changed_fields",
    "default_matchers", "describe_mismatch", "differing_parts", "explain", "nearest", "requests_match", "vcr_matchers",
]


def body_matcher(r1: VcrRequest, r2: VcrRequest) -> None:
    """Bodies equal as JSON data when both parse (key order free), else as bytes."""
    b1, b2 = r1.body or b"", r2.body or b""
    if b1 == b2:
        return
    try:
        same = orjson.loads(b1) == orjson.loads(b2)
    except orjson.JSONDecodeError:
        same = False
    if not same:
        raise AssertionError("bodies differ")


Matcher = Callable[["VcrRequest", "VcrRequest"], Any]


def default_matchers() -> tuple[Matcher, ...]:
    """vcrpy's method, path and query matchers, and JSON-as-data bodies."""
    matchers = vcr_matchers()
    return (matchers.method, matchers.path, matchers.query, body_matcher)


def vcr_matchers() -> ModuleType:
    """vcrpy's ``vcr.matchers``, without the patches of every HTTP client ``import vcr`` brings in.

    dsh-replay intercepts the clients itself and needs none of them; they cost a
    good part of a replay run's start-up (see :func:`.interaction.vcr_request_class`).
    """
    from .interaction import vcr_request_class

    vcr_request_class()
    return importlib.import_module("vcr.matchers")


_PART_NAMES = {"body_matcher": "body"}


def requests_match(matchers: Sequence[Matcher], wanted: VcrRequest, recorded: VcrRequest, path: object) -> bool:
    """Does every matcher take ``wanted`` for ``recorded``? A matcher that crashes is named (cassette ``path``)."""
    for matcher in matchers:
        try:
            if matcher(wanted, recorded) is False:
                return False
        except AssertionError:  # vcrpy's matchers say "no" by failing an assert
            return False
        except Exception as exc:
            name = getattr(matcher, "__name__", repr(matcher))
            raise CassetteError(
                f"cassette {path}: matcher {name} raised {type(exc).__name__}: {exc}; a matcher "
                "returns False (or fails an assert) when two requests differ",
                path=str(path),
            ) from exc
    return True


def changed_fields(old: Any, new: Any, where: str = "") -> list[str]:
    """The dotted paths (``messages[1].content``) at which two JSON values differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{where}.{key}" if where else str(key)
            if key not in old or key not in new:
                out.append(path)
            else:
                out += changed_fields(old[key], new[key], path)
        return out
    if isinstance(old, list) and isinstance(new, list):
        out = []
        for position in range(max(len(old), len(new))):
            path = f"{where}[{position}]"
            if position >= len(old) or position >= len(new):
                out.append(path)
            else:
                out += changed_fields(old[position], new[position], path)
        return out
    return [] if old == new else [where or "<body>"]


#: A body diff compares the start of each body, at most this many lines and ``DIFF_CHARS``
#: characters: difflib's time grows with the product of the two lengths, and a chat
#: history can run to megabytes. The message says when a body was cut.
DIFF_LINES = 1_000
DIFF_CHARS = 200_000


class Shown(NamedTuple):
    """A body as a diff shows it: its first lines, and whether the caps cut anything."""

    lines: list[str]
    cut: bool


@dataclass(frozen=True)  # not slotted: cached_property keeps :attr:`shown` in the instance's dict
class Body:
    """A request body read once: its bytes, and its JSON data when they parse.

    A diagnosis compares one request with many recorded ones; parsing its body
    (and pretty-printing it, :attr:`shown`) once is what keeps a big request cheap.
    """

    raw: bytes
    data: Any = None
    json: bool = False

    @classmethod
    def of(cls, body: bytes | str | None) -> Body:
        raw = body.encode() if isinstance(body, str) else bytes(body or b"")
        try:
            return cls(raw, orjson.loads(raw), True)
        except orjson.JSONDecodeError:
            return cls(raw)

    def same(self, other: Body) -> bool:
        """Equal as :func:`body_matcher` compares them: as bytes, or as JSON data when both parse."""
        return self.raw == other.raw or (self.json and other.json and self.data == other.data)

    @cached_property
    def shown(self) -> Shown:
        """JSON indented with sorted keys (else the text), at most ``DIFF_LINES`` lines and ``DIFF_CHARS``."""
        text = None
        if self.json:
            with contextlib.suppress(orjson.JSONEncodeError):  # nested deeper than orjson writes: the text
                text = orjson.dumps(self.data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
        if text is None:
            text = self.raw.decode("utf-8", "replace")
        # cut before splitting: a big body would otherwise become a million strings first
        lines = text[:DIFF_CHARS].splitlines()
        return Shown(lines[:DIFF_LINES], len(text) > DIFF_CHARS or len(lines) > DIFF_LINES)


def differing_parts(
    matchers: Sequence[Matcher], request: VcrRequest, body: Body, recorded: VcrRequest, recorded_body: Body
) -> list[str]:
    """The parts (``method``, ``path``, ``body``...) whose matcher tells ``request`` from ``recorded``.

    :func:`body_matcher` is answered from the parsed bodies: called, it would
    parse both again for every recorded interaction.
    """
    get_matchers_results = vcr_matchers().get_matchers_results

    parts: list[str] = []
    for matcher in matchers:
        if matcher is body_matcher:
            parts += [] if body.same(recorded_body) else ["body"]
        else:
            _, failures = get_matchers_results(request, recorded, [matcher])
            parts += [_PART_NAMES.get(name, name) for name, _ in failures]
    return parts


@dataclass(frozen=True, slots=True, kw_only=True)
class Nearest:
    """The recorded interaction closest to a request, and how it differs."""

    position: int
    interaction: Interaction
    body: Body
    parts: list[str]
    similarity: float

    @property
    def rank(self) -> tuple[int, float]:
        """Lower is closer: fewer differing parts, then the more similar body."""
        return len(self.parts), -self.similarity


def nearest(
    request: VcrRequest, body: Body, recorded: Sequence[Interaction], matchers: Sequence[Matcher],
    bodies: Sequence[Body] | None = None,
) -> Nearest | None:
    """The closest of ``recorded`` to ``request``, whose body is ``body``; None if nothing was recorded.

    ``bodies`` are the recorded requests' bodies, if the caller keeps them parsed.
    """
    best: Nearest | None = None
    for position, interaction in enumerate(recorded):
        theirs = bodies[position] if bodies is not None else Body.of(interaction.request.body)
        similarity = difflib.SequenceMatcher(None, body.shown.lines, theirs.shown.lines).ratio()
        parts = differing_parts(matchers, request, body, interaction.request, theirs)
        candidate = Nearest(position=position, interaction=interaction, body=theirs, parts=parts,
                            similarity=similarity)
        if best is None or candidate.rank < best.rank:
            best = candidate
    return best


def explain(request: VcrRequest, body: Body, near: Nearest) -> str:
    """Why ``request`` is not ``near``: the parts that differ, the JSON fields that changed, a body diff."""
    closest = near.interaction
    lines = [
        f"no recorded interaction matches {request.method} {request.uri}",
        f"closest recorded request (interaction {near.position}): {closest.request.method} {closest.request.uri}",
        f"differs in: {', '.join(near.parts) or 'nothing the matchers see'}",
    ]
    if "body" in near.parts:
        fields = changed_fields(near.body.data, body.data)
        if fields:
            lines.append(f"changed JSON fields: {', '.join(fields[:12])}")
        old, new = near.body.shown, body.shown
        diff = difflib.unified_diff(old.lines, new.lines, "recorded request", "this request", lineterm="", n=2)
        lines += itertools.islice(diff, 80)
        cut = [name for name, shown in (("the recorded request's", old), ("this request's", new)) if shown.cut]
        if cut:
            lines.append(f"(the diff compares only the start of {' and '.join(cut)} body: {DIFF_LINES:,} lines, "
                         f"{DIFF_CHARS:,} characters at most)")
    if closest.played:
        lines.append("(that interaction was already played; repeated requests play in recorded order)")
    return "\n".join(lines)


def describe_mismatch(request: VcrRequest, recorded: Sequence[Interaction], matchers: Sequence[Callable[..., Any]]) -> str:
    """Explain why ``request`` matched nothing: the closest recorded request and a body diff."""
    body = Body.of(request.body)
    near = nearest(request, body, recorded, matchers)
    if near is None:
        return f"no recorded interaction is left to play for {request.method} {request.uri}"
    return explain(request, body, near)
