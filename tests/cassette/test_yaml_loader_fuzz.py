"""The cassette YAML loader against libyaml's safe loader, on generated documents.

For a document without aliases, ``load_yaml`` builds exactly what
``yaml.load(..., Loader=CSafeLoader)`` builds, or both refuse it; a document
with an alias is refused; and nothing but a ``CassetteError`` ever comes out.
Two sources of documents: YAML text written here (anchors, aliases, tags of
every kind, odd scalars, flow and block style, undefined and recursive
aliases), and Python data dumped by PyYAML (shared lists and maps become
anchors and aliases).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dsh_replay.cassette import yaml_file as reading
from dsh_replay.errors import CassetteError

from .yaml_values import canonical

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _has_alias(text: bytes) -> bool | None:
    """Whether libyaml's parser meets an alias in ``text`` (``None``: it stops at an error first)."""
    try:
        return any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=_Loader))
    except yaml.YAMLError:
        return None


def _ours(text: bytes) -> tuple[str, Any]:
    try:
        return "built", reading.load_yaml(text, "fuzzed.yaml")
    except CassetteError as exc:  # anything else fails the test as it is
        assert exc.path == "fuzzed.yaml" and str(exc).startswith("cassette fuzzed.yaml")
        return "refused", str(exc)


def _check_against_libyaml(text: bytes) -> str:
    """Assert the loader's contract on ``text``; the outcome, for the coverage of the examples."""
    outcome, value = _ours(text)
    if _has_alias(text):
        assert outcome == "refused", text
        assert "YAML alias *" in value or "not valid YAML" in value, value
        return "alias"
    try:
        expected = yaml.load(text, Loader=_Loader)
    except Exception:  # libyaml refuses it, however it does (a ValueError for a 5,000-digit int...)
        assert outcome == "refused", (text, value)
        return "refused"
    assert outcome == "built", (text, value)
    assert canonical(value) == canonical(expected), text
    return "built"


# -- YAML text written here ----------------------------------------------------------------

_PLAIN = [
    "0", "-17", "+12", "0x1F", "0o17", "017", "0b101", "1_000", "190:20:30", "1.5", "-.5", "1e3",
    "6.8523015e+5", "1_0.5", ".inf", "-.Inf", ".NaN", ".nan", "true", "False", "yes", "No", "on", "OFF",
    "y", "n", "~", "null", "Null", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
    "2002-12-14 23:00:00", "2001-13-45", "=", "<<", "abc", "a b", "x:y", "-", "a*b", "1" * 4400, "aGVsbG8=", "!!!",
]
_TAGS = [
    "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!binary", "!!seq", "!!map", "!!set",
    "!!omap", "!!pairs", "!!merge", "!!value", "!!python/object:os.system", "!local", "!",
    "!<tag:yaml.org,2002:str>",
]
_NAMES = ["a", "b", "id001", "x-1", "A_2"]
#: what YAML takes unescaped in a double-quoted scalar, and escapes it reads
_PRINTABLE = st.characters(codec="utf-8", exclude_categories=["Cc", "Cs", "Cn", "Co"], exclude_characters="\\")
_ESCAPES = ["\\n", "\\t", "\\x41", "\\u00e9", "\\U0001F642", "\\\\", "\\0", "\\N", "\\_", "\\q"]


