"""Credentials out of what is recorded: the request scrubbed, and what the response quotes back masked (sans-I/O).

:class:`Scrubber` replaces credentials in the places providers take them
(headers, URL userinfo, query parameters, JSON body fields, and user filters
over bodies) with ``REDACTED`` before a cassette is written, and keeps the
values it took out: a provider that quotes a key back (a 401 "Incorrect API
key provided: …", a debug header) has it masked there too
(:func:`mask_interaction_echoes`). What slipped through is the scan's
(:mod:`.secrets`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlencode, urlsplit, urlunsplit

import orjson

from ..wire.credentials import (
    CREDENTIAL_BODY_FIELD_ENDINGS,
    CREDENTIAL_BODY_FIELDS,
    CREDENTIAL_HEADER_PATTERNS,
    CREDENTIAL_HEADERS,
    CREDENTIAL_QUERY_PARAMETERS,
    HARMLESS_HEADER_PATTERNS,
    REDACTED,
    RESPONSE_CREDENTIAL_HEADERS,
    form_pairs,
)
from .interaction import Interaction

__all__ = [
    "DEFAULT_BODY_FIELDS",
    "DEFAULT_QUERY_PARAMETERS",
    "DEFAULT_REQUEST_HEADERS",
    "DEFAULT_RESPONSE_HEADERS",
    "REDACTED",
    "BodyFilter",
    "ScrubbedRequest",
    "Scrubber",
    "mask_echoes",
    "mask_echoes_in_body",
    "mask_interaction_echoes",
]

# -- scrubbing -----------------------------------------------------------------

DEFAULT_REQUEST_HEADERS = CREDENTIAL_HEADERS
DEFAULT_RESPONSE_HEADERS = RESPONSE_CREDENTIAL_HEADERS
DEFAULT_QUERY_PARAMETERS = CREDENTIAL_QUERY_PARAMETERS
DEFAULT_BODY_FIELDS = CREDENTIAL_BODY_FIELDS

BodyFilter = Callable[[str, bytes], bytes]

# A removed value shorter than this is not searched for elsewhere: a key that
# short is no key, and masking every "offline" or "test" in a body would garble it.
_ECHO_MIN_LENGTH = 8
_VALUE_PIECES = re.compile(r"[^\s;,=]+")


@dataclass(frozen=True, slots=True)
class ScrubbedRequest:
    """A request as it may reach disk, and what was taken out of it."""

    uri: str
    headers: list[tuple[str, str]]
    body: bytes
    #: how many credentials were replaced
    count: int
    #: the credential values taken out, longest first: masked wherever they reappear
    #: (a 401 body that quotes the key, a golden's error message)
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scrubber:
    """What is replaced by ``REDACTED`` before a cassette reaches disk.

    Headers named in ``request_headers`` / ``response_headers`` or matching
    ``header_patterns`` (unless they match ``harmless_headers``), the URL's
    userinfo and the query parameters in ``query_parameters``, JSON request body
    fields named in ``body_fields`` or ending in ``body_field_endings`` at any
    depth, and such fields of a form-encoded body. Every value taken out of
    a request is then masked wherever it reappears in that interaction's
    response (:meth:`mask`). ``body_filters`` are callables ``(part, body) ->
    body`` where ``part`` is ``"request"`` or ``"response"``, for secrets only
    the user knows about.
    """

    request_headers: frozenset[str] = DEFAULT_REQUEST_HEADERS
    response_headers: frozenset[str] = DEFAULT_RESPONSE_HEADERS
    header_patterns: tuple[str, ...] = CREDENTIAL_HEADER_PATTERNS
    harmless_headers: tuple[str, ...] = HARMLESS_HEADER_PATTERNS
    query_parameters: frozenset[str] = DEFAULT_QUERY_PARAMETERS
    body_fields: frozenset[str] = DEFAULT_BODY_FIELDS
    body_field_endings: tuple[str, ...] = CREDENTIAL_BODY_FIELD_ENDINGS
    body_filters: tuple[BodyFilter, ...] = ()

    def request(self, uri: str, headers: Iterable[tuple[str, str]], body: bytes) -> ScrubbedRequest:
        """The request with every credential replaced, and the values that were."""
        removed: list[str] = []
        uri = self._uri(uri, removed)
        headers = self._headers(headers, self.request_headers, removed)
        body = self.body("request", self._body_fields(body, removed))
        values = {piece for value in removed for piece in _echo_forms(value)}
        return ScrubbedRequest(uri, headers, body, len(removed), tuple(sorted(values, key=len, reverse=True)))

    def uri(self, uri: str) -> tuple[str, int]:
        """The URI (absolute, or a path with its query) with its credentials replaced, and how many were."""
        removed: list[str] = []
        return self._uri(uri, removed), len(removed)

    def headers(self, headers: Iterable[tuple[str, str]], names: frozenset[str]) -> tuple[list[tuple[str, str]], int]:
        """``headers`` with credential values replaced (``names``, or the patterns), and how many were."""
        removed: list[str] = []
        return self._headers(headers, names, removed), len(removed)

    def body(self, part: str, body: bytes) -> bytes:
        for body_filter in self.body_filters:
            body = body_filter(part, body)
        return body

    def is_secret_header(self, name: str, names: frozenset[str]) -> bool:
        known = names if type(names) is frozenset else frozenset(names)  # a set given by hand is no cache key
        return _is_secret_header(name.lower(), known, tuple(self.header_patterns), tuple(self.harmless_headers))

    def _uri(self, uri: str, removed: list[str]) -> str:
        if "@" not in uri and "?" not in uri:
            return uri  # no user info, no query: nothing to look at (most requests)
        parts = urlsplit(uri)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user, colon, password = userinfo.partition(":")
            secret, kept = (password, f"{user}:{REDACTED}") if colon else (user, REDACTED)
            if unquote(secret) not in ("", REDACTED):
                removed.append(unquote(secret))
                netloc = f"{kept}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = _redacted_pairs(pairs, lambda name: name.lower() in self.query_parameters, removed) or query
        if netloc == parts.netloc and query == parts.query:
            return uri
        return urlunsplit(parts._replace(netloc=netloc, query=query))

    def _headers(self, headers: Iterable[tuple[str, str]], names: frozenset[str], removed: list[str]) -> list[tuple[str, str]]:
        out = []
        for name, value in headers:
            if value not in ("", REDACTED) and self.is_secret_header(name, names):
                out.append((name, REDACTED))
                removed.append(value)
            else:
                out.append((name, value))
        return out

    def _body_fields(self, body: bytes, removed: list[str]) -> bytes:
        # the cheap test first: nearly every request body names none of the fields
        lowered = body.lower()
        json_names, form_names = _field_marks(frozenset(self.body_fields), tuple(self.body_field_endings),
                                              frozenset(self.query_parameters))
        if any(mark in lowered for mark in json_names):
            try:
                data = orjson.loads(body)
            except orjson.JSONDecodeError:
                pass
            else:
                before = len(removed)
                data = self._redact_fields(data, removed)
                return orjson.dumps(data) if len(removed) > before else body
        # a form has "=" in it: a JSON body without one is not searched for a form's field names
        if b"=" in body and any(mark in lowered for mark in form_names) and (
                pairs := form_pairs(body.decode("latin-1"))):
            # a form is a query string in the body: its credentials are named as either's are
            form = _redacted_pairs(pairs, lambda name: self._is_field(name) or name.lower() in self.query_parameters,
                                   removed)
            if form is not None:
                return form.encode("ascii")
        return body

    def _is_field(self, name: str) -> bool:
        lowered = name.lower()
        return lowered in self.body_fields or lowered.endswith(tuple(self.body_field_endings))

    def _redact_fields(self, value: Any, removed: list[str]) -> Any:
        if isinstance(value, list):
            return [self._redact_fields(item, removed) for item in value]
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            if self._is_field(key) and isinstance(item, str) and item not in ("", REDACTED):
                removed.append(item)
                out[key] = REDACTED
            else:
                out[key] = self._redact_fields(item, removed)
        return out


def _redacted_pairs(pairs: list[tuple[str, str]], is_secret: Callable[[str], bool], removed: list[str]) -> str | None:
    """``pairs`` encoded again with each credential value ``REDACTED`` (and added to ``removed``); None if none was."""
    hits = [value for name, value in pairs if value not in ("", REDACTED) and is_secret(name)]
    if not hits:
        return None
    removed += hits
    return urlencode([(name, REDACTED if value and is_secret(name) else value) for name, value in pairs])


@functools.lru_cache(maxsize=64)
def _field_marks(fields: frozenset[str], endings: tuple[str, ...], parameters: frozenset[str],
                 ) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """How a credential field's name ends in a JSON body (``api_key"``) and in a form body (``api_key=``;
    a query parameter's name too), lowered: a body holding none of them has no such field."""
    names = {*fields, *endings}
    return (tuple(f'{name}"'.encode() for name in sorted(names)),
            tuple(f"{name}=".encode() for name in sorted(names | parameters)))


