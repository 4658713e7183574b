"""The cassette file: a vcrpy-loadable YAML document that keeps stream fragments.

Layout (``version: 1`` and ``interactions`` are plain vcrpy; everything we add
lives under ``dsh_replay`` keys that vcrpy ignores)::

    dsh_replay: {format: 1, route: openai, options: {...}, library: dsh-replay 0.1.0}
    interactions:
    - request: {method, uri, body, headers}            # vcrpy's request dict
      response:
        status: {code: 200, message: OK}
        headers: {content-type: [text/event-stream]}
        body:
          string: |                                    # readable when it round-trips
            data: {"id":"chatcmpl-1",...}

        dsh_replay:
          fragments: [[0.0, 143], [12.4, 98], ...]     # [ms since headers, bytes]
          complete: true                               # false: the caller stopped early
          error: {kind: ReadError, message: ..., offset: 2048, at_ms: 310.2}
    version: 1

Requests are vcrpy ``Request`` objects so vcrpy's matchers compare them; a
cassette written by plain vcrpy (no fragments, no metadata) loads too and its
body is served as one fragment.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from ..errors import CassetteError
from ..protocol.fields import FieldError
from .files import atomic_write
from .interaction import (
    Interaction,
    RecordedError,
    as_bytes,
    headers_dict,
    interaction_from_dict,
)
from .yaml_file import read_yaml_file
from .yaml_layout import DECLINED, read_layout

__all__ = ["FORMAT_VERSION", "Cassette", "Interaction", "RecordMode", "RecordedError"]


FORMAT_VERSION = 1


class RecordMode(str, Enum):
    """vcrpy / pytest-recording record modes, plus ``rewrite`` and ``verify``.

    ``verify`` replays the cassette as ``none`` does, then sends the same
    requests to the live provider and records them elsewhere, to compare their
    shape (``pytest --record-mode=verify``; the cassette is never written). A
    cassette block itself treats it as ``none``.
    """

    NONE = "none"
    ONCE = "once"
    NEW_EPISODES = "new_episodes"
    ALL = "all"
    REWRITE = "rewrite"
    VERIFY = "verify"

    @classmethod
    def parse(cls, value: str | RecordMode) -> RecordMode:
        try:
            return cls(value)
        except ValueError:
            valid = ", ".join(mode.value for mode in cls)
            raise CassetteError(f"unknown record mode {value!r}; valid modes: {valid}") from None


class _Literal(str):
    """A string to write as a YAML literal block (``|``), one line per line."""


class _Flow(list):  # type: ignore[type-arg]
    """A list to write in flow style (``[a, b]``)."""


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    def ignore_aliases(self, data: Any) -> bool:
        # a value met twice (a tool reused in a follow-up's options) is written out
        # twice: the loader refuses aliases, the stuff of alias bombs (yaml_file.py)
        return True


class _PyDumper(yaml.SafeDumper):
    """The pure-Python emitter: libyaml's escapes characters beyond U+FFFF (emoji),
    which would push a body out of its readable literal block."""

    def ignore_aliases(self, data: Any) -> bool:
        return True  # as _Dumper


for _dumper in (_Dumper, _PyDumper):
    _dumper.add_representer(_Literal, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", str(s), style="|"))
    _dumper.add_representer(_Flow, lambda d, s: d.represent_sequence("tag:yaml.org,2002:seq", list(s), flow_style=True))
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _dumper_for(text: str) -> type:
    return _PyDumper if _ASTRAL.search(text) else _Dumper


def _round_trips(text: str) -> bool:
    # indented as in a cassette: a literal block's indentation indicator depends on it
    dumped = yaml.dump({"a": {"b": {"string": text}}}, Dumper=_dumper_for(text), allow_unicode=True, width=1 << 30)
    return bool(yaml.load(dumped, Loader=_Loader)["a"]["b"]["string"] == str(text))


_NOT_IN_LITERAL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\ufeff\ud800-\udfff\r]")


def _literal_block(text: str) -> str | None:
    """``text`` as an unindented YAML literal block: a ``|`` header line, then its lines.

    ``None`` when a literal block cannot hold it exactly (control characters,
    YAML line breaks other than LF, a first line that starts with a space,
    which would need an indentation indicator).
    """
    if text[:1] in (" ", "\n") or _NOT_IN_LITERAL.search(text):
        return None
    if not text.endswith("\n"):
        chomp, lines = "-", text + "\n"
    elif text.endswith("\n\n"):
        chomp, lines = "+", text
    else:
        chomp, lines = "", text
    return f"|{chomp}\n{lines}"


#: a line break a line with text follows (the pattern's leading literal makes the scan fast)
_BEFORE_TEXT = re.compile(r"\n(?=[^\n])")


def _splice(text: str | None, token: str, piece: str, *, literal: bool) -> str | None:
    """Put ``piece`` where the placeholder scalar ``token`` was emitted (a literal block is indented)."""
    if text is None:
        return None
    at = text.find(f": {token}\n")
    if at < 0:
        return None
    if literal:
        line_start = text.rfind("\n", 0, at) + 1
        indent = " " * (len(text[line_start:at]) - len(text[line_start:at].lstrip(" ")) + 2)
        header, _, lines = piece.partition("\n")
        # the first line has text (see _literal_block); empty lines stay empty
        piece = header + "\n" + indent + _BEFORE_TEXT.sub("\n" + indent, lines)
        return text[: at + 2] + piece + text[at + 3 + len(token) :]
    return text[: at + 2] + piece + text[at + 2 + len(token) :]


def _body_value(body: bytes, readable: bool) -> Any:
    """``body`` as the file holds it: a literal block, a string, or ``!!binary``.

    ``readable`` (for the file) picks the most readable form that reads back
    byte-exactly. A literal block cannot hold every string (CR, trailing spaces),
    and PyYAML's pure-Python emitter writes NEL/LS/PS unescaped even in quoted
    strings, where they read back as line breaks; ``!!binary`` always round-trips.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    if not readable:
        return text
    if "\n" in text and _round_trips(_Literal(text)):
        return _Literal(text)
    return text if _round_trips(text) else body


