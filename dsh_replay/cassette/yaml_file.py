"""A cassette file's YAML data, read fast and, for a big body, without copies.

:func:`load_yaml` builds what PyYAML's safe loader builds, in one direct pass
over libyaml's nodes; :func:`read_yaml_file` also keeps a big response body out
of the YAML parser (read once, straight into bytes).

Both refuse what no cassette holds but a hostile file can. libyaml composes an
alias as the very node its anchor names, so nine lines of nine aliases each are
a few dozen nodes to compose and 9**9 strings to build (an "alias bomb": a few
hundred bytes, gigabytes, no end). No writer of cassettes writes aliases
(dsh-replay's dumpers are told not to, vcrpy's data shares nothing), so an alias
is refused: one of a collection, the kind that multiplies, where the building
meets its node a second time; one of a scalar by a walk over the nodes, only in
the rare text whose bytes may hold an alias at all (:func:`_may_have_alias`).
Without aliases each node is built once: what is built is no bigger than what
libyaml composed from the file. Nesting is capped too (:data:`MAX_DEPTH`), so
that the building never runs out of stack. Every problem with a file's YAML,
these and a syntax error alike, is a :class:`CassetteError` naming the file and
the line.
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
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import CassetteError
from .yaml_layout import DECLINED, read_layout

__all__ = ["BIG_BODY", "MAX_DEPTH", "load_yaml", "read_yaml_file"]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
_STR, _SEQ, _MAP, _MERGE = (_TAG + name for name in ("str", "seq", "map", "merge"))

#: the most collections a cassette may nest one in another (dsh-replay and vcrpy write fewer than ten)
MAX_DEPTH = 100

#: plain scalar -> its tag (the implicit resolvers' regular expressions, run once per value)
_RESOLVED: dict[str, str] = {}

#: the tags whose values are immutable and small, and (tag, scalar) -> the value built
_SHARED_TAGS = frozenset(_TAG + name for name in ("int", "float", "bool", "null"))
_SCALARS: dict[tuple[str, str], Any] = {}
_UNSEEN = object()
#: the tags a scalar node is built with here; the others (``!!seq`` on a scalar...) are the stock constructor's errors
_SCALAR_TAGS = _SHARED_TAGS | {_STR, _TAG + "binary", _TAG + "timestamp"}

#: callables that take (a, b) and () and do nothing, as cheap as a call can be
_IGNORE_TWO: Callable[[Any, Any], object] = {}.get
_IGNORE_NONE: Callable[[], object] = ().__len__


class _Unusual(Exception):
    """A document the direct construction does not take on (merge keys, odd tags)."""


class _Alias(Exception):
    """A node met a second time: the document has an alias."""


class _TooDeep(Exception):
    """Collections nested deeper than :data:`MAX_DEPTH`; ``line`` (1-based) is where the one too many starts."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


#: what reading a document can raise: ours, libyaml's, and the stock constructors' own (an
#: int of more digits than Python converts, a timestamp that is no date, ``!!int ""``...)
_UNREADABLE = (_Alias, _TooDeep, RecursionError, yaml.YAMLError, ValueError, LookupError, TypeError,
               AttributeError, OverflowError)


class _DirectLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader, building the document in one direct pass over libyaml's nodes.

    The stock constructor walks every node through generators, a state stack
    and a tag lookup; a cassette is tens of thousands of plain nodes (the
    fragment pairs most of all), and building them directly takes about half
    the time. Anything beyond plain mappings, sequences and scalars is left
    to the stock constructor (:func:`_load` hands it the nodes).
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

    def build(self, root: Node) -> Any:
        """The document at ``root``; :class:`_Alias`, :class:`_TooDeep` or :class:`_Unusual` where it is not plain.

        An alias of a collection, the kind that multiplies, is refused here; one
        of a scalar is not seen (scalars are most nodes: checking each would
        slow every load by a few percent), :func:`_load` looks for those first,
        in the few documents whose text may hold an alias.
        """
        constructors = self.yaml_constructors
        # every collection built so far: one met again is the node of an alias (one
        # still being built: a recursive alias)
        built_ids: set[int] = set()
        depth = 0  # collections open around the node being built

        def build(node: Any) -> Any:
            nonlocal depth
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
                if tag not in _SCALAR_TAGS:
                    raise _Unusual
                return constructors[tag](self, node)
            if id(node) in built_ids:
                raise _Alias
            built_ids.add(id(node))
            if depth == MAX_DEPTH:
                raise _TooDeep(node.start_mark.line + 1)
            depth += 1
            if kind is SequenceNode and node.tag == _SEQ:
                built: Any = list(map(build, node.value))
            elif kind is MappingNode and node.tag == _MAP:
                built = {}
                for key, value in node.value:
                    if key.tag == _MERGE:
                        raise _Unusual
                    built[build(key)] = build(value)
            else:
                raise _Unusual  # !!set, !!omap, !!pairs, a tag of no constructor...
            depth -= 1
            return built

        return build(root)