@functools.lru_cache(maxsize=4096)
def _is_secret_header(lowered: str, names: frozenset[str], patterns: tuple[str, ...], harmless: tuple[str, ...]) -> bool:
    """Whether a header of this (lowered) name carries a credential: asked for every header of every request,
    of a few dozen names in a run."""
    if lowered in names:
        return True
    return _any_of(patterns)(lowered) is not None and _any_of(harmless)(lowered) is None


@functools.lru_cache(maxsize=64)
def _any_of(patterns: tuple[str, ...]) -> Callable[[str], re.Match[str] | None]:
    """One compiled test for shell-style ``patterns`` (a header name is tested against all, for every request)."""
    return re.compile("|".join(fnmatch.translate(pattern) for pattern in patterns) or "(?!)").fullmatch


@functools.lru_cache(maxsize=1024)
def _echo_forms(value: str) -> tuple[str, ...]:
    """The forms in which a removed value can come back: whole, its pieces (``Bearer <token>``, cookies),
    and each percent-encoded as a URL would carry it (a signed URL's ``sig`` quoted in a ``Location``)."""
    pieces = [value, *_VALUE_PIECES.findall(value)]
    forms = [*pieces, *(encoded for piece in pieces for encoded in (quote(piece, safe=""), quote_plus(piece))
                        if encoded != piece)]
    return tuple(form for form in forms if len(form) >= _ECHO_MIN_LENGTH and form != REDACTED)


