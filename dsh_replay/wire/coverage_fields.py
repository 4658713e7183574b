"""The field-level and line-level machinery of wire coverage (see :mod:`.coverage`).

- **Field paths** name a place in a JSON payload: keys joined by ``.``, a list's
  elements as ``[]`` (``choices[].delta.content``). :func:`field_paths` lists
  the leaves of a payload (an empty object or list is a leaf too).
- **Reads** are recorded by wrapping the payload (:func:`tracked`): a ``dict``
  and ``list`` subclass that note the path of every key or element handed out
  (``get``, ``[]``, ``in``, iteration) and wrap what they hand out, lazily, so a
  translator that reads three keys of a big event costs three wrappers.
  ``isinstance(x, dict)`` and orjson still see plain containers.
  :func:`unread_roots` then names the shallowest paths nobody read: a whole
  ``usage.server_tool_use`` object, not each of its leaves.
- **Lines**: :func:`sse_event_lines` finds the 1-based body line where a few
  chosen events start (the first of each kind) by looking for their data line,
  with byte searches rather than a pass over every line: a stream has a
  handful of kinds and may have a million events. NDJSON has one value per
  non-blank line (:func:`ndjson_event_lines`); SSE comments are lines opening
  with ``:`` (:func:`sse_comment_lines`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, SupportsIndex

__all__ = [
    "Reads",
    "field_paths",
    "ndjson_event_lines",
    "sse_comment_lines",
    "sse_event_lines",
    "tracked",
    "unread_roots",
]


class Reads:
    """The field paths a translator read from one payload."""

    __slots__ = ("paths",)

    def __init__(self) -> None:
        self.paths: set[str] = set()


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def tracked(value: Any, path: str, reads: Reads) -> Any:
    """``value`` (a parsed JSON value) recording into ``reads`` what is read of it below ``path``."""
    if type(value) is dict:
        return _TrackedDict(value, path, reads)
    if type(value) is list:
        return _TrackedList(value, path, reads)
    return value


class _TrackedDict(dict):  # type: ignore[type-arg]
    __slots__ = ("_path", "_reads")

    def __init__(self, data: dict[str, Any], path: str, reads: Reads) -> None:
        super().__init__(data)
        self._path = path
        self._reads = reads

    def _hand(self, key: str, value: Any) -> Any:
        path = _join(self._path, key)
        self._reads.paths.add(path)
        return tracked(value, path, self._reads)

    def __getitem__(self, key: str) -> Any:
        return self._hand(key, dict.__getitem__(self, key))

    def get(self, key: str, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self._hand(key, dict.__getitem__(self, key))
        return default

    def __contains__(self, key: object) -> bool:
        found = dict.__contains__(self, key)
        if found and isinstance(key, str):
            self._reads.paths.add(_join(self._path, key))
        return found

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return ((key, self._hand(key, value)) for key, value in dict.items(self))

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        return (self._hand(key, value) for key, value in dict.items(self))

    def pop(self, key: str, *default: Any) -> Any:
        if dict.__contains__(self, key):
            return self._hand(key, dict.pop(self, key))
        return dict.pop(self, key, *default)


class _TrackedList(list):  # type: ignore[type-arg]
    __slots__ = ("_path", "_reads")

    def __init__(self, data: list[Any], path: str, reads: Reads) -> None:
        super().__init__(data)
        self._path = path + "[]"
        self._reads = reads

    def _hand(self, value: Any) -> Any:
        self._reads.paths.add(self._path)
        return tracked(value, self._path, self._reads)

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        value = list.__getitem__(self, index)
        if isinstance(index, slice):
            return [self._hand(item) for item in value]
        return self._hand(value)

    def __iter__(self) -> Iterator[Any]:
        return (self._hand(item) for item in list.__iter__(self))


def field_paths(value: Any, whole: frozenset[str] = frozenset(), prefix: str = "") -> set[str]:
    """The leaf paths of a parsed JSON value; a path in ``whole`` is one leaf, however deep it goes."""
    out: set[str] = set()
    _walk(value, prefix, whole, out)
    return out


def _walk(value: Any, path: str, whole: frozenset[str], out: set[str]) -> None:
    if path in whole:
        out.add(path)
    elif isinstance(value, dict) and value:
        for key, item in dict.items(value):
            _walk(item, _join(path, key), whole, out)
    elif isinstance(value, list) and value:
        for item in list.__iter__(value):
            _walk(item, path + "[]", whole, out)
    elif path:
        out.add(path)


def unread_roots(paths: Iterable[str], read: set[str]) -> list[str]:
    """For each path, its shortest prefix nobody read (``usage.server_tool_use``), deduplicated and sorted."""
    roots: set[str] = set()
    for path in paths:
        for prefix in _prefixes(path):
            if prefix not in read:
                roots.add(prefix)
                break
    return sorted(roots)


def _prefixes(path: str) -> Iterator[str]:
    """``a.b[].c`` -> ``a``, ``a.b``, ``a.b[]``, ``a.b[].c``."""
    for end, char in enumerate(path):
        if end and (char == "." or (char == "[" and path.startswith("[]", end))):
            yield path[:end]
        if char == "]" and path[end - 1] == "[":
            yield path[: end + 1]
    yield path


def sse_event_lines(body: bytes, located: Sequence[tuple[int, str]]) -> dict[int, int]:
    """The 1-based body line where each located event starts: ``{ordinal: line}``.

    ``located`` is ``(ordinal, data)`` of a few events, in stream order (the
    first event of each kind). Each event's data is looked for as a whole
    ``data:`` line after the previous one found, and its block's first field
    line (an ``event:`` line above it) is where it starts; two events with the
    same data would be the same kind, so the first match is the right one.
    Events whose data spans several lines are not located.
    """
    lines: dict[int, int] = {}
    start, line, counted = 0, 1, 0
    for ordinal, data in located:
        found = _data_line(body, data.encode("utf-8", "surrogatepass"), start)
        if found < 0:
            continue
        line += body.count(b"\n", counted, found)
        counted = start = found
        top = found
        while top > 0:  # up over the field lines of its block
            above = _line_start(body, top - 1)
            if above == top - 1 or body[above:top].strip(b"\r\n")[:1] in (b"", b":"):
                break
            top = above
        lines[ordinal] = line - body.count(b"\n", top, found)
    return lines


def _data_line(body: bytes, data: bytes, start: int) -> int:
    """Where the first ``data:`` line holding exactly ``data`` starts, at or after ``start`` (-1: none).

    One search for the data itself (a search per spelling of the field would
    read the rest of the body once more for each), then a look at what is
    around each match.
    """
    at = start
    while data and (at := body.find(data, at)) >= 0:
        end = at + len(data)
        if end == len(body) or body[end] in b"\r\n":
            # ``data:`` then a space is the space-stripped spelling: data that opens with a space is
            # only ever the value of ``data: `` plus that data, never of ``data:`` before it
            for field in (b"data: ", b"data:") if data[:1] != b" " else (b"data: ",):
                top = at - len(field)
                if top >= 0 and body[top:at] == field and (top == 0 or body[top - 1] in b"\r\n"):
                    return top
        at += 1
    return -1


def _line_start(body: bytes, end: int) -> int:
    """The start of the line that ends at ``end`` (the index of its line break)."""
    cut = end - 1 if body[end - 1 : end + 1] == b"\r\n" else end
    return max(body.rfind(b"\n", 0, cut), body.rfind(b"\r", 0, cut)) + 1


def sse_comment_lines(body: bytes) -> list[int]:
    """The 1-based lines of SSE comments (lines opening with ``:``), LF or CRLF line ends."""
    out: list[int] = []
    at, line, counted = (0, 1, 0) if body.startswith(b":") else (-1, 1, 0)
    while True:
        if at >= 0:
            line += body.count(b"\n", counted, at)
            counted = at
            out.append(line)
        at = body.find(b"\n:", at + 1)
        if at < 0:
            return out
        at += 1


def ndjson_event_lines(body: bytes, upto: int) -> list[int]:
    """The 1-based line of each NDJSON value 0..``upto`` (blank lines hold none)."""
    return [n for n, line in enumerate(body.split(b"\n"), 1) if line.strip()][: upto + 1]
