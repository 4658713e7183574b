"""The reader of dsh-replay's own cassette layout reads what libyaml reads, or declines.

:func:`read_layout` must build exactly what ``yaml.load(data, CSafeLoader)``
builds (types, values, key order) for every text it accepts, and accept every
cassette dsh-replay's writer produces in the usual course (the bundled ones
above all: otherwise a load is libyaml's again, and only slower). Everything
else it declines, and the libyaml path then reads or refuses the file as it
always did. Checked on the bundled cassettes, on cassettes written by
:meth:`Cassette.dumps` from generated interactions, on block YAML dumped by
both PyYAML emitters, on bundled cassettes mutated at random, and on hostile
or odd texts pinned here.
"""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st
from vcr.request import Request as VcrRequest

from dsh_replay.cassette import yaml_file, yaml_layout
from dsh_replay.cassette.interaction import RecordedError
from dsh_replay.cassette.store import Cassette, Interaction
from dsh_replay.cassette.yaml_layout import DECLINED, read_layout
from dsh_replay.errors import CassetteError

from .yaml_values import canonical

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted((ROOT / "cassettes").rglob("*.yaml"))
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _libyaml(data: bytes) -> tuple[str, Any]:
    try:
        return "built", yaml.load(data, Loader=_Loader)
    except Exception as exc:  # however libyaml refuses it
        return "refused", exc


def _same_or_declined(data: bytes) -> str:
    """Assert the reader's contract on ``data``; whether it read or declined it."""
    fast = read_layout(data)
    if fast is DECLINED:
        return "declined"
    outcome, slow = _libyaml(data)
    assert outcome == "built", (data, slow)  # never a text libyaml refuses
    assert canonical(fast) == canonical(slow), data
    return "read"


# -- the bundled cassettes ---------------------------------------------------------------------


def test_there_are_bundled_cassettes() -> None:
    assert len(BUNDLED) > 50


@pytest.mark.parametrize("path", BUNDLED, ids=lambda path: str(path.relative_to(ROOT / "cassettes")))
def test_every_bundled_cassette_is_read_without_a_parser_as_libyaml_reads_it(path: Path) -> None:
    data = path.read_bytes()
    fast = read_layout(data)
    assert fast is not DECLINED  # else its load would be libyaml's, and the layout reader's speed no one's
    assert canonical(fast) == canonical(yaml.load(data, Loader=_Loader))
    assert canonical(fast) == canonical(yaml_file.load_yaml(data, path))


def test_cassette_load_of_the_bundled_cassettes_takes_no_yaml_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = {path: Cassette.load(path) for path in BUNDLED}

    def no_parser(data: bytes, source: object = "") -> Any:
        raise AssertionError(f"{source} went to libyaml")

    monkeypatch.setattr(yaml_file, "load_yaml", no_parser)
    for path, before in loaded.items():
        again = Cassette.load(path)
        assert again.metadata == before.metadata
        assert [(i.body, i.fragments, i.headers, i.request.uri, i.request.body) for i in again.interactions] == [
            (i.body, i.fragments, i.headers, i.request.uri, i.request.body) for i in before.interactions
        ]


def test_values_read_are_never_shared_between_loads() -> None:
    # lines and plain scalars are cached across files: what comes out must still be the caller's own
    path = ROOT / "cassettes" / "anthropic" / "tool-call.yaml"
    first = read_layout(path.read_bytes())
    pristine = copy.deepcopy(first)
    first["interactions"][0]["response"]["dsh_replay"]["fragments"][0][1] = -1
    first["interactions"][0]["response"]["headers"]["via"].append("changed")
    first["dsh_replay"]["options"]["tools"][0]["parameters"]["required"].clear()
    assert read_layout(path.read_bytes()) == pristine


# -- cassettes written by our writer -------------------------------------------------------------

_ODD = [
    "1e3", "yes", "No", "null", "~", "0x1f", "0o17", "017", "2024-01-01", "2024-01-01 10:00:00", "12:30:00", "-1",
    "+1", ".5", "-.inf", ".NaN", "1_000", "true", "on", "=", "<<", "- x", "a: b", "a:b", "#c", "a #c", " lead",
    "trail ", "'q'", '"q"', "|", ">", "[]", "{}", "&a", "*a", "!t", "%x", "@x", "`x", "?x", ":x", "-x", "", "...",
    "---", "é", "😀 emoji", "\x85", "\u2028", "\ufeff", "\t", "a\tb", "\r", "\r\n", "x\ny", "x\n\ny\n", "\\",
]
_TEXTS = (
    st.text(max_size=24)
    | st.sampled_from(_ODD)
    | st.text(st.sampled_from(list("ab :#-'\"\\\n\r\t|>[]{}!&*.019eE+\x00\x85\u2028é😀 ")), max_size=16)
)
_BODIES = st.one_of(
    st.binary(max_size=48),
    _TEXTS.map(str.encode),
    st.lists(_TEXTS, max_size=5).map(lambda lines: "".join(f"data: {line}\n\n" for line in lines).encode()),
    st.lists(_TEXTS, max_size=5).map(lambda lines: "\n".join(lines).encode()),
)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=10,
)