class _Text:
    """Builds one document's text, drawing as it goes, and knows which anchors it has defined."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.anchors: list[str] = []

    def properties(self) -> str:
        parts = []
        if self.draw(st.integers(0, 5)) == 0:
            name = self.draw(st.sampled_from(_NAMES)) + str(len(self.anchors))
            self.anchors.append(name)
            parts.append("&" + name)
        if self.draw(st.integers(0, 3)) == 0:
            parts.append(self.draw(st.sampled_from(_TAGS)))
        return " ".join(parts)

    def alias(self) -> str | None:
        # mostly a defined anchor (an enclosing one makes a recursive document), now and then not
        if self.draw(st.integers(0, 15)) != 0:
            return None
        if self.anchors and self.draw(st.integers(0, 5)) != 0:
            return "*" + self.draw(st.sampled_from(self.anchors))
        return "*undefined"

    def scalar(self) -> str:
        kind = self.draw(st.integers(0, 3))
        if kind == 0:
            text = self.draw(st.text(_PRINTABLE, max_size=6) | st.sampled_from(_ESCAPES))
            return '"' + text.replace('"', '\\"') + '"'
        if kind == 1:
            return "'" + self.draw(st.text("ab '*&:#", max_size=6)).replace("'", "''") + "'"
        return self.draw(st.sampled_from(_PLAIN))

    def flow(self, depth: int) -> str:
        alias = self.alias()
        if alias is not None:
            return alias
        props = self.properties()
        kind = self.draw(st.integers(0, 4)) if depth > 0 else 0
        if kind <= 2:
            body = self.scalar()
        elif kind == 3:
            items = [self.flow(depth - 1) for _ in range(self.draw(st.integers(0, 3)))]
            body = "[" + ", ".join(items) + "]"
        else:
            pairs = [f"{self.flow(depth - 1)}: {self.flow(depth - 1)}" for _ in range(self.draw(st.integers(0, 3)))]
            body = "{" + ", ".join(pairs) + "}"
        return f"{props} {body}" if props else body

    def block(self, depth: int, indent: int) -> list[str]:
        """A block sequence or mapping at ``indent``; a nested block value goes on the lines below its key."""
        pad = " " * indent
        lines: list[str] = []
        sequence = self.draw(st.booleans())
        for _ in range(self.draw(st.integers(1, 3))):
            head = f"{pad}- " if sequence else f"{pad}{self.flow(0)}: "
            if depth > 0 and self.draw(st.booleans()):
                props = self.properties()
                lines.append(head + props if props else head.rstrip())
                lines += self.block(depth - 1, indent + 2)
            else:
                lines.append(head + self.flow(depth))
        return lines


@st.composite
def yaml_texts(draw: st.DrawFn) -> bytes:
    writer = _Text(draw)
    depth = draw(st.integers(0, 4))
    flow = draw(st.booleans())
    lines = [writer.flow(depth)] if flow else writer.block(depth, 0)
    start = draw(st.sampled_from(["", "", "---" + (" " if flow else "\n"), "%YAML 1.1\n---\n"]))
    end = draw(st.sampled_from(["", "", "", "\n...", "\n--- second"]))  # a second document: refused by both
    return (start + "\n".join(lines) + end + "\n").encode()


@settings(max_examples=600, deadline=None)
@given(text=yaml_texts())
def test_written_documents_load_as_libyaml_loads_them_or_are_refused(text: bytes) -> None:
    event(_check_against_libyaml(text))


# -- Python data dumped by PyYAML --------------------------------------------------------------

_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=8)
    | st.dates() | st.datetimes()
)
_KEYS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)


def _shared(value: Any) -> list[Any]:
    return [value, value]  # one object twice: PyYAML writes it once, with an anchor, then an alias


_DATA = st.recursive(
    _LEAVES,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(_KEYS, children, max_size=3)
    | st.builds(_shared, st.lists(children, max_size=2) | st.dictionaries(_KEYS, children, max_size=2)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(data=_DATA, flow=st.sampled_from([None, True, False]))
def test_dumped_documents_load_as_libyaml_loads_them_and_shared_values_are_refused(data: Any, flow: bool | None) -> None:
    text = yaml.dump(data, Dumper=_Dumper, default_flow_style=flow, allow_unicode=True).encode()
    event(_check_against_libyaml(text))


# -- cases the generators reach by chance, pinned ------------------------------------------------

@pytest.mark.parametrize("text", [
    b"a: !!seq x\n",  # a collection tag on a scalar: libyaml's error, not a generator object
    b"a: !!set {x, y}\nb: !!omap [{k: 1}]\nc: !!pairs [{k: 1}, {k: 2}]\n",  # not a dict and a list of dicts
    b"a: !!str [x]\n",  # a scalar tag on a collection: libyaml's error, not a list
    b"a: !!int ''\n",  # an IndexError in libyaml's constructor
    b"a: " + b"1" * 4400 + b"\n",  # a ValueError: more digits than Python converts
    b"a: !!timestamp x\n",  # an AttributeError in libyaml's constructor
])
def test_documents_the_direct_pass_used_to_build_differently(text: bytes) -> None:
    assert _check_against_libyaml(text) in ("built", "refused")
