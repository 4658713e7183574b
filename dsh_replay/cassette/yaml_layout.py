"""Cassette files read in the one narrow layout dsh-replay writes, without a YAML parser.

Loading a cassette is mostly YAML parsing, and most of that is not libyaml's
scanning but the Python objects around it: an event and a node per scalar,
thousands per file. :meth:`Cassette.dumps` writes a small subset of YAML, with
libyaml's emitter and its own splicing: block mappings and indentless block
sequences indented by two, scalars on one line (plain, single- or
double-quoted) but for single-quoted strings with line breaks, response bodies
as literal blocks (``|``, ``|-``, ``|+``), fragment lists as flow lists of
plain numbers, ``[]`` and ``{}``, and maybe a ``...`` document end.
:func:`read_layout` reads exactly that, a line at a time, and a literal block
by slicing the text, not line by line.

It declines (returns :data:`DECLINED`) on anything else, and on anything it is
not certain of: anchors, aliases, tags, comments, directives, flow mappings,
plain or double-quoted scalars over several lines, tabs, unusual indentation,
control characters, line breaks other than LF, timestamps, merge keys,
non-string keys, nesting deeper than :data:`MAX_NESTING`. The caller then
reads the file with libyaml
(``yaml_file.load_yaml``), which keeps every check and every error message; so
a hostile or hand-edited file is refused exactly as before. What it does read
is what ``yaml.load(data, Loader=CSafeLoader)`` builds: the same types, the
same values, the same key order. Plain scalars are resolved by the safe
loader's own implicit resolvers and constructors, each spelling once.
"""

from __future__ import annotations

import re
from typing import Any, Final

import yaml
from yaml.nodes import ScalarNode

__all__ = ["DECLINED", "MAX_NESTING", "read_layout"]


class _Declined:
    """The type of :data:`DECLINED`."""

    def __repr__(self) -> str:
        return "DECLINED"


#: what :func:`read_layout` returns for a text it does not read
DECLINED: Final = _Declined()

#: collections nested deeper than this are left to libyaml (which refuses them past its own cap)
MAX_NESTING = 40


class _Decline(Exception):
    """The text is not in the layout, or not certainly."""


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
_STR = _TAG + "str"
#: tags whose values the reader builds; others (timestamp, merge, value) decline
_BUILT = frozenset(_TAG + name for name in ("int", "float", "bool", "null"))

#: the bytes of a line break and of printable ASCII: a text of no others is plain text to YAML
_PRINTABLE_ASCII = b"\n" + bytes(range(0x20, 0x7F))
#: the characters from U+00A0 up that libyaml reads as more than themselves, or refuses: LS and PS
#: (line breaks), a BOM, two non-characters; below U+00A0, each but LF and printable ASCII (controls, tab,
#: CR, NEL); a str from strict UTF-8 has no surrogates
_NOT_PLAIN = frozenset("\u2028\u2029\ufeff\ufffe\uffff")

#: a plain scalar cannot start with these (indicators), but for "-" before a non-space; "?" and ":" can
#: too, but are declined, as are "---" and "..." (document markers at the start of a line)
_NOT_FIRST = frozenset("-?:,[]{}#&*!|>'\"%@` ")

#: a fragment list: pairs of plain decimals, the only flow list dsh-replay writes with items
_NUMBER = "(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?"
_PAIRS = re.compile(rf"\[\[{_NUMBER}, {_NUMBER}\](?:, \[{_NUMBER}, {_NUMBER}\])*\]")
_NUMBERS = re.compile(_NUMBER)