@st.composite
def _interactions(draw: st.DrawFn) -> Interaction:
    body = draw(_BODIES)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(body) - 1)), max_size=4))) if len(body) > 1 else []
    sizes = [end - start for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    fragments = [(draw(st.floats(0, 100_000, allow_nan=False)), size) for size in sizes if size] or None
    if fragments is None and draw(st.booleans()):
        fragments = [] if not body else None
    headers = draw(st.lists(st.tuples(_TEXTS, _TEXTS), max_size=4))
    sent = draw(st.none() | _BODIES)
    error = draw(st.none() | st.builds(RecordedError, st.sampled_from(["ReadError", "x"]), _TEXTS,
                                        st.integers(0, 10_000), st.floats(0, 1000, allow_nan=False)))
    request = VcrRequest(draw(st.sampled_from(["POST", "GET"])), draw(st.sampled_from(
        ["https://api.example/v1/chat", "http://127.0.0.1:9/x?a=1&b=2", "https://h/p#f"])), sent,
        {name: value for name, value in draw(st.lists(st.tuples(_TEXTS, _TEXTS), max_size=3))})
    return Interaction(request=request, status=draw(st.sampled_from([200, 429, 500])), reason=draw(_TEXTS),
                       headers=headers, body=body, fragments=fragments, complete=draw(st.booleans()), error=error)


@settings(max_examples=300, deadline=None)
@given(interactions=st.lists(_interactions(), min_size=1, max_size=3),
       options=st.dictionaries(_TEXTS, _JSONISH, max_size=3))
def test_cassettes_our_writer_writes_load_the_same_either_way(
    tmp_path_factory: pytest.TempPathFactory, interactions: list[Interaction], options: dict[str, Any]
) -> None:
    path = tmp_path_factory.mktemp("layout") / "c.yaml"
    cassette = Cassette(path=path, interactions=interactions,
                        metadata={"format": 1, "route": "openai", "options": options, "library": "dsh-replay"})
    data = cassette.dumps().encode("utf-8")
    event(_same_or_declined(data))
    fast = read_layout(data)
    if fast is not DECLINED:
        back = Cassette.from_dict(fast, path).interactions
        assert [(i.body, i.request.body or b"") for i in back] == [(i.body, i.request.body or b"") for i in interactions]


@pytest.mark.parametrize("body", [
    b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n',
    b'{"error": {"message": "busy", "code": 429}}\n',
    b"no final line break",
    "caf\u00e9 \U0001f642 \u6771\u4eac\n\n".encode(),
    b"",
    b"line with trailing spaces   \nand a # hash: colon\n",
    b"data: x\r\n\r\n",  # no literal block: a double-quoted one, its escapes read too
])
def test_what_our_writer_usually_writes_is_read_without_a_parser(tmp_path: Path, body: bytes) -> None:
    request = VcrRequest("POST", "https://api.example/v1/chat", b'{"model":"m","q":"it\'s"}',
                         {"content-type": "application/json", "x-count": "1e3", "x-flag": "yes"})
    interaction = Interaction(request=request, status=200, reason="OK",
                              headers=[("content-type", "text/event-stream"), ("x-date", "2024-01-01"),
                                       ("x-empty", ""), ("x-hex", "0x1f"), ("x-null", "null")],
                              body=body, fragments=[(0.0, len(body))] if body else None)
    options = {"model": "m", "temperature": 0.5, "max_tokens": 100, "stop": [], "tools": {}, "seed": None,
               "messages": [{"role": "user", "content": "Say 'hi': #1\n\nthen stop"}]}
    cassette = Cassette(path=tmp_path / "c.yaml", interactions=[interaction],
                        metadata={"format": 1, "route": "openai", "options": options})
    cassette.save()
    data = cassette.path.read_bytes()
    assert read_layout(data) is not DECLINED, data.decode()
    assert _same_or_declined(data) == "read"
    assert Cassette.load(cassette.path).interactions[0].body == body


# -- block YAML from PyYAML's emitters, and mutated cassettes ----------------------------------------


class _CDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True


class _PyDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


@settings(max_examples=400, deadline=None)
@given(data=st.dictionaries(_TEXTS, _JSONISH, min_size=1, max_size=4), pure=st.booleans())
def test_block_yaml_from_either_emitter_reads_as_libyaml_reads_it_or_is_declined(data: dict[str, Any], pure: bool) -> None:
    text = yaml.dump(data, Dumper=_PyDumper if pure else _CDumper, allow_unicode=True, width=1 << 30, sort_keys=False)
    event(_same_or_declined(text.encode("utf-8")))


_SMALL = [path.read_bytes() for path in BUNDLED if path.stat().st_size < 4000]
_PIECES = [b" ", b"  ", b"\n", b"- ", b": ", b":", b"'", b'"', b"#", b" #", b"|", b"|+", b"|-", b"[", b"]", b"{",
           b"}", b"&a", b"*a", b"!", b"\t", b"\r", b"...", b"---", b"\\", b"\\x", b"? ", b"-", b",", b"1e3", b"~",
           b"\n\n", b"\n  ", b"\n    ", b"x", b"0", b".", b"<<", b"%", b"\xc2\x85", b"\xef\xbb\xbf"]


@settings(max_examples=600, deadline=None)
@given(data=st.sampled_from(_SMALL), edits=st.lists(st.tuples(
    st.floats(0, 1), st.integers(0, 3), st.sampled_from(_PIECES), st.integers(1, 4)), min_size=1, max_size=3))
def test_mutated_cassettes_read_as_libyaml_reads_them_or_are_declined(
    data: bytes, edits: list[tuple[float, int, bytes, int]]
) -> None:
    text = bytearray(data)
    for where, how, piece, count in edits:
        at = int(where * len(text))
        if how == 0:
            text[at:at] = piece
        elif how == 1:
            del text[at : at + count]
        elif how == 2:
            text[at : at + len(piece)] = piece
        else:  # a whole line doubled or dropped
            start, end = text.rfind(b"\n", 0, at) + 1, text.find(b"\n", at)
            if end >= 0:
                text[start : end + 1] = text[start : end + 1] * (count % 2 * 2)
    event(_same_or_declined(bytes(text)))


# -- what the reader declines ------------------------------------------------------------------------

_HEAD = "interactions: []\nversion: 1\n"


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",  # anchor and alias
    "a: !!str 1\n",  # a tag
    "a: !!binary aGk=\n",
    "a: 2024-01-01\n",  # a timestamp
    "<<: {a: 1}\n",  # a merge key
    "a: {b: 1}\n",  # a flow mapping
    "a: [1, 2]\n",  # a flow list that is no fragment list
    "a: b # comment\n",
    "# comment\na: 1\n",
    "%YAML 1.1\n---\na: 1\n",
    "---\na: 1\n",
    "a: 1\n...\nb: 2\n",  # a second document
    "a:\n\tb: 1\n",  # a tab
    "a: 'two \n  lines'\n",  # spaces next to a line break
    "a: 'two\nlines'\n",  # a line of a quoted scalar not indented
    "a:\n  b: 'two\n  lines'\n",
    "a: 'two\n\n  lines' x\n",
    "a: '\n  starts with a line break'\n",
    'a: "two\n  lines"\n',
    "a: plain\n  goes on\n",
    "a:\n   b: 1\n",  # three spaces
    "a:\n  - x\n",  # an indented sequence
    "a:\n- - x\n",  # a sequence in a sequence
    "a: |2\n   x\n",  # an indentation indicator
    "a: >\n  folded\n",
    "a: |\n\n  starts blank\n",
    "a: |\n  x\n \n",  # a short line of spaces
    "? a\n: 1\n",  # an explicit key
    "1: a\n",  # a key that is no string
    "null: a\n",
    "a:\n",  # a null by omission
    "a: \n",
    "a: 1\r\nb: 2\r\n",
    "\ufeffa: 1\n",
    "a: x\u2028y\n",
    "a: x\x85y\n",
    "a: \"\\/\"\n",  # an escape no emitter writes
    "a: \"\\ud800\"\n",
    "a: 1",  # no final line break
    "",
    "- a\n",  # a sequence at the top
    "a: 1\n" + "  " * 0 + "b:\n" + "".join("  " * n + f"k{n}:\n" for n in range(1, 60)) + "  " * 60 + "v: 1\n",  # deep
    "a: " + "1" * 5000 + "\n",  # more digits than Python converts
])
def test_odd_or_hostile_texts_are_declined_and_left_to_libyaml(tmp_path: Path, text: str) -> None:
    data = (text + _HEAD if text.endswith("\n") and not text.startswith(("- ", "a: 1\n...")) else text).encode()
    assert read_layout(data) is DECLINED, data
    outcome, expected = _libyaml(data)
    path = tmp_path / "odd.yaml"
    path.write_bytes(data)
    if outcome == "built" and not yaml_file._may_have_alias(data):
        assert canonical(yaml_file.read_yaml_file(path)) == canonical(expected)
    else:
        try:
            got = yaml_file.read_yaml_file(path)
        except CassetteError:
            pass  # refused as before
        else:
            assert outcome == "built" and canonical(got) == canonical(expected)