#: an alias: "*" and the first character of its name ([0-9A-Za-z_-] in libyaml and PyYAML both)
_ALIAS_START = re.compile(rb"\*[0-9A-Za-z_-]")
#: what cannot come just before an alias in a document that parses: a plain scalar's own
#: characters ("a*b" is one scalar), another "*" ("**bold**" in a body), a closing quote
_NOT_BEFORE_ALIAS = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_*\"'")
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _may_have_alias(data: bytes) -> bool:
    """False only when ``data`` certainly holds no alias: most cassettes have no "*" at all.

    A quick look at the bytes, so that only a text that may hold one pays for
    a walk over its nodes (:func:`_check_shape`); a false True costs that walk
    and nothing else.
    """
    if b"*" not in data:  # most cassettes: found at the speed of memchr
        return False
    if data.startswith(_UTF16_BOMS):  # UTF-16, the one other encoding YAML reads: not worth a closer look
        return True
    return any(at == 0 or data[at - 1] not in _NOT_BEFORE_ALIAS
               for at in (found.start() for found in _ALIAS_START.finditer(data)))


def _check_shape(root: Node) -> None:
    """:class:`_Alias` or :class:`_TooDeep`, from a walk over every node, each once and without recursion.

    For a text that may hold an alias of a scalar, and for a document the
    direct pass leaves to the stock constructor part way through.
    """
    seen: set[int] = set()
    pending: list[tuple[Node, int]] = [(root, 0)]
    while pending:
        node, depth = pending.pop()
        if id(node) in seen:
            raise _Alias
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            continue
        if depth == MAX_DEPTH:
            raise _TooDeep(node.start_mark.line + 1)
        children = node.value if isinstance(node, SequenceNode) else [n for pair in node.value for n in pair]
        pending += ((child, depth + 1) for child in children)


def _load(data: bytes) -> Any:
    """The document in ``data``; raises what :data:`_UNREADABLE` names."""
    loader = _DirectLoader(data)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        checked = _may_have_alias(data)
        if checked:
            _check_shape(root)
        try:
            return loader.build(root)
        except (_Unusual, TypeError, RecursionError):  # TypeError: a key that cannot be hashed
            if not checked:  # the depth of what the direct pass did not reach
                _check_shape(root)
            return loader.construct_document(root)  # the stock constructor, slower; nothing is shared by now
    finally:
        loader.dispose()


def load_yaml(data: bytes, source: str | os.PathLike[str] = "<bytes>") -> Any:
    """What ``yaml.load(data, Loader=CSafeLoader)`` builds, about twice as fast, for a document without aliases.

    An alias, collections nested deeper than :data:`MAX_DEPTH`, and anything
    the safe loader cannot load is a :class:`CassetteError` naming ``source``.
    """
    try:
        return _load(data)
    except _UNREADABLE as exc:
        raise _refusal(exc, os.fspath(source), data) from None


def _refusal(exc: BaseException, source: str, data: bytes) -> CassetteError:
    hostile = "so this file was edited by hand or is hostile"
    if isinstance(exc, _Alias):
        message = (
            f"cassette {source}: {_first_alias(data)}; cassettes written by dsh-replay or vcrpy never use "
            f"aliases, {hostile}. It is refused, not expanded (a few lines of aliases can stand for billions "
            "of values): write each value out in full, or re-record it with --record-mode=rewrite"
        )
    elif isinstance(exc, (_TooDeep, RecursionError)):
        where = f"line {exc.line} nests" if isinstance(exc, _TooDeep) else "it nests"  # RecursionError: pure-Python YAML
        message = (
            f"cassette {source}: {where} collections more than {MAX_DEPTH} deep; cassettes written by "
            f"dsh-replay or vcrpy nest fewer than ten, {hostile}. Re-record it with --record-mode=rewrite"
        )
    elif isinstance(exc, yaml.YAMLError):
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        message = f"cassette {source} is not valid YAML{where}; fix it or re-record it with --record-mode=rewrite"
    else:
        message = (f"cassette {source} holds a value YAML cannot build ({type(exc).__name__}: {exc}); "
                   "fix it or re-record it with --record-mode=rewrite")
    return CassetteError(message, path=source)


def _first_alias(data: bytes) -> str:
    """Where the first alias is, and its anchor: read from the parser's events, which expand nothing."""
    anchors: dict[str, int] = {}
    try:
        for event in yaml.parse(data, Loader=_Loader):
            if not isinstance(event, yaml.NodeEvent) or event.anchor is None or event.start_mark is None:
                continue
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent):
                name = event.anchor if len(event.anchor) <= 40 else event.anchor[:37] + "..."
                of = f" (the anchor &{name} of line {anchors[event.anchor]})" if event.anchor in anchors else ""
                return f"line {line} has the YAML alias *{name}{of}"
            anchors[event.anchor] = line  # the last one of a name is the one an alias names
    except yaml.YAMLError:
        pass
    return "it has a YAML alias"


