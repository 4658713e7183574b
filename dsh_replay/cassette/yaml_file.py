"""A cassette file's YAML data, read fast and, for a big body, without copies.

:func:`load_yaml` builds what PyYAML's safe loader builds, in one direct pass
over libyaml's nodes; :func:`read_yaml_file` also keeps a big response body out
of the YAML parser (read once, straight into bytes).
"""

from __future__ import annotations

import codecs
import io
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

__all__ = ["BIG_BODY", "load_yaml", "read_yaml_file"]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR, _MERGE = "tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"


#: plain scalar -> its tag (the implicit resolvers' regular expressions, run once per value)
_RESOLVED: dict[str, str] = {}

#: the tags whose values are immutable and small, and (tag, scalar) -> the value built
_SHARED_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null"))
_SCALARS: dict[tuple[str, str], Any] = {}
_UNSEEN = object()

#: callables that take (a, b) and () and do nothing, as cheap as a call can be
_IGNORE_TWO: Callable[[Any, Any], object] = {}.get
_IGNORE_NONE: Callable[[], object] = ().__len__


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

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        if not self.yaml_path_resolvers:
            # libyaml's composer calls both around every node, to no effect without
            # path resolvers: a built-in that ignores its arguments is the cheapest call
            self.descend_resolver = _IGNORE_TWO
            self.ascend_resolver = _IGNORE_NONE

    def construct_document(self, node: Any) -> Any:
        constructors = self.yaml_constructors
        open_ids: set[int] = set()

        def build(node: Any) -> Any:
            kind = type(node)
            if kind is ScalarNode:
                tag = node.tag
                if tag == _STR:
                    return node.value
                if tag in _SHARED_TAGS:
                    # numbers, booleans and nulls repeat (fragment sizes most of all) and
                    # are immutable: each spelling is constructed once
                    key = (tag, node.value)
                    value = _SCALARS.get(key, _UNSEEN)
                    if value is _UNSEEN:
                        value = constructors[tag](self, node)
                        if len(_SCALARS) >= 50_000:
                            _SCALARS.clear()
                        _SCALARS[key] = value
                    return value
                scalar = constructors.get(tag)
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