def test_an_alias_bomb_is_declined_then_refused_by_the_libyaml_path(tmp_path: Path) -> None:
    levels = "abcdefghi"
    bomb = "a0: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{name}0: &{name} [{', '.join(['*' + below] * 9)}]\n" for below, name in itertools.pairwise(levels))
    data = (bomb + _HEAD).encode()
    assert read_layout(data) is DECLINED
    path = tmp_path / "bomb.yaml"
    path.write_bytes(data)
    with pytest.raises(CassetteError, match="YAML alias"):
        yaml_file.read_yaml_file(path)


# -- scalars, one by one ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", [
    "0", "-17", "+12", "0x1F", "0o17", "017", "0b101", "1_000", "190:20:30", "1.5", "-.5", "1e3", "1.0e+3",
    "6.8523015e+5", ".inf", "-.Inf", ".NaN", "true", "False", "yes", "No", "on", "OFF", "y", "n", "~", "null",
    "Null", "abc", "a b", "x:y", "a*b", "a#b", "-x", "text/event-stream; charset=utf-8", "gzip, deflate",
    "https://api.example/v1?a=1&b=[2]", "é", "東京", "🙂",
])
def test_plain_scalars_resolve_as_the_safe_loader_resolves_them(spelling: str) -> None:
    for data in (f"k: {spelling}\n", f"k:\n- {spelling}\n"):
        assert _same_or_declined(data.encode()) == "read", data


