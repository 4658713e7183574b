"""Which recorded request answers a live one, and why none does.

Requests match on method, path and query (vcrpy's matchers) and on the JSON
body compared as data, so key order never matters. When nothing matches, the
message shows the closest recorded request, the parts that differ, the JSON
fields that changed and a unified diff: a regression in an adapter's request
mapping reads as a review comment, not as "no match".
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import CassetteError

if TYPE_CHECKING:
    from vcr.request import Request as VcrRequest

    from .store import Interaction

__all__ = ["Matcher", "body_matcher", "changed_fields", "default_matchers", "describe_mismatch", "requests_match"]


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
    from vcr import matchers

    return (matchers.method, matchers.path, matchers.query, body_matcher)
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


def _json_or_none(body: bytes | None) -> Any:
    try:
        return orjson.loads(body or b"")
    except orjson.JSONDecodeError:
        return None


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


def _pretty(body: bytes | None) -> list[str]:
    data = _json_or_none(body)
    if data is None:
        return (body or b"").decode("utf-8", "replace").splitlines()
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode().splitlines()


def describe_mismatch(request: VcrRequest, recorded: Sequence[Interaction], matchers: Sequence[Callable[..., Any]]) -> str:
    """Explain why ``request`` matched nothing: the closest recorded request and a body diff."""
    head = f"{request.method} {request.uri}"
    if not recorded:
        return f"no recorded interaction is left to play for {head}"
    from vcr.matchers import get_matchers_results

    scored = []
    for position, interaction in enumerate(recorded):
        _, failures = get_matchers_results(request, interaction.request, list(matchers))
        similarity = difflib.SequenceMatcher(None, _pretty(request.body), _pretty(interaction.request.body)).ratio()
        scored.append((len(failures), -similarity, position, failures, interaction))
    _, _, position, failures, closest = min(scored, key=lambda item: item[:3])
    parts = [_PART_NAMES.get(name, name) for name, _ in failures]
    lines = [
        f"no recorded interaction matches {head}",
        f"closest recorded request (interaction {position}): {closest.request.method} {closest.request.uri}",
        f"differs in: {', '.join(parts) or 'nothing the matchers see'}",
    ]
    if "body" in parts:
        fields = changed_fields(_json_or_none(closest.request.body), _json_or_none(request.body))
        if fields:
            lines.append(f"changed JSON fields: {', '.join(fields[:12])}")
        diff = difflib.unified_diff(
            _pretty(closest.request.body), _pretty(request.body), "recorded request", "this request", lineterm="", n=2
        )
        lines += list(diff)[:80]
    if closest.played:
        lines.append("(that interaction was already played; repeated requests play in recorded order)")
    return "\n".join(lines)