#: a body this big is read from the file straight into bytes, not through a YAML string
BIG_BODY = 1 << 20
_BODY_HEAD = re.compile(rb"( *)string: \|([-+]?)\r?\n")
# what makes a literal block mean more than its bytes: YAML line breaks other than LF
# (CR, NEL, LS, PS), a BOM, control characters (a YAML error)
_NOT_VERBATIM = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2\x85|\xe2\x80[\xa8\xa9]|\xef\xbb\xbf")


def read_yaml_file(path: Path) -> Any:
    """The YAML data of a cassette file; a big response body comes out as bytes read once.

    A smaller file in the layout :meth:`Cassette.dumps` writes is read by
    :func:`read_layout`, without a YAML parser; any other by :func:`load_yaml`.
    A 100 MB body parsed as YAML passes through the file's bytes, libyaml's
    growing scalar buffer, a str of up to 4 bytes a character and then its
    UTF-8 bytes again: several times its size. A big literal block in the layout
    :meth:`Cassette.dumps` writes (``string: |`` and indented lines) is instead
    cut out while the file is read line by line, its lines dedented into one
    buffer, and a placeholder parsed in its place; so is a fragment list
    (:func:`_cut_fragments`). Any doubt (a character that a literal block does
    not hold verbatim, invalid UTF-8, a placeholder that does not land on a
    response body or its fragments) and the file is parsed as a whole.
    """
    with open(path, "rb", buffering=0) as file:
        data = file.readall() if os.fstat(file.fileno()).st_size < BIG_BODY else None
    if data is not None:
        value = read_layout(data)
        # bytes, not text: a body with one emoji would make the whole file a 4-bytes-per-character str
        return load_yaml(data, path) if value is DECLINED else value
    cut: dict[str, Any] = {}  # placeholder -> the body or fragment list cut out in its place
    rest = io.BytesIO()
    with path.open("rb") as lines:
        line = lines.readline()
        while line:
            head = _BODY_HEAD.fullmatch(line)
            if head is None:
                rest.write(_cut_fragments(line, cut) if line.startswith(b" ") else line)
                line = lines.readline()
                continue
            start = lines.tell()
            body, line = _literal_body(lines, len(head.group(1)), head.group(2))
            if body is None:
                return load_yaml(path.read_bytes(), path)
            if len(body) < BIG_BODY:  # a small one stays in the YAML as it is
                end = lines.tell() - len(line)
                lines.seek(start)
                rest.write(head.group(0) + lines.read(end - start))
                lines.seek(end + len(line))
                continue
            token = f"dsh-replay-big-body-{len(cut)}-{os.urandom(8).hex()}"
            cut[token] = body
            rest.write(head.group(1) + b"string: " + token.encode() + b"\n")
    try:
        data = _load(rest.getvalue())
        for raw in data["interactions"]:
            response = raw["response"]
            for holder, key in ((response["body"], "string"), (response.get("dsh_replay") or {}, "fragments")):
                if isinstance(placeholder := holder.get(key), str) and placeholder in cut:
                    holder[key] = cut.pop(placeholder)
    except _UNREADABLE:  # the whole file's error (with its own line numbers), or its real shape
        return load_yaml(path.read_bytes(), path)
    return load_yaml(path.read_bytes(), path) if cut else data  # one did not land where it was cut from


#: a fragment list as :meth:`Cassette.dumps` writes it (a repeated character class: a repeated group would stack
#: a backtracking point per pair), then a pair of plain decimals, which YAML reads as Python does
_FRAGMENT_FLOW = re.compile(rb"( +)fragments: \[\[([0-9., \[\]]*)\]\]\r?\n")
_PAIR = re.compile(rb"((?:0|[1-9][0-9]*)(?:\.[0-9]+)?), (0|[1-9][0-9]*)")


def _cut_fragments(line: bytes, cut: dict[str, Any]) -> bytes:
    """``line``, or a placeholder for the fragment list on it, whose pairs go into ``cut`` as YAML builds them.

    50,000 fragments (200 MB in 4 KiB) composed as YAML were 150,000 nodes, whose garbage stayed between
    the pairs kept, in pages the allocator could not give back: 0.4x the body, for as long as it was loaded."""
    flow = _FRAGMENT_FLOW.fullmatch(line)
    if flow is None:
        return line
    pairs: list[list[Any]] = []
    for pair in flow.group(2).split(b"], ["):
        plain = _PAIR.fullmatch(pair)
        if plain is None:
            return line
        ms, size = plain.groups()
        pairs.append([float(ms) if b"." in ms else int(ms), int(size)])
    token = f"dsh-replay-fragments-{len(cut)}-{os.urandom(8).hex()}"
    cut[token] = pairs
    return flow.group(1) + b"fragments: " + token.encode() + b"\n"


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
