"""One recorded exchange, and how it is read from a cassette's YAML data.

Reading checks every field where it is read (see ``_fields``): a cassette
edited by hand or written by another tool that has a wrong field is refused by
the field's path, e.g. ``interactions[0].response.dsh_replay.fragments[3]``, not
by the Python error it would cause in matching or in a paced replay.
"""

from __future__ import annotations

import codecs
import io
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..protocol.fields import (
    FieldError,
    check,
    is_int,
    is_list,
    is_mapping,
    is_name,
    is_number,
    is_text,
    or_null,
    read,
)

if TYPE_CHECKING:
    # vcr is imported where it is used: importing it at start-up would defeat
    # pytest-recording's assertion rewriting of vcr.matchers (a warning, an
    # error under filterwarnings=error) when both plugins are installed
    from vcr.request import Request as VcrRequest

__all__ = [
    "Interaction", "RecordedError", "as_bytes", "headers_dict", "interaction_from_dict", "load_yaml", "read_yaml_file",
]


@dataclass(frozen=True, slots=True)
class RecordedError:
    """A stream that failed while recording: the exception kind and where it struck."""

    kind: str
    message: str
    offset: int
    at_ms: float


@dataclass(slots=True, kw_only=True)
class Interaction:
    """One request and its (streamed) response."""

    request: VcrRequest
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    fragments: list[tuple[float, int]] | None = None
    complete: bool = True
    error: RecordedError | None = None
    played: bool = False

    def fragment_sizes(self) -> list[int]:
        if not self.fragments:
            return [len(self.body)] if self.body else []
        return [size for _, size in self.fragments]


def headers_dict(headers: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in headers:
        out.setdefault(name, []).append(value)
    return out


def as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"body must be a string, got {type(value).__name__}")


#: no recorded stream lasts a day: a later time is corrupt, and would make a paced replay sleep for ever
_MAX_MS = 24 * 60 * 60 * 1000.0
_BODY = "a string, !!binary bytes or null"
_MS = f"a time in ms from 0 to {_MAX_MS:.0f}"


def _is_body(value: Any) -> bool:
    return value is None or isinstance(value, (str, bytes))


def _is_ms(value: Any) -> bool:
    return is_number(value, 0, _MAX_MS)