@dataclass(slots=True, kw_only=True)
class Cassette:
    """A cassette in memory: metadata and interactions."""

    path: Path
    interactions: list[Interaction] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    # -- reading -------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Cassette:
        path = Path(path)
        try:
            data = read_yaml_file(path)  # a safe loader: no arbitrary objects
        except FileNotFoundError:
            raise CassetteError(f"cassette {path} does not exist", path=str(path)) from None
        except OSError as exc:
            raise CassetteError(f"cannot read cassette {path}: {exc}", path=str(path)) from None
        except yaml.YAMLError as exc:
            where = ""
            mark = getattr(exc, "problem_mark", None)
            if mark is not None:
                where = f" (line {mark.line + 1}, column {mark.column + 1})"
            raise CassetteError(
                f"cassette {path} is not valid YAML{where}; fix it or re-record it with --record-mode=rewrite",
                path=str(path),
            ) from None
        return cls.from_dict(data, path)

    @classmethod
    def from_dict(cls, data: Any, path: Path) -> Cassette:
        def bad(message: str) -> CassetteError:
            return CassetteError(
                f"cassette {path}: {message}; fix it or re-record it with --record-mode=rewrite", path=str(path)
            )

        if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
            raise bad("expected a mapping with an 'interactions' list (vcrpy format, version 1)")
        if data.get("version", 1) != 1:
            raise bad(f"unsupported vcrpy cassette version {data.get('version')!r}")
        metadata = data.get("dsh_replay") or {}
        if not isinstance(metadata, dict):
            raise bad("'dsh_replay' metadata must be a mapping")
        fmt = metadata.get("format", FORMAT_VERSION)
        if not isinstance(fmt, int) or isinstance(fmt, bool):
            raise bad(f"'dsh_replay.format' must be an integer, got {fmt!r}")
        if fmt > FORMAT_VERSION:
            raise bad(f"format {fmt} is newer than this dsh-replay understands ({FORMAT_VERSION}); upgrade dsh-replay")
        try:
            interactions = [interaction_from_dict(raw, f"interactions[{n}]") for n, raw in enumerate(data["interactions"])]
        except FieldError as exc:
            raise bad(str(exc)) from None
        return cls(path=path, interactions=interactions, metadata=metadata)

    # -- writing -------------------------------------------------------------

    def to_dict(self, *, readable: bool = True, fragments: bool = True) -> dict[str, Any]:
        """The YAML data; ``fragments=False`` leaves ``None`` where the fragment lists go."""
        out: dict[str, Any] = {}
        if self.metadata:
            out["dsh_replay"] = self.metadata
        out["interactions"] = [_interaction_to_dict(i, readable, fragments) for i in self.interactions]
        out["version"] = 1
        return out

    def dumps(self) -> str:
        """The YAML text of the cassette; response bodies as literal blocks where they round-trip."""
        return self._dumps_spliced() or self._dumps_per_body()

    def _dumps_spliced(self) -> str | None:
        """Emit with libyaml, then splice in the literal bodies and fragment lists we write ourselves.

        A streamed body is most of a cassette, and its fragment list the most
        numerous nodes: writing both directly is many times faster than letting
        an emitter analyse them (the pure-Python one, needed for emoji, most of
        all). The text is read back before the fragments go in (they are plain
        numbers) and compared; ``None`` when it is not exact, and the careful
        per-body path decides instead.
        """
        data = self.to_dict(readable=False, fragments=False)  # written below, as text
        bodies: dict[str, str] = {}
        fragments: dict[str, str] = {}
        for position, (interaction, raw) in enumerate(zip(self.interactions, data["interactions"], strict=True)):
            response = raw["response"]
            body = response["body"]["string"]
            if isinstance(body, str) and "\n" in body:
                block = _literal_block(body)
                if block is None:
                    return None
                token = f"dsh-replay-body-{position}"
                response["body"]["string"], bodies[token] = token, block
            extra = response.get("dsh_replay")
            if extra and interaction.fragments is not None:
                token = f"dsh-replay-fragments-{position}"
                extra["fragments"] = token
                fragments[token] = "[" + ", ".join(f"[{round(ms, 1)!r}, {size}]" for ms, size in interaction.fragments) + "]"
        text: str | None = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 30)
        for token, block in bodies.items():
            text = _splice(text, token, block, literal=True)
        if text is None or not self._bodies_read_back(text):
            return None
        for token, flow in fragments.items():
            text = _splice(text, token, flow, literal=False)
        return text

    def _bodies_read_back(self, text: str) -> bool:
        try:
            # as the loader will read the file (the layout reader reads what libyaml would, or declines)
            back = read_layout(text.encode("utf-8"))
            if back is DECLINED:
                back = yaml.load(text, Loader=_Loader)
            return all(
                as_bytes(raw["response"]["body"]["string"]) == interaction.body
                and as_bytes(raw["request"].get("body")) == (interaction.request.body or b"")
                for interaction, raw in zip(self.interactions, back["interactions"], strict=True)
            )
        except (yaml.YAMLError, KeyError, TypeError, ValueError):
            return False

    def _dumps_per_body(self) -> str:
        data = self.to_dict(readable=True)
        astral = any(
            isinstance(i["response"]["body"]["string"], str) and _ASTRAL.search(i["response"]["body"]["string"])
            for i in data["interactions"]
        )
        dumper = _PyDumper if astral else _Dumper
        return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=1 << 30)

    def check_secrets(self) -> None:
        """Refuse (``CassetteError``) if any credential-shaped string is left."""
        from .secrets import encoded_body_secrets, find_secrets  # writes only: never in a replay

        for position, interaction in enumerate(self.interactions):
            raw = _interaction_to_dict(interaction, False, False)  # fragments: numbers only
            for hit in itertools.chain(find_secrets(raw), encoded_body_secrets(interaction)):  # the first refuses
                raise CassetteError(
                    f"refusing to write cassette {self.path}: {hit.kind} found in interaction {position}, "
                    f"field {hit.field} ({hit.excerpt}). Scrub it with a header/query filter or a body filter, "
                    "then record again." + (_COMPRESSED_HINT if "decoded" in hit.field or "decompressed" in hit.field else ""),
                    path=str(self.path),
                )
        for hit in find_secrets(self.metadata, "dsh_replay"):
            raise CassetteError(
                f"refusing to write cassette {self.path}: {hit.kind} found in field {hit.field} ({hit.excerpt})",
                path=str(self.path),
            )

    def save(self) -> None:
        """Scan for secrets, then write atomically (temp file + rename)."""
        self.check_secrets()
        text = self.dumps()
        atomic_write(self.path, text.encode("utf-8"))


#: a compressed body is kept as the server sent it, where no mask can reach what it quotes
_COMPRESSED_HINT = (" The body is stored compressed, as the server sent it, so a key it quotes cannot be masked: "
                    "record with an 'Accept-Encoding: identity' request header to get it uncompressed.")


def _interaction_to_dict(interaction: Interaction, readable: bool, fragments: bool = True) -> dict[str, Any]:
    request = interaction.request._to_dict()
    if isinstance(request.get("body"), bytes):
        request["body"] = _body_value(request["body"], readable)
    response: dict[str, Any] = {
        "status": {"code": interaction.status, "message": interaction.reason},
        "headers": headers_dict(interaction.headers),
        "body": {"string": _body_value(interaction.body, readable)},
    }
    extra: dict[str, Any] = {}
    if interaction.fragments is not None:
        extra["fragments"] = (
            _Flow(_Flow([round(ms, 1), size]) for ms, size in interaction.fragments) if fragments else None
        )
        extra["complete"] = interaction.complete
    if interaction.error is not None:
        error = interaction.error
        extra["error"] = {"kind": error.kind, "message": error.message, "offset": error.offset, "at_ms": round(error.at_ms, 1)}
    if extra:
        response["dsh_replay"] = extra
    return {"request": request, "response": response}
