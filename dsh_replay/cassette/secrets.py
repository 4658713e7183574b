"""Secrets that slipped through: the scan before every write and of files on disk (sans-I/O).

The scan runs over every string of a cassette right before it is written
(after :mod:`.scrub` took the credentials out), and over files on disk for
``dsh-replay scan``. A hit names the interaction and the field so the user can
add a filter. Placeholders left by the scrubber never match.

A file on disk is scanned twice over (:func:`find_file_secrets`): its parsed
values, so a hit names its field, and its raw text line by line, for what no
parser shows (a YAML comment, a file that does not parse, a base64 run). A
secret the raw text shows on a line where a parsed value already showed it is
the same sighting and is reported once, at the field.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote

from ..wire.credentials import REDACTED, unscrubbed_credentials
from .content_coding import UndecodableBody, content_encodings, decode_content, inflate_sniffed

if TYPE_CHECKING:
    from .interaction import Interaction

__all__ = ["Located", "SecretHit", "encoded_body_secrets", "find_file_secrets", "find_secrets", "mask", "redact"]

# -- scanning ------------------------------------------------------------------


# Shapes of real credentials, not exact formats: a scan that misses a key is
# worse than one that asks the user to look at a test key that looks real.
# The leading word boundary is checked in Python (``_starts_word``), not with ``\b``
# in the pattern: a pattern that starts with a literal lets the regex engine jump
# between candidates, about 50x faster over a large body.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Anthropic API key", re.compile(r"sk-ant-[A-Za-z0-9_-]{16,}")),
    ("Stripe-style secret key", re.compile(r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("OpenAI API key", re.compile(r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("Google API key", re.compile(r"AIza[0-9A-Za-z_-]{30,}")),
    ("Groq API key", re.compile(r"gsk_[A-Za-z0-9]{20,}")),
    ("xAI API key", re.compile(r"xai-[A-Za-z0-9_-]{20,}")),
    ("Hugging Face token", re.compile(r"hf_[A-Za-z0-9]{30,}")),
    ("GitHub token", re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("Slack token", re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}")),
    ("AWS access key id", re.compile(r"(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    # Auth schemes are case-insensitive (RFC 9110 §11.1): "bearer" and "BEARER" too.
    # Unlike the others this pattern has no literal prefix; it costs ~10 ms per MB.
    ("bearer token", re.compile(r"(?i:bearer)\s+(?!REDACTED\b)[A-Za-z0-9._~+/-]{16,}=*")),
    # A provider's 401 that quotes the key it was sent ("Incorrect API key provided: Zq7…"),
    # whatever the key's shape. Only the group is the secret; OpenAI masks its own
    # quote with asterisks, which end the match before it is long enough.
    ("API key quoted in an error", re.compile(
        r"(?i:(?:incorrect|invalid|wrong|unknown|expired|revoked|bad)\s+(?:api[ _-]?)?(?:key|token)"
        r"(?:\s+provided)?\s*[:=]\s*[\"']?)(?P<secret>(?!REDACTED\b)(?=[^\s\"']*\d)[A-Za-z0-9._~+/-]{20,})")),
)

#: the case-insensitive patterns, which the engine would try at every position of a body (the quoted-key
#: one at ~65 ms a MB), begin with one of these words: they are tried only where one begins, found in the
#: lowered text by a search for the words alone (no word begins inside another, so one pass finds every
#: beginning). Under ``re.IGNORECASE`` the letters of these words match only themselves, their capitals,
#: the Kelvin sign (lowered to ``k``) and the dotless and dotted capital i: the dotless one (U+0131) is
#: taken for ``i`` here, and a text with the dotted capital (U+0130, whose lower case is two characters)
#: is scanned everywhere.
START_WORDS: dict[str, tuple[str, ...]] = {
    "bearer token": ("bearer",),
    "API key quoted in an error": ("incorrect", "invalid", "wrong", "unknown", "expired", "revoked", "bad"),
}
_STARTS = {kind: re.compile("|".join(words)) for kind, words in START_WORDS.items()}

_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def _starts_word(text: str, start: int) -> bool:
    if start == 0 or not _is_word_char(text[start - 1]):
        return True
    # In "token=%3DAIza…" the "D" ends a percent-escape, not a word: the key
    # starts after "=". An escape of a word character ("%41") still joins the word.
    escape = _ESCAPE.fullmatch(text, start - 3, start) if start >= 3 else None
    return escape is not None and not _is_word_char(chr(int(escape.group(0)[1:], 16)))


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


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


def redact(text: str, removed: Iterable[str] = ()) -> str:
    """``text`` (a message about a request) with ``removed`` and every credential-shaped string in it masked.

    For messages that quote a live request, which was scrubbed of what the
    scrubber knows and may hold a key it does not (a JSON field of no known
    name, the body of a request that matched nothing): printed by a CI job, a
    message is as public as a committed file. A key that only a decoded view
    of the text shows (``sk%2Dproj…``) masks that view, which then stands for
    the text.
    """
    for value in sorted(removed, key=len, reverse=True):
        if len(value) >= 8 and value in text:
            text = text.replace(value, REDACTED)
    for view in (text, _percent_decoded(text), _unescaped(text)):
        # a key glued to a word ("/bot<key>/") is masked too: a message may lose a word, never keep a key
        secrets = [secret for _, secret in _matches(view, inside_words=True)]
        if secrets and view is not text:
            text = view
        for secret in sorted(secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
    return text


def find_secrets(value: object, field: str = "") -> Iterator[SecretHit]:
    """Walk nested dicts/lists/strings/bytes and yield every credential-shaped string.

    Each container is walked once, even when it is reachable along many paths:
    YAML aliases share one object, and a few lines of nested aliases stand for
    billions of paths (an "alias bomb"). A secret there is reported at the
    first path that reaches it. The walk keeps its own stack, so depth is no limit.
    """
    return (SecretHit(kind, where, mask(secret)) for kind, where, secret in _walk(value, field))


#: (kind, field, the secret itself): what the scan found, before it is masked for a report
_Found = tuple[str, str, str]


def _walk(value: object, field: str) -> Iterator[_Found]:
    seen: set[int] = set()
    pending: list[tuple[str, object]] = [(field, value)]
    while pending:
        field, value = pending.pop()
        if isinstance(value, bytes):
            yield from _bytes_secrets(value, field or "<value>")
            continue
        if isinstance(value, str):
            field = field or "<value>"
            yield from _short_string_secrets(value, field) if len(value) <= _REMEMBERED else _string_secrets(value, field)
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


#: strings up to this long have their findings remembered: a cassette's names and header values
#: recur in every cassette written (each interaction's ``content-type``, ``POST``, its ``uri``)
_REMEMBERED = 512


@functools.lru_cache(maxsize=8192)
def _short_string_secrets(text: str, field: str) -> tuple[_Found, ...]:
    """:func:`_string_secrets`, all of them, remembered: the findings depend on nothing but the two strings."""
    return tuple(_string_secrets(text, field))


def _string_secrets(text: str, field: str) -> Iterator[_Found]:
    """Secrets in ``text``, then those only its percent-decoded or unescaped form shows.

    The decoded text is scanned as well as the raw one (the word-start check
    already finds a key after an escape, as in ``key=%3DAIza…``) for keys whose
    own characters or separator are escaped: ``Bearer%20eyJ…``, ``sk%2Dproj…``,
    a doubly encoded ``%253DAIza…``. The patterns are the same, so decoded text
    is flagged only for what it would be flagged for unencoded: ordinary
    encoded text (``caf%C3%A9``, ``%2Fv1%2Fchat``) stays clean. A key already
    found raw (or a piece of it, cut short by an escape) is not reported again.

    JSON string escapes hide a key the same way: in ``"line\\nsk-…"`` (a JSON
    body inside a string) the key seems to go on the word ``n``, and in
    ``\\u003dAIza…`` the word ``d``. The unescaped view sees them.
    """
    found = list(_matches(text))
    yield from ((kind, field, secret) for kind, secret in found)
    for hit in unscrubbed_credentials(text, field):
        if not any(hit[2] in seen or seen in hit[2] for _, seen in found):
            found.append((hit[0], hit[2]))
            yield hit
    for view, decoded in (("percent-decoded", _percent_decoded(text)), ("unescaped", _unescaped(text)),
                          ("base64-decoded", _base64_decoded(text))):
        if decoded == text:
            continue
        for kind, secret in _matches(decoded):
            if not any(secret in seen or seen in secret for _, seen in found):
                found.append((kind, secret))
                yield kind, f"{field} ({view})", secret


# A run of base64 in a value ("Basic dXNlcjpzay1w…", a key a gateway takes encoded): 32 characters at least,
# as for files on disk (see ``_BASE64_RUN`` there, which also joins the lines of a folded ``!!binary``).
# Found with a byte map and a search for 32 letters in a row, not a regular expression: the engine
# would try a character class at every position of a multi-megabyte body (15 ns a byte, five times this).
_BASE64_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_BASE64_MAP = bytes(ord("a") if byte in _BASE64_LETTERS else ord(" ") for byte in range(256))
_BASE64_START = b"a" * 32


#: the characters mapped at once (a 16 MiB decompressed body is read in windows, not copied whole twice)
_BASE64_WINDOW = 1 << 20


def _base64_decoded(text: str) -> str:
    """The base64 runs of ``text`` decoded, one per line ("" when none decodes): what a key hides in."""
    decoded: list[str] = []
    start = 0
    while start < len(text):
        # ASCII with "?" for the rest: a byte per character, and no base64 letter lost
        raw = text[start : start + _BASE64_WINDOW].encode("ascii", "replace")
        mapped = raw.translate(_BASE64_MAP)
        last = len(raw)
        if start + last < len(text):  # a run the window cuts is read whole with the next window
            last = mapped.rfind(b" ") + 1 or last
        at = mapped.find(_BASE64_START, 0, last)
        while at != -1:  # the first 32 letters in a row found are a run's start: runs are as long as they go
            end = mapped.find(b" ", at, last)
            end = last if end == -1 else end
            data = _base64(raw[at:end].decode("ascii"))
            if data:
                decoded.append(data.decode("utf-8", "replace"))
            at = mapped.find(_BASE64_START, end, last)
        start += last
    return "\n".join(decoded)


def _percent_decoded(text: str) -> str:
    return unquote(text) if "%" in text else text


_JSON_ESCAPE = re.compile(r'\\(u[0-9A-Fa-f]{4}|["\\/bfnrt])')
_JSON_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _unescaped(text: str) -> str:
    """``text`` with JSON string escapes undone, over as many layers as there are (up to four)."""
    for _ in range(4):
        if "\\" not in text:
            break
        undone = _JSON_ESCAPE.sub(_unescape_one, text)
        if undone == text:
            break
        text = undone
    return text


def _unescape_one(match: re.Match[str]) -> str:
    escape = match.group(1)
    if escape[0] == "u":
        return chr(int(escape[1:], 16))
    return _JSON_ESCAPES.get(escape, escape)


def _matches(text: str, *, inside_words: bool = False) -> Iterator[tuple[str, str]]:
    # One match per secret: the patterns run most specific first, and a match
    # overlapping one already taken (sk-ant-… is also sk-…, "Bearer sk-…" is
    # also a bearer token) is the same secret.
    taken: list[tuple[int, int]] = []
    lowered = text.lower()
    words_at = lowered.replace("\u0131", "i") if len(lowered) == len(text) else None
    for kind, pattern in _PATTERNS:
        starts = _STARTS.get(kind)
        found = pattern.finditer(text) if starts is None or words_at is None else _found_at(
            pattern, text, words_at, starts)
        for match in found:
            group = "secret" if "secret" in pattern.groupindex else 0
            start, end = match.span(group)
            if (not inside_words and not _starts_word(text, start)) or any(
                    start < t_end and t_start < end for t_start, t_end in taken):
                continue
            taken.append((start, end))
            yield kind, match.group(group)


def _found_at(pattern: re.Pattern[str], text: str, lowered: str, words: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)`` for a pattern whose matches begin where ``words`` finds one in ``lowered``."""
    end = 0
    for word in words.finditer(lowered):
        at = word.start()
        if at < end:  # inside the match before: finditer goes on after it
            continue
        match = pattern.match(text, at)
        if match is not None:
            end = match.end()
            yield match


