"""Cassettes written by other tools, read into one shape for ``dsh-replay import``.

Read here (each file may also be gzip-compressed as a whole, ``*.yaml.gz``):

- **vcrpy / pytest-recording**, YAML or JSON: ``request: {method, uri, body,
  headers}``, ``response: {status: {code, message}, headers, body: {string}}``;
  a body may be ``!!binary`` (base64 in the file) and compressed as its
  ``content-encoding`` header says (vcrpy keeps what the server sent).
- **pydantic-ai's serializer**: the same, but a JSON body is stored parsed, as
  ``parsed_body`` beside ``headers`` instead of ``body``.
- **cassetter**: ``body: {type: json|text|binary|none, content}`` (binary
  content in hex) and ``status: 200``.

Nothing here decides what an interaction means; :mod:`.importer` does. A body
that cannot be decoded is kept with the reason in ``problem``, so that the
interaction is listed, not lost.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import http
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import CassetteError
from .content_coding import UndecodableBody, content_encodings, decode_content
from .yaml_file import load_yaml

__all__ = [
    "STREAM_TYPES",
    "ForeignCassette",
    "ForeignInteraction",
    "infer_fragments",
    "read_foreign",
]

#: response content types of a streamed body, and whether it is NDJSON
STREAM_TYPES = {"text/event-stream": False, "application/x-ndjson": True, "application/ndjson": True}

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(slots=True, kw_only=True)
class ForeignInteraction:
    """One recorded exchange of a foreign cassette, bodies decoded."""

    position: int
    method: str
    uri: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    #: what was undone to get ``body`` ("gzip content-encoding"...), for the report
    decoded: list[str] = field(default_factory=list)
    #: why the interaction cannot be read (a body that does not decode...), or ""
    problem: str = ""

    @property
    def content_type(self) -> str:
        for name, value in self.headers:
            if name.lower() == "content-type":
                return value.split(";", 1)[0].strip().lower()
        return ""

    @property
    def streamed(self) -> bool:
        return self.content_type in STREAM_TYPES


@dataclass(slots=True, kw_only=True)
class ForeignCassette:
    path: Path
    #: "vcrpy", "pydantic-ai", "cassetter" or "dsh-replay" (ours: nothing to import)
    style: str
    interactions: list[ForeignInteraction]


def read_foreign(path: Path) -> ForeignCassette | None:
    """The cassette at ``path``; ``None`` when the file is YAML/JSON but no cassette.

    A file that cannot be read or parsed raises :class:`CassetteError` naming it.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CassetteError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from None
    if raw.startswith(_GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise CassetteError(f"{path} looks gzip-compressed but does not decompress: {exc}",
                                path=str(path)) from None
    data = _parse(raw, path)
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        return None
    if "dsh_replay" in data:
        return ForeignCassette(path=path, style="dsh-replay", interactions=[])
    interactions = [_interaction(n, item) for n, item in enumerate(data["interactions"])]
    return ForeignCassette(path=path, style=_style(data["interactions"]), interactions=interactions)


def _parse(raw: bytes, path: Path) -> Any:
    if path.name.removesuffix(".gz").endswith(".json"):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise CassetteError(f"{path} is not valid JSON: {exc}", path=str(path)) from None
    return load_yaml(raw, path)  # the safe loader, aliases and deep nesting refused


def _style(items: list[Any]) -> str:
    for item in items:
        if not isinstance(item, dict):
            continue
        for part in (item.get("request"), item.get("response")):
            if isinstance(part, dict) and "parsed_body" in part:
                return "pydantic-ai"
            if isinstance(part, dict) and isinstance(part.get("body"), dict) and "type" in part["body"]:
                return "cassetter"
    return "vcrpy"


def _interaction(position: int, item: Any) -> ForeignInteraction:
    request = item.get("request") if isinstance(item, dict) else None
    response = item.get("response") if isinstance(item, dict) else None
    out = ForeignInteraction(position=position, method="?", uri="?", request_headers=[], request_body=b"",
                             status=0, reason="", headers=[], body=b"")
    if not isinstance(request, dict) or not isinstance(response, dict):
        out.problem = "it is not a request/response pair"
        return out
    try:
        out.method = str(request.get("method") or "?").upper()
        out.uri = str(request.get("uri") or request.get("url") or "?")
        out.request_headers = _headers(request.get("headers"))
        out.headers = _headers(response.get("headers"))  # first: a bad status still leaves it classified
        out.status, out.reason = _status(response.get("status"))
        out.request_body = _decoded(_body(request), out.request_headers, out.decoded, "request")
        if _reserialized(request):  # the recorded length was that of bytes no longer known
            out.request_headers = [(k, v) for k, v in out.request_headers if k.lower() != "content-length"]
        out.body = _decoded(_body(response), out.headers, out.decoded, "response")
    except _Undecodable as exc:
        out.problem = str(exc)
    if out.decoded and not out.problem:
        # the stored body is the decoded one: headers that described the encoded bytes go
        out.headers = [(k, v) for k, v in out.headers if k.lower() not in ("content-encoding", "content-length")]
    return out


class _Undecodable(ValueError):
    """A body or field this reader cannot turn into bytes; the message says why."""


def _headers(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, Mapping):
        return []
    pairs: list[tuple[str, str]] = []
    for name, values in raw.items():
        for value in values if isinstance(values, list) else [values]:
            pairs.append((str(name), value.decode("latin-1") if isinstance(value, bytes) else str(value)))
    return pairs


def _status(raw: Any) -> tuple[int, str]:
    code = raw.get("code") if isinstance(raw, Mapping) else raw
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
        raise _Undecodable(f"its response status {raw!r} is not an HTTP status")
    message = raw.get("message") if isinstance(raw, Mapping) else None
    if not isinstance(message, str):
        try:
            message = http.HTTPStatus(code).phrase
        except ValueError:
            message = ""
    return code, message


def _body(part: Mapping[str, Any]) -> bytes:
    """A request's or response's body as stored, in any of the styles read here."""
    if part.get("body") is None and "parsed_body" in part:
        return orjson.dumps(part["parsed_body"])  # pydantic-ai: JSON stored as data
    body = part.get("body")
    if isinstance(body, Mapping):
        if "type" in body:  # cassetter
            return _typed_body(body)
        if "base64_string" in body:
            return _base64(body["base64_string"])
        body = body.get("string")
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8", "surrogatepass")
    raise _Undecodable(f"its body is a {type(body).__name__}, not a string")


def _reserialized(part: Mapping[str, Any]) -> bool:
    """Whether the body was stored as data (and :func:`_body` wrote it out as JSON anew)."""
    body = part.get("body")
    return (body is None and "parsed_body" in part) or (isinstance(body, Mapping) and body.get("type") == "json")


def _typed_body(body: Mapping[str, Any]) -> bytes:
    kind, content = body.get("type"), body.get("content")
    if kind == "none" or content is None:
        return b""
    if kind == "json":
        return orjson.dumps(content)
    if kind == "text" and isinstance(content, str):
        return content.encode("utf-8")
    if kind == "binary" and isinstance(content, (str, int)):
        try:
            return bytes.fromhex(str(content))
        except ValueError:
            raise _Undecodable("its binary body is not hex") from None
    raise _Undecodable(f"its body has type {kind!r}, which is not json, text, binary or none")


def _base64(text: Any) -> bytes:
    try:
        return base64.b64decode(str(text), validate=False)
    except (binascii.Error, ValueError):
        raise _Undecodable("its base64 body does not decode") from None


def _decoded(body: bytes, headers: list[tuple[str, str]], notes: list[str], part: str) -> bytes:
    """``body`` with its content-encoding undone (a gzip body without the header too)."""
    encodings = content_encodings(headers)
    if not encodings and body.startswith(_GZIP_MAGIC):
        encodings = ["gzip"]  # some serializers drop the header and keep the bytes
    try:
        body = decode_content(body, encodings, part)
    except UndecodableBody as exc:
        raise _Undecodable(str(exc)) from None
    notes += [f"{part} body was {encoding}-encoded; it is stored decoded" for encoding in reversed(encodings)]
    return body


# -- inferred fragments ----------------------------------------------------------------

#: the end of an SSE event: a line break, then an empty line (CRLF, LF or CR each)
_SSE_EVENT_END = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r(?!\n)|\n)")


def infer_fragments(body: bytes, *, ndjson: bool) -> list[int]:
    """Fragment sizes for a body recorded whole: one per SSE event or NDJSON line.

    What the network delivered is not known; this is the cut a server that
    flushes each event would make. The sizes add up to ``len(body)``.
    """
    ends = [m.end() for m in re.finditer(rb"\n", body)] if ndjson else [m.end() for m in _SSE_EVENT_END.finditer(body)]
    sizes, start = [], 0
    for end in ends:
        sizes.append(end - start)
        start = end
    if start < len(body):
        sizes.append(len(body) - start)  # a last event or line without its terminator
    return sizes