def _is_fragment(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and _is_ms(value[0]) and is_int(value[1], 1)


def _is_url(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        _ = urlparse(value).port  # vcrpy's matchers read it: a broken host or port raises
    except ValueError:
        return False
    return True


def _is_header_map(value: Any) -> bool:
    return value is None or (isinstance(value, Mapping) and all(isinstance(name, str) for name in value))


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _headers(raw: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """The ``headers`` of a request or response: names to a string or a list of strings."""
    headers = read(raw, "headers", where, "a mapping of header names to lists of strings", _is_header_map, None)
    pairs: list[tuple[str, str]] = []
    for name, values in (headers or {}).items():
        if isinstance(values, str):
            values = [values]
        pairs += ((name, v) for v in check(values, f"{where}.headers.{name}", "a list of strings", _is_str_list))
    return pairs


def _request_from_dict(raw: Mapping[str, Any], where: str) -> VcrRequest:
    from vcr.request import Request as VcrRequest

    return VcrRequest(
        read(raw, "method", where, "an HTTP method such as POST", is_name),
        read(raw, "uri", where, "a URL", _is_url),
        read(raw, "body", where, _BODY, _is_body, None),
        headers_dict(_headers(raw, where)),
    )


def _response_body(response: Mapping[str, Any], where: str) -> bytes:
    """vcrpy's ``body: {string: ...}``, or a bare string as some tools write it."""
    body = response.get("body")
    if isinstance(body, Mapping):
        return as_bytes(read(body, "string", f"{where}.body", _BODY, _is_body, None))
    return as_bytes(check(body, f"{where}.body", f"a mapping with 'string', or {_BODY}", _is_body))


def _fragments(extra: Mapping[str, Any], body: bytes, where: str) -> list[tuple[float, int]] | None:
    raw = read(extra, "fragments", where, "a list of [ms, bytes] pairs, or null", or_null(is_list), None)
    if raw is None:
        return None
    if all(map(_is_fragment, raw)):  # the usual case, without naming each item's path
        fragments = [(float(ms), size) for ms, size in raw]
    else:
        what = f"an [ms since headers, bytes] pair: {_MS} and a positive integer byte count"
        fragments = [
            (float(ms), size)
            for ms, size in (check(item, f"{where}.fragments[{n}]", what, _is_fragment) for n, item in enumerate(raw))
        ]
    total = sum(size for _, size in fragments)
    if total != len(body):
        raise FieldError(f"{where}.fragments add up to {total} bytes but the body has {len(body)}")
    return fragments


def _recorded_error(extra: Mapping[str, Any], where: str) -> RecordedError | None:
    what = "a mapping with kind, message, offset and at_ms, or null"
    raw = read(extra, "error", where, what, or_null(is_mapping), None)
    if raw is None:
        return None
    where = f"{where}.error"
    return RecordedError(
        kind=read(raw, "kind", where, "an exception name such as ReadError", is_name),
        message=read(raw, "message", where, "a string or null", or_null(is_text), "") or "",
        # beyond the body's end is allowed: a body filter may have shortened the body
        offset=read(raw, "offset", where, "a byte offset (an integer >= 0)", lambda value: is_int(value, 0)),
        at_ms=float(read(raw, "at_ms", where, _MS, _is_ms, 0.0)),
    )


def interaction_from_dict(raw: Any, where: str) -> Interaction:
    check(raw, where, "a mapping with 'request' and 'response'", is_mapping)
    request = _request_from_dict(read(raw, "request", where, "a mapping", is_mapping), f"{where}.request")
    response = read(raw, "response", where, "a mapping", is_mapping)
    where = f"{where}.response"
    status = read(response, "status", where, "a mapping with 'code' and 'message'", is_mapping)
    extra = read(response, "dsh_replay", where, "a mapping or null", or_null(is_mapping), None) or {}
    body = _response_body(response, where)
    return Interaction(
        request=request,
        status=read(status, "code", f"{where}.status", "an integer HTTP status", lambda v: is_int(v, 100, 599)),
        reason=read(status, "message", f"{where}.status", "a string or null", or_null(is_text), "") or "",
        headers=_headers(response, where),
        body=body,
        fragments=_fragments(extra, body, f"{where}.dsh_replay"),
        complete=read(extra, "complete", f"{where}.dsh_replay", "true or false", lambda v: isinstance(v, bool), True),
        error=_recorded_error(extra, f"{where}.dsh_replay"),
    )


# -- reading the YAML file ----------------------------------------------------------

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR, _MERGE = "tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"


#: plain scalar -> its tag (the implicit resolvers' regular expressions, run once per value)
_RESOLVED: dict[str, str] = {}


class _Unusual(Exception):
    """A document the direct construction does not take on (merge keys, recursive aliases, odd tags)."""


class _DirectLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader, building the document in one direct pass over libyaml's nodes.

    The stock constructor walks every node through generators, a state stack
    and a tag lookup; a cassette is tens of thousands of plain nodes (the
    fragment pairs most of all), and building them directly takes about half
    the time. Anything beyond plain mappings, sequences and scalars is left
    to the stock constructor (:func:`load_yaml` starts over with it).
    """

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not ScalarNode or self.yaml_path_resolvers:
            return super().resolve(kind, value, implicit)
        if not implicit[0]:
            return _STR  # quoted or a block: a string, whatever it reads like
        # plain scalars repeat (fragment sizes, header names, true/false): resolved once each
        tag = _RESOLVED.get(value)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(value) <= 32:
                if len(_RESOLVED) >= 50_000:
                    _RESOLVED.clear()
                _RESOLVED[value] = tag
        return tag

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        if self.yaml_path_resolvers:
            super().descend_resolver(current_node, current_index)

    def ascend_resolver(self) -> None:
        if self.yaml_path_resolvers:
            super().ascend_resolver()

    def construct_document(self, node: Any) -> Any:
        constructors = self.yaml_constructors
        open_ids: set[int] = set()

        def build(node: Any) -> Any:
            kind = type(node)
            if kind is ScalarNode:
                if node.tag == _STR:
                    return node.value
                scalar = constructors.get(node.tag)
                if scalar is None:
                    raise _Unusual
                return scalar(self, node)
            if id(node) in open_ids:
                raise _Unusual  # an alias to an enclosing node: a recursive structure
            open_ids.add(id(node))
            if kind is SequenceNode:
                built: Any = [build(child) for child in node.value]
            elif kind is MappingNode:
                built = {}
                for key, value in node.value:
                    if key.tag == _MERGE:
                        raise _Unusual
                    built[build(key)] = build(value)
            else:
                raise _Unusual
            open_ids.discard(id(node))
            return built

        return build(node)


def load_yaml(data: bytes) -> Any:
    """What ``yaml.load(data, Loader=CSafeLoader)`` builds, about twice as fast."""
    loader = _DirectLoader(data)
    try:
        return loader.get_single_data()
    except (_Unusual, TypeError, RecursionError):  # TypeError: a key that cannot be hashed
        return yaml.load(data, Loader=_Loader)
    finally:
        loader.dispose()


#: a body this big is read from the file straight into bytes, not through a YAML string
BIG_BODY = 1 << 20
_BODY_HEAD = re.compile(rb"( *)string: \|([-+]?)\r?\n")
# what makes a literal block mean more than its bytes: YAML line breaks other than LF
# (CR, NEL, LS, PS), a BOM, control characters (a YAML error)
_NOT_VERBATIM = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2\x85|\xe2\x80[\xa8\xa9]|\xef\xbb\xbf")


def read_yaml_file(path: Path) -> Any:
    """The YAML data of a cassette file; a big response body comes out as bytes read once.

    A 100 MB body parsed as YAML passes through the file's bytes, libyaml's
    growing scalar buffer, a str of up to 4 bytes a character and then its
    UTF-8 bytes again: several times its size. A big literal block in the layout
    :meth:`Cassette.dumps` writes (``string: |`` and indented lines) is instead
    cut out while the file is read line by line, its lines dedented into one
    buffer, and a placeholder parsed in its place. Any doubt (a character that a
    literal block does not hold verbatim, invalid UTF-8, a placeholder that
    does not land on a response body) and the file is parsed as a whole.
    """
    if path.stat().st_size < BIG_BODY:
        # bytes, not text: a body with one emoji would make the whole file a
        # 4-bytes-per-character str on the way to the loader
        return load_yaml(path.read_bytes())
    bodies: dict[str, bytes] = {}
    rest = io.BytesIO()
    with path.open("rb") as lines:
        line = lines.readline()
        while line:
            head = _BODY_HEAD.fullmatch(line)
            if head is None:
                rest.write(line)
                line = lines.readline()
                continue
            start = lines.tell()
            body, line = _literal_body(lines, len(head.group(1)), head.group(2))
            if body is None:
                return load_yaml(path.read_bytes())
            if len(body) < BIG_BODY:  # a small one stays in the YAML as it is
                end = lines.tell() - len(line)
                lines.seek(start)
                rest.write(head.group(0) + lines.read(end - start))
                lines.seek(end + len(line))
                continue
            token = f"dsh-replay-big-body-{len(bodies)}-{os.urandom(8).hex()}"
            bodies[token] = body
            rest.write(head.group(1) + b"string: " + token.encode() + b"\n")
    try:
        data = load_yaml(rest.getvalue())
        placed = {raw["response"]["body"]["string"]: raw for raw in data["interactions"]}
    except (yaml.YAMLError, KeyError, TypeError, IndexError):
        return load_yaml(path.read_bytes())  # the whole file's error, or its real shape
    if not set(bodies) <= set(placed):
        return load_yaml(path.read_bytes())
    for token, body in bodies.items():
        placed[token]["response"]["body"]["string"] = body
    return data


def _literal_body(lines: io.BufferedReader, key_indent: int, chomp: bytes) -> tuple[bytes | None, bytes]:
    """(the block's content, the first line after it), reading from just after the ``|`` line."""
    body = io.BytesIO()  # grows in place: its final getvalue() is no copy
    decoder = codecs.getincrementaldecoder("utf-8")()
    indent, blank = 0, 0
    line = lines.readline()
    while line:
        text = line.rstrip(b"\n")
        stripped = text.lstrip(b" ")
        if not stripped:
            if text and (indent == 0 or len(text) > indent):
                return None, b""  # spaces that may be content: the YAML parser decides
            blank += 1  # an empty line: content only if more content follows (or kept)
            line = lines.readline()
            continue
        spaces = len(text) - len(stripped)
        if indent == 0:
            if spaces <= key_indent:
                break
            indent = spaces
        if spaces < indent:
            break
        if _NOT_VERBATIM.search(line):
            return None, b""
        body.write(b"\n" * blank)
        blank = 0
        piece = text[indent:] + b"\n"
        try:
            decoder.decode(piece)
        except UnicodeDecodeError:
            return None, b""
        body.write(piece)
        line = lines.readline()
    if chomp == b"+":
        body.write(b"\n" * blank)
    elif chomp == b"-" and body.tell():
        body.seek(-1, io.SEEK_END)
        body.truncate()
    return body.getvalue(), line