# -- compressed bodies ---------------------------------------------------------


def _bytes_secrets(data: bytes, field: str) -> Iterator[_Found]:
    yield from _string_secrets(data.decode("utf-8", "replace"), field)
    inflated = inflate_sniffed(data)
    if inflated is not None:
        name, text = inflated
        yield from _string_secrets(text.decode("utf-8", "replace"), f"{field} (decompressed {name})")


def encoded_body_secrets(interaction: Interaction) -> Iterator[SecretHit]:
    """Secrets in an interaction's bodies once their ``Content-Encoding`` is undone (before a write).

    The bytes themselves are scanned as they are stored (:func:`find_secrets`),
    gzip and zlib sniffed; this reads each body as its headers say it was
    coded, so raw deflate, brotli and zstd are read too. A request body is
    judged by where its values are as well (a JSON or form field named like a
    credential). A body that cannot be decoded cannot be vouched for: it is a
    hit of its own, with the reason.
    """
    request = interaction.request
    parts = (("request", list(request.headers.items()), request.body), ("response", interaction.headers, interaction.body))
    for part, headers, body in parts:
        encodings = content_encodings((name, str(value)) for name, value in headers)
        if not encodings or not body:
            continue
        field = f"{part}.body (decoded {', '.join(encodings)})"
        raw = body.encode("utf-8", "surrogateescape") if isinstance(body, str) else bytes(body)
        try:
            decoded = decode_content(raw, encodings, part).decode("utf-8", "replace")
        except UndecodableBody as exc:
            yield SecretHit("a body that cannot be scanned", field, f"{exc}; it cannot be checked for credentials")
            continue
        for kind, _, secret in _string_secrets(decoded, f"{part}.body"):
            yield SecretHit(kind, field, mask(secret))