#: a double-quoted scalar on one line: its content, escapes kept
_DOUBLE = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"')
#: the escapes libyaml's and PyYAML's emitters write; any other backslash declines
_ESCAPE = re.compile(r"\\(?:([0abtnvfre\"\\N_LP])|x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8}))|\\")
_ESCAPED = {
    "0": "\0", "a": "\x07", "b": "\x08", "t": "\t", "n": "\n", "v": "\x0b", "f": "\x0c", "r": "\r", "e": "\x1b",
    '"': '"', "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}

#: a literal block's indentation n -> the search for the first line after it: not empty, not n spaces
_BLOCK_ENDS: dict[int, re.Pattern[str]] = {}

#: a plain scalar's spelling -> its value (a str, int, float, bool or None), each spelling resolved once
_PLAIN: dict[str, Any] = {}
_PLAIN_MAX = 50_000
_resolving: list[Any] = []  # the loader whose resolvers and constructors build plain scalars, made once


def read_layout(data: bytes) -> Any:
    """The document in ``data``, as the safe loader builds it, or :data:`DECLINED`."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return DECLINED
    if not text.endswith("\n"):
        return DECLINED
    odd = data.translate(None, _PRINTABLE_ASCII)  # UTF-8 still: no byte of a longer sequence is ASCII
    if odd:
        chars = odd.decode("utf-8")
        if min(chars) < "\xa0" or not _NOT_PLAIN.isdisjoint(chars):
            return DECLINED
    try:
        return _read(text)
    except _Decline:
        return DECLINED


def _block_end(indent: int) -> re.Pattern[str]:
    found = _BLOCK_ENDS.get(indent)
    if found is None:
        found = _BLOCK_ENDS[indent] = re.compile(f"\n(?!\n| {{{indent}}})")
    return found


def _plain(spelling: str) -> Any:
    """The value of a plain scalar, as the safe loader resolves and builds it."""
    value = _PLAIN.get(spelling, _PLAIN)
    if value is not _PLAIN:
        return value
    if not spelling or spelling[-1] in " :" or ": " in spelling or " #" in spelling or spelling[:3] in ("---", "..."):
        raise _Decline
    if spelling[0] in _NOT_FIRST and (spelling[0] != "-" or spelling[1:2] in ("", " ")):
        raise _Decline
    if not _resolving:
        loader = _Loader("")
        loader.dispose()
        _resolving.append(loader)
    loader = _resolving[0]
    tag = loader.resolve(ScalarNode, spelling, (True, False))
    if tag == _STR:
        value = spelling
    elif tag in _BUILT:
        try:
            value = loader.yaml_constructors[tag](loader, ScalarNode(tag, spelling))
        except Exception:  # e.g. an int of more digits than Python converts: libyaml's path says how
            raise _Decline from None
    else:
        raise _Decline  # a timestamp, a merge key, "="
    if len(spelling) <= 128:
        if len(_PLAIN) >= _PLAIN_MAX:
            _PLAIN.clear()
        _PLAIN[spelling] = value
    return value


def _closing(text: str, start: int) -> int:
    """Where the single-quoted scalar opened at ``start`` is closed (-1: not before the text ends)."""
    end = text.find("'", start + 1)
    while end >= 0 and text[end + 1 : end + 2] == "'":
        end = text.find("'", end + 2)
    return end


def _single(line: str) -> tuple[str, int]:
    """(the value, the index after it) of the single-quoted scalar ``line`` starts with."""
    end = _closing(line, 0)
    if end < 0:
        raise _Decline  # it goes on over the next lines
    inner = line[1:end]
    return (inner.replace("''", "'") if "''" in inner else inner), end + 1


def _folded(text: str, start: int, indent: int) -> tuple[str, int]:
    """(the value, where the next line starts) of a single-quoted scalar over several lines, opened at ``start``.

    As the emitters write one (a string with line breaks and no space next to
    any): each line break written twice, the lines after the first indented by
    more than ``indent``. A line break alone between two lines reads as a space,
    n empty lines as n line breaks; a line's indentation is no part of the value.
    """
    end = _closing(text, start)
    if end < 0 or text[end + 1 : end + 2] != "\n":
        raise _Decline
    first, *lines = text[start + 1 : end].split("\n")
    if not first or first[-1] == " ":
        raise _Decline  # a line break first, or spaces before one: the emitters write neither
    parts = [first]
    empty = 0
    for number, line in enumerate(lines, 1):
        if not line:
            empty += 1
            continue
        content = line.lstrip(" ")
        if len(line) - len(content) <= indent or (number < len(lines) and (not content or content[-1] == " ")):
            raise _Decline  # not indented enough, or spaces next to a line break
        parts += ("\n" * empty if empty else " ", content)
        empty = 0
    if empty:
        raise _Decline  # the closing quote at the start of a line
    value = "".join(parts)
    return (value.replace("''", "'") if "''" in value else value), end + 2


def _unescape(found: re.Match[str]) -> str:
    short, *codes = found.groups()
    if short is not None:
        return _ESCAPED[short]
    code = next((code for code in codes if code is not None), None)
    if code is None:
        raise _Decline  # an escape the emitters do not write, or a line break escaped
    point = int(code, 16)
    if 0xD800 <= point <= 0xDFFF or point > 0x10FFFF:
        raise _Decline
    return chr(point)


def _double(line: str) -> tuple[str, int]:
    """(the value, the index after it) of the double-quoted scalar ``line`` starts with."""
    found = _DOUBLE.match(line)
    if found is None:
        raise _Decline  # it goes on over the next lines
    inner = found.group(1)
    return (_ESCAPE.sub(_unescape, inner) if "\\" in inner else inner), found.end()


def _flow(spelling: str) -> list[Any]:
    if spelling == "[]":
        return []
    if _PAIRS.fullmatch(spelling) is None:
        raise _Decline
    numbers = [float(number) if "." in number else int(number) for number in _NUMBERS.findall(spelling)]
    return [list(pair) for pair in zip(numbers[::2], numbers[1::2], strict=True)]


#: what a line holds: a scalar, ``key:`` (a collection follows), a literal block's header, [], {},
#: a fragment list, the document's end, the start of a single-quoted scalar over several lines
_SCALAR, _NESTED, _LITERAL, _EMPTY_LIST, _EMPTY_MAP, _FLOW, _END, _FOLDED = range(8)
#: a line -> (indentation, "- " or not, key or None, what it holds, its value): lines repeat across cassettes
_LINES: dict[str, tuple[int, bool, str | None, int, Any]] = {}
_LINES_MAX = 20_000


def _line(line: str) -> tuple[int, bool, str | None, int, Any]:
    """What ``line`` holds, taken apart; :class:`_Decline` when it is not a line of the layout."""
    rest = line.lstrip(" ")
    indent = len(line) - len(rest)
    if not rest:
        raise _Decline  # an empty line between entries, or one of spaces
    dash = rest[0] == "-" and (rest[:2] == "- " or rest == "-")
    if dash:
        rest = rest[2:]
        if not rest or (rest[0] == "-" and (rest[:2] == "- " or rest == "-")):
            raise _Decline  # "-" alone, or a sequence in a sequence
    elif rest == "..." and indent == 0:
        return 0, False, None, _END, None
    key: Any = None
    first = rest[0]
    if dash and first == "'" and _closing(rest, 0) < 0:
        return indent, True, None, _FOLDED, len(line) - len(rest)
    if first == "'" or first == '"':
        quoted, end = _single(rest) if first == "'" else _double(rest)
        if end == len(rest):
            if not dash:
                raise _Decline  # a scalar where an entry should be
            after: str | None = rest
        elif end > 1000:
            raise _Decline  # too long for a simple key
        elif rest[end : end + 2] == ": ":
            key, after = quoted, rest[end + 2 :]
        elif end + 1 == len(rest) and rest[end] == ":":
            key, after = quoted, None
        else:
            raise _Decline
    else:
        colon = rest.find(": ")
        if colon > 0:
            key, after = _plain(rest[:colon]), rest[colon + 2 :]
        elif rest[-1] == ":":
            key, after = _plain(rest[:-1]), None
        elif dash:
            after = rest
        else:
            raise _Decline  # a scalar where an entry should be
        if after is not rest and (type(key) is not str or len(key) > 1000):
            raise _Decline  # a key that is no string, or too long for a simple key
    if after is None:
        return indent, dash, key, _NESTED, None
    if not after:
        raise _Decline  # a space and nothing after it
    first = after[0]
    if first == "|":
        if after not in ("|", "|-", "|+"):
            raise _Decline  # an indentation indicator, a comment
        return indent, dash, key, _LITERAL, after
    if first == "'" and _closing(after, 0) < 0:
        return indent, dash, key, _FOLDED, len(line) - len(after)
    if first == "'" or first == '"':
        value, end = _single(after) if first == "'" else _double(after)
        if end != len(after):
            raise _Decline
        return indent, dash, key, _SCALAR, value
    if first == "[":
        return (indent, dash, key, _EMPTY_LIST, None) if after == "[]" else (indent, dash, key, _FLOW, after)
    if first == "{":
        if after != "{}":
            raise _Decline  # a flow mapping
        return indent, dash, key, _EMPTY_MAP, None
    return indent, dash, key, _SCALAR, _plain(after)


def _read(text: str) -> dict[Any, Any]:
    """The document in ``text`` (which ends with a line break); :class:`_Decline` when it is not in the layout.

    ``top`` is the innermost open collection, its lines start at ``top_at``; ``stack`` holds the ones
    around it. A sequence is always a value in a mapping, at the mapping's own indentation (as libyaml's
    emitter writes it); a mapping that is a value is indented by two more than its key, one that is an
    item by two more than its "- ".
    """
    root: dict[Any, Any] = {}
    top: Any = root
    top_at, top_is_list = 0, False
    stack: list[tuple[Any, int, bool]] = []
    pending: Any = None  # the collection whose entry ``pending_key`` waits for its value on the next lines
    pending_key: Any = None
    pending_at = 0
    key: Any
    lines = _LINES
    find = text.find
    pos, size = 0, len(text)
    while pos < size:
        end = find("\n", pos)
        line = text[pos:end]
        pos = end + 1
        parsed = lines.get(line)
        if parsed is None:
            parsed = _line(line)
            if len(line) <= 200 and parsed[3] != _FLOW:
                if len(lines) >= _LINES_MAX:
                    lines.clear()
                lines[line] = parsed
        indent, dash, key, kind, value = parsed
        if pending is not None:  # the first line of a collection
            if dash:
                if indent != pending_at:
                    raise _Decline
                new: Any = []
            elif indent != pending_at + 2 or kind == _END:
                raise _Decline
            else:
                new = {}
            pending[pending_key] = new
            pending = None
            stack.append((top, top_at, top_is_list))
            if len(stack) >= MAX_NESTING:
                raise _Decline
            top, top_at, top_is_list = new, indent, dash
        elif indent != top_at or dash is not top_is_list:
            while indent < top_at:
                top, top_at, top_is_list = stack.pop()
            if indent != top_at:
                raise _Decline  # a line indented more than its collection: a scalar going on, or odd
            if top_is_list:
                if not dash:  # the sequence is over: the line is its mapping's next entry
                    top, top_at, top_is_list = stack.pop()
            elif dash:
                raise _Decline  # "- " where an entry of a mapping should be
        if dash:
            if key is None:  # an item of the sequence
                if kind == _SCALAR:
                    top.append(value)
                    continue
                top.append(None)
                key = len(top) - 1
            else:  # a mapping as an item, and its first entry
                item: dict[Any, Any] = {}
                top.append(item)
                stack.append((top, top_at, True))
                if len(stack) >= MAX_NESTING:
                    raise _Decline
                top, top_at, top_is_list = item, indent + 2, False
        if kind == _SCALAR:
            top[key] = value
        elif kind == _NESTED:
            pending, pending_key, pending_at = top, key, top_at
        elif kind == _LITERAL:
            top[key], pos = _literal(text, pos, top_at + 2, value)
        elif kind == _EMPTY_LIST:
            top[key] = []
        elif kind == _EMPTY_MAP:
            top[key] = {}
        elif kind == _FLOW:
            top[key] = _flow(value)
        elif kind == _FOLDED:
            top[key], pos = _folded(text, pos - len(line) - 1 + value, top_at)
        elif pending is not None or pos != size or not root:  # the document's end: the last line
            raise _Decline
    if pending is not None or not root:
        raise _Decline
    return root


def _literal(text: str, start: int, width: int, header: str) -> tuple[str, int]:
    """(a literal block's value, where the line after it starts), the block cut out of the text in one piece.

    Its lines are indented by ``width``; the first starts at ``start``.
    """
    if not text.startswith(" " * width, start) or text[start + width] in " \n":
        raise _Decline  # not the indentation the writer uses, or a first line it does not write
    end = _block_end(width).search(text, start).end()  # type: ignore[union-attr]  # the text ends with "\n"
    block = text[start + width : end].replace("\n" + " " * width, "\n")
    if header == "|":
        if block.endswith("\n\n"):
            block = block.rstrip("\n") + "\n"
    elif header == "|-":
        block = block.rstrip("\n")
    return block, end