def mask_echoes(text: str, removed: Iterable[str]) -> str:
    """``text`` with every value in ``removed`` (longest first) replaced by ``REDACTED``."""
    for value in removed:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def mask_echoes_in_body(
    body: bytes, removed: Iterable[str], offsets: Iterable[int] = ()
) -> tuple[bytes, list[int]]:
    """``body`` with the ``removed`` values masked, and each of ``offsets`` moved to where its byte now is.

    A fragment boundary inside a masked value moves to the end of ``REDACTED``,
    so the recorded fragmentation survives around it.
    """
    needles = [value.encode("utf-8") for value in removed]
    spans: list[tuple[int, int]] = []
    for needle in needles:
        start = body.find(needle)
        while start != -1:
            end = start + len(needle)
            if not any(start < b and a < end for a, b in spans):
                spans.append((start, end))
            start = body.find(needle, end)
    if not spans:
        return body, list(offsets)
    spans.sort()
    token = REDACTED.encode()
    pieces, last = [], 0
    for start, end in spans:
        pieces += [body[last:start], token]
        last = end
    pieces.append(body[last:])
    moved = []
    for offset in offsets:
        shift = 0
        for start, end in spans:
            if offset <= start:
                break
            shift += len(token) - (end - start) if offset >= end else len(token) - (offset - start)
        moved.append(offset + shift)
    return b"".join(pieces), moved


def mask_interaction_echoes(interaction: Interaction, removed: tuple[str, ...]) -> int:
    """Mask the request's credentials where the response quotes them; how many places were masked.

    A provider's 401 often quotes the key it was sent. Fragment boundaries and a
    recorded failure's offset move with the bytes, so the recorded fragmentation
    survives around the mask.
    """
    headers = [(name, mask_echoes(value, removed)) for name, value in interaction.headers]
    masked = sum(new != old for (_, new), (_, old) in zip(headers, interaction.headers, strict=True))
    interaction.headers = headers
    sizes = interaction.fragment_sizes() if interaction.fragments else []
    ends = list(itertools.accumulate(sizes))
    error = interaction.error
    body, moved = mask_echoes_in_body(interaction.body, removed, [*ends, error.offset if error else 0])
    if body != interaction.body:
        masked += 1
        interaction.body = body
        if interaction.fragments:
            starts = [0, *moved[:-2]]
            interaction.fragments = [(ms, end - start) for (ms, _), start, end
                                     in zip(interaction.fragments, starts, moved[:-1], strict=True) if end > start]
    if error is not None:
        message = mask_echoes(error.message, removed)
        if message != error.message or moved[-1] != error.offset:
            masked += message != error.message
            interaction.error = dataclasses.replace(error, message=message, offset=moved[-1])
    return masked