# -- files on disk -------------------------------------------------------------


class Located(NamedTuple):
    """A parsed value of a file, with its field and the lines (1-based, inclusive) it was read from."""

    field: str
    value: object
    first_line: int
    last_line: int


# Base64 the raw text holds: a ``!!binary`` body (PyYAML folds it into lines of
# 76 characters under one indentation), or a body a JSON cassette keeps encoded.
# 32 characters at least: shorter runs are words and ids, and no key fits in 24 bytes.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{32,}(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9+/]{4,})*=*")


def find_file_secrets(text: str, values: Iterable[Located] = ()) -> list[SecretHit]:
    """Every secret in a file: in its parsed ``values`` by field, and in its raw ``text`` by line.

    The raw text is scanned line by line (comments, lines of a file that does not
    parse), and every base64 run in it is decoded (and inflated, if it holds gzip
    or deflate). A secret is reported once per sighting: the raw text shows it
    again on a line a parsed value spans, where that value's hit already names its
    field. Hits come in line order.
    """
    parsed = [(value.first_line, value.last_line, found) for value in values
              for found in _walk(value.value, value.field)]
    raw = list(_raw_secrets(text))
    seen = [(first, last, found[2]) for first, last, found in parsed]
    hits = [(first, found) for first, _, found in parsed]
    for first, last, found in raw:
        secret = found[2]
        if any(a <= last and first <= b and (secret in other or other in secret) for a, b, other in seen):
            continue
        seen.append((first, last, secret))
        hits.append((first, found))
    hits.sort(key=lambda hit: hit[0])  # stable: a line's hits keep the order they were found in
    return [SecretHit(kind, where, mask(secret)) for _, (kind, where, secret) in hits]


def _raw_secrets(text: str) -> Iterator[tuple[int, int, _Found]]:
    for number, line in enumerate(text.split("\n"), start=1):
        for found in _string_secrets(line, f"line {number}"):
            yield number, number, found
    starts = [0] + [match.end() for match in re.finditer("\n", text)]
    for match in _BASE64_RUN.finditer(text):
        data = _base64(match.group(0))
        if data is None:
            continue
        first = bisect.bisect_right(starts, match.start())
        last = bisect.bisect_right(starts, match.end() - 1)
        for found in _bytes_secrets(data, f"line {first} (base64-decoded)"):
            yield first, last, found


def _base64(run: str) -> bytes | None:
    letters = "".join(run.split()).rstrip("=")
    # a run that starts mid-word has a ragged end: one letter too many, or padding left out
    letters = letters[:-1] if len(letters) % 4 == 1 else letters + "=" * (-len(letters) % 4)
    try:
        return base64.b64decode(letters, validate=True)
    except (binascii.Error, ValueError):
        return None