@pytest.mark.parametrize("spelling", ["2001-12-14", "2001-12-14 21:59:43.10 -5", "=", "<<", "---x", "...x", "?x",
                                      ":x", "-", "%x", "@x", "`x"])
def test_plain_scalars_of_other_kinds_are_declined(spelling: str) -> None:
    assert read_layout(f"k: {spelling}\n".encode()) is DECLINED


@pytest.mark.parametrize("quoted", [
    "''", "'it''s'", "'a: b # c'", "' lead and trail '", "'1e3'", "'null'", "'2024-01-01'", "'''q'''",
    '""', '"plain"', r'"\x41\u00e9\U0001F642\N\_\L\P\0\a\b\t\n\v\f\r\e\"\\"', '"a\\\\nb"', '"\\\\"', '"东京 🙂"',
])
def test_quoted_scalars_and_their_escapes_read_as_libyaml_reads_them(quoted: str) -> None:
    for data in (f"k: {quoted}\n", f"k:\n- {quoted}\n", f"{quoted}: v\n", f"k:\n- {quoted}: v\n  w: 1\n"):
        assert _same_or_declined(data.encode()) == "read", data


@pytest.mark.parametrize("text", [
    "k: 'one\n  two'\n", "k: 'one\n\n  two'\n", "k: 'it''s\n\n\n  ''q'''\n", "k: 'ends with\n\n  '\n",
    "k: 'last space\n  x '\n", "k:\n- 'one\n\n  two'\n- x\n", "k:\n- j: 'one\n\n    two'\n  i: 1\nz: 0\n",
])
def test_single_quoted_scalars_over_several_lines_read_as_libyaml_reads_them(text: str) -> None:
    assert _same_or_declined(text.encode()) == "read", text


@pytest.mark.parametrize("quoted", ["'unclosed", "'a' b", '"\\q"', '"\\x4"', '"\\uD800"', '"\\U00110000"', '"a\\"'])
def test_quoted_scalars_the_reader_is_not_sure_of_are_declined(quoted: str) -> None:
    assert read_layout(f"k: {quoted}\n".encode()) is DECLINED


@pytest.mark.parametrize("block", [
    "k: |\n  one\n  two\n", "k: |-\n  one\n  two\n", "k: |+\n  one\n\n\n", "k: |\n  one\n\n\n",
    "k: |-\n  one\n\n\n", "k: |\n  one\n\n    indented\n  \n  last\n", "k: |+\n  end of file\n\n",
    "a:\n  k: |\n    x\n  after: 1\n", "a:\n- |\n  item\n- k: |+\n    in a map\n\n  j: 2\n", "k: |\n  #not a comment\n",
    "k: |\n  x\n...\n",
])
def test_literal_blocks_read_as_libyaml_reads_them(block: str) -> None:
    assert _same_or_declined(block.encode()) == "read", block


def test_fragment_lists_read_as_libyaml_reads_them() -> None:
    data = b"fragments: [[0.0, 356], [4.1, 338], [12, 7], [0.25, 1]]\nnone: []\nempty: {}\n"
    assert _same_or_declined(data) == "read"
    assert read_layout(b"fragments: [[1e3, 1]]\n") is DECLINED
    assert read_layout(b"fragments: [[01, 1]]\n") is DECLINED


def test_the_sentinel_says_what_it_is() -> None:
    assert repr(yaml_layout.DECLINED) == "DECLINED"
