"""Secrets never reach disk: what is scrubbed, and the scan for what slipped through (sans-I/O).

:class:`Scrubber` replaces credentials in the places providers take them
(headers, query parameters, and user filters over bodies) with ``REDACTED``
before a cassette is written. The scan then runs over every string of the
cassette right before it is written, and over files on disk for
``dsh-replay scan``. A hit names the interaction and the field so the user can
add a filter. Placeholders left by the scrubber never match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "DEFAULT_QUERY_PARAMETERS",
    "DEFAULT_REQUEST_HEADERS",
    "DEFAULT_RESPONSE_HEADERS",
    "REDACTED",
    "BodyFilter",
    "Scrubber",
    "SecretHit",
    "find_secrets",
    "mask",
]

REDACTED = "REDACTED"

# -- scrubbing -----------------------------------------------------------------

DEFAULT_REQUEST_HEADERS = frozenset(
    ("authorization", "x-api-key", "api-key", "x-goog-api-key", "proxy-authorization", "cookie")
)
DEFAULT_RESPONSE_HEADERS = frozenset(("set-cookie",))
DEFAULT_QUERY_PARAMETERS = frozenset(("key", "api_key"))

BodyFilter = Callable[[str, bytes], bytes]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scrubber:
    """What is replaced by ``REDACTED`` before a cassette reaches disk.

    ``body_filters`` are callables ``(part, body) -> body`` where ``part`` is
    ``"request"`` or ``"response"``, for secrets only the user knows about.
    """

    request_headers: frozenset[str] = DEFAULT_REQUEST_HEADERS
    response_headers: frozenset[str] = DEFAULT_RESPONSE_HEADERS
    query_parameters: frozenset[str] = DEFAULT_QUERY_PARAMETERS
    body_filters: tuple[BodyFilter, ...] = ()

    def uri(self, uri: str) -> tuple[str, int]:
        """The URI with secret query parameters replaced, and how many were."""
        parts = urlsplit(uri)
        if not parts.query:
            return uri, 0
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        count = sum(1 for key, value in pairs if key.lower() in self.query_parameters and value != REDACTED)
        if not count:
            return uri, 0
        scrubbed = [(k, REDACTED if k.lower() in self.query_parameters else v) for k, v in pairs]
        return urlunsplit(parts._replace(query=urlencode(scrubbed))), count

    def headers(self, headers: Iterable[tuple[str, str]], names: frozenset[str]) -> tuple[list[tuple[str, str]], int]:
        out, count = [], 0
        for name, value in headers:
            if name.lower() in names and value != REDACTED:
                out.append((name, REDACTED))
                count += 1
            else:
                out.append((name, value))
        return out, count

    def body(self, part: str, body: bytes) -> bytes:
        for body_filter in self.body_filters:
            body = body_filter(part, body)
        return body


# -- scanning ------------------------------------------------------------------


# Shapes of real credentials, not exact formats: a scan that misses a key is
# worse than one that asks the user to look at a test key that looks real.
# The leading word boundary is checked in Python (``_starts_word``), not with ``\b``
# in the pattern: a pattern that starts with a literal lets the regex engine jump
# between candidates, about 50x faster over a large body.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Anthropic API key", re.compile(r"sk-ant-[A-Za-z0-9_-]{16,}")),
    ("OpenAI API key", re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("Google API key", re.compile(r"AIza[0-9A-Za-z_-]{30,}")),
    ("AWS access key id", re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("bearer token", re.compile(r"Bearer\s+(?!REDACTED\b)[A-Za-z0-9._~+/-]{16,}=*")),
)


def _starts_word(text: str, start: int) -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


@dataclass(frozen=True, slots=True)
class SecretHit:
    """A credential-shaped string found at ``field``."""

    kind: str
    field: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.kind} in {self.field}: {self.excerpt}"


def mask(secret: str) -> str:
    """Show just enough of a secret to find it, never enough to use it."""
    return secret[:8] + "…" if len(secret) > 8 else "…"


def find_secrets(value: object, field: str = "") -> Iterator[SecretHit]:
    """Walk nested dicts/lists/strings/bytes and yield every credential-shaped string.

    Each container is walked once, even when it is reachable along many paths:
    YAML aliases share one object, and a few lines of nested aliases stand for
    billions of paths (an "alias bomb"). A secret there is reported at the
    first path that reaches it. The walk keeps its own stack, so depth is no limit.
    """
    seen: set[int] = set()
    pending: list[tuple[str, object]] = [(field, value)]
    while pending:
        field, value = pending.pop()
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            yield from _string_secrets(value, field or "<value>")
            continue
        if not isinstance(value, (dict, list, tuple)) or id(value) in seen:
            continue
        seen.add(id(value))
        children: list[tuple[str, object]] = []
        if isinstance(value, dict):
            for key, item in value.items():
                children += [(field, key), (f"{field}.{key}" if field else str(key), item)]
        else:
            children = [(f"{field}[{position}]", item) for position, item in enumerate(value)]
        pending += reversed(children)


def _string_secrets(text: str, field: str) -> Iterator[SecretHit]:
    # One hit per secret: the patterns run most specific first, and a match
    # overlapping one already reported (sk-ant-… is also sk-…, "Bearer sk-…" is
    # also a bearer token) is the same secret.
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if not _starts_word(text, start) or any(start < t_end and t_start < end for t_start, t_end in taken):
                continue
            taken.append((start, end))
            yield SecretHit(kind, field, mask(match.group(0)))
