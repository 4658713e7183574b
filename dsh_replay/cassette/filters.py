"""What a user asks to leave out of recorded requests and responses (vcrpy's filters).

Applied on the way to the cassette and to every live request before it is
matched, so a filtered request still matches its recording. A rule is a
name or glob pattern (case-insensitive for headers) and a replacement:
``None`` removes the item, a string replaces its value.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from ..errors import CassetteError
from .interaction import Interaction, headers_dict
from .scrub import REDACTED

__all__ = ["RecordFilters", "Rule"]

#: (name or glob pattern, replacement; None removes)
Rule = tuple[str, str | None]


def _replaced(name: str, rules: Iterable[Rule], *, fold: bool) -> tuple[bool, str | None]:
    """(does a rule apply, its replacement) for one header/parameter name."""
    key = name.lower() if fold else name
    for pattern, replacement in rules:
        if fnmatch.fnmatchcase(key, pattern.lower() if fold else pattern):
            return True, replacement
    return False, None


def _apply(pairs: Iterable[tuple[str, Any]], rules: Iterable[Rule]) -> list[tuple[str, Any]] | None:
    """The (name, value) pairs with ``rules`` applied, or None when no rule applies."""
    out, hits = [], 0
    for key, value in pairs:
        hit, replacement = _replaced(key, rules, fold=False)
        hits += hit
        if not hit:
            out.append((key, value))
        elif replacement is not None:
            out.append((key, replacement))
    return out if hits else None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordFilters:
    """The user's filters and hooks for one cassette; see the module docstring."""

    headers: tuple[Rule, ...] = ()
    query_parameters: tuple[Rule, ...] = ()
    post_data_parameters: tuple[Rule, ...] = ()
    #: extra secret patterns, replaced by ``REDACTED`` in bodies and header values
    redact: tuple[re.Pattern[bytes], ...] = ()
    #: ``hook(vcr_request) -> request | None``; None: the request is neither recorded nor replayed
    before_record_request: Callable[[Any], Any] | None = None
    #: ``hook({"status", "headers", "body"}) -> dict | None``; None: the response is not recorded
    before_record_response: Callable[[dict[str, Any]], Any] | None = None

    def __bool__(self) -> bool:
        return bool(self.headers or self.query_parameters or self.post_data_parameters or self.redact
                    or self.before_record_request or self.before_record_response)

    def header_items(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        out = []
        for name, value in headers:
            hit, replacement = _replaced(name, self.headers, fold=True)
            if hit and replacement is None:
                continue
            out.append((name, replacement if hit and replacement is not None else self._redact_text(value)))
        return out

    def uri(self, uri: str) -> str:
        parts = urlsplit(uri)
        if not self.query_parameters or not parts.query:
            return uri
        pairs = _apply(parse_qsl(parts.query, keep_blank_values=True), self.query_parameters)
        return uri if pairs is None else urlunsplit(parts._replace(query=urlencode(pairs)))

    def request_body(self, body: bytes) -> bytes:
        if self.post_data_parameters and body:
            body = self._post_data(body)
        return self.response_body(body)

    def response_body(self, body: bytes) -> bytes:
        for pattern in self.redact:
            body = pattern.sub(REDACTED.encode(), body)
        return body

    def _redact_text(self, value: str) -> str:
        if not self.redact:
            return value
        return self.response_body(value.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")

    def _post_data(self, body: bytes) -> bytes:
        """Top-level fields of a JSON object body, or of a form body, filtered (untouched when none applies)."""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            kept = _apply(data.items(), self.post_data_parameters)
            return body if kept is None else orjson.dumps(dict(kept))
        if data is not None or b"=" not in body:
            return body
        try:
            pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            return body
        filtered = _apply(pairs, self.post_data_parameters)
        return body if filtered is None else urlencode(filtered).encode("ascii")

    def response_hook(self, interaction: Interaction, body: bytes, path: Path) -> bytes | None:
        """Run ``before_record_response`` on vcrpy's response shape; the body it leaves, or None to drop it."""
        hook = self.before_record_response
        assert hook is not None
        response = {
            "status": {"code": interaction.status, "message": interaction.reason},
            "headers": headers_dict(interaction.headers),
            "body": {"string": body},
        }
        result = hook(response)
        if result is None:
            return None
        try:
            status, headers, new_body = result["status"], result["headers"], result["body"]["string"]
            interaction.status, interaction.reason = int(status["code"]), str(status.get("message", ""))
            interaction.headers = [(str(k), str(v)) for k, values in headers.items()
                                   for v in (values if isinstance(values, list) else [values])]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CassetteError(
                f"cassette {path}: before_record_response must return the response dict it was given "
                f"(status, headers, body.string) or None; got {type(result).__name__} ({exc})", path=str(path),
            ) from None
        return new_body.encode() if isinstance(new_body, str) else bytes(new_body)
