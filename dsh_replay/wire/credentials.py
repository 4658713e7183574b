"""Where HTTP requests carry credentials: the names of headers, query parameters and body fields.

One list, read by the transport (which refuses a credential in a URL) and by the
cassette scrubber and scan (which keep credentials off disk), so that what the
one treats as a secret the other does too; and the scan's rule for a value that
sits in such a place unscrubbed (:func:`unscrubbed_credentials`). Sans-I/O.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson

__all__ = [
    "CREDENTIAL_BODY_FIELDS",
    "CREDENTIAL_BODY_FIELD_ENDINGS",
    "CREDENTIAL_HEADERS",
    "CREDENTIAL_HEADER_PATTERNS",
    "CREDENTIAL_QUERY_PARAMETERS",
    "HARMLESS_HEADER_PATTERNS",
    "REDACTED",
    "RESPONSE_CREDENTIAL_HEADERS",
    "form_pairs",
    "is_credential_body_field",
    "is_credential_header",
    "is_credential_parameter",
    "unscrubbed_credentials",
]

#: what stands in a recording where a credential was
REDACTED = "REDACTED"

#: request headers that always carry a credential (lower case)
CREDENTIAL_HEADERS = frozenset(
    ("authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-goog-api-key")
)

#: response headers that carry one (a session cookie, a key a gateway echoes back)
RESPONSE_CREDENTIAL_HEADERS = frozenset(("set-cookie", "x-api-key"))

#: any header named like these carries one too: ``x-portkey-api-key``, Azure's
#: ``Ocp-Apim-Subscription-Key`` and ``x-functions-key``, ``x-apikey``, ``x-amz-security-token``,
#: ``x-auth-token``, ``x-client-secret``
CREDENTIAL_HEADER_PATTERNS = ("*-key", "*apikey", "*-token", "*-secret")

#: names the patterns would catch that carry no secret (rate-limit counters, API versions, a
#: request's idempotency key, a WebSocket handshake's nonce)
HARMLESS_HEADER_PATTERNS = ("*ratelimit*", "*-version", "x-stainless-*", "idempotency-key", "sec-websocket-key")

#: query parameters that carry a credential (lower case): API keys (Gemini's ``key``, Azure API
#: Management's ``subscription-key``), OAuth tokens, signed URLs (Azure SAS ``sig``, AWS SigV4 ``X-Amz-*``)
CREDENTIAL_QUERY_PARAMETERS = frozenset((
    "key", "api_key", "apikey", "api-key", "x-api-key", "subscription-key", "subscription_key",
    "access_token", "access-token", "auth_token", "authtoken", "token", "client_secret",
    "sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
))

#: JSON and form body fields that carry a credential (compared in lower case, so ``apiKey`` too):
#: some gateways take the key in the body
CREDENTIAL_BODY_FIELDS = frozenset((
    "api_key", "apikey", "access_token", "auth_token", "refresh_token", "token", "password", "secret",
    "client_secret", "private_key", "subscription_key",
))

#: any body field whose name ends like these carries one too (lower case): ``openai_api_key``,
#: ``openaiApiKey``, ``session_token``, ``webhook_secret``
CREDENTIAL_BODY_FIELD_ENDINGS = ("api_key", "apikey", "_token", "_secret", "-key")


# A form-encoded body (``a=1&b=two``): names and values of URL characters and escapes, no spaces or lines.
_FORM = re.compile(r"[\w.~%+*-]+=[\w.~%+*/=:-]*(?:&[\w.~%+*-]+=[\w.~%+*/=:-]*)*", re.ASCII)


def form_pairs(body: str) -> list[tuple[str, str]] | None:
    """The (name, value) pairs of a form-encoded body, or None when ``body`` is none."""
    return parse_qsl(body, keep_blank_values=True) if _FORM.fullmatch(body) else None


def is_credential_header(name: str, *, response: bool = False) -> bool:
    """Whether a header of this name carries a credential (in a response with ``response``)."""
    lowered = name.lower()
    if lowered in (RESPONSE_CREDENTIAL_HEADERS if response else CREDENTIAL_HEADERS):
        return True
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in CREDENTIAL_HEADER_PATTERNS) and not any(
        fnmatch.fnmatchcase(lowered, pattern) for pattern in HARMLESS_HEADER_PATTERNS
    )


def is_credential_parameter(name: str) -> bool:
    """Whether a query parameter of this name carries a credential."""
    return name.lower() in CREDENTIAL_QUERY_PARAMETERS


def is_credential_body_field(name: str) -> bool:
    """Whether a JSON or form body field of this name carries a credential."""
    lowered = name.lower()
    return lowered in CREDENTIAL_BODY_FIELDS or lowered.endswith(CREDENTIAL_BODY_FIELD_ENDINGS)


# A field's own name and the name of what holds it: ``interactions[0].request.headers.x-auth-token[0]``
# is ("x-auth-token", "headers").
_FIELD_PATH = re.compile(r"(?:^|\.)(?:([^.\[\]]+)(?:\[\d+\])*\.)?([^.\[\]]+)(?:\[\d+\])*$")


def unscrubbed_credentials(text: str, field: str) -> Iterator[tuple[str, str, str]]:
    """(kind, field, value) of each credential ``text`` holds because of where it is, whatever its shape.

    ``field`` is the value's path in a cassette, as the scan names it
    (``interactions[0].request.headers.x-auth-token[0]``).

    A header, query parameter, URL userinfo or JSON body field that carries
    credentials and is not ``REDACTED`` was never scrubbed: a key of a provider
    whose shape no pattern knows is still found there.
    """
    found = _FIELD_PATH.search(field)
    if found is None or _placeholder(text):
        return
    parent, name = found.group(1) or "", found.group(2)
    if parent.lower() == "headers" and (is_credential_header(name) or is_credential_header(name, response=True)):
        yield "credential header", field, text
    elif parent.lower() != "headers" and is_credential_body_field(name):
        yield "credential field", field, text
    elif name == "uri":
        yield from _url_credentials(text, field)
    elif name == "body" and parent == "request" and text.lstrip()[:1] in ("{", "["):
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        yield from _json_credentials(data, field)
    elif name == "body" and parent == "request" and (pairs := form_pairs(text)):
        for key, value in pairs:
            if (is_credential_body_field(key) or is_credential_parameter(key)) and not _placeholder(value):
                yield "credential field", f"{field} (form {key})", value


# What stands where a credential would: nothing, the mask (after an auth scheme
# too: "Bearer REDACTED"), or a reference the configuration expands at run time
# (``apiKey: ${ACME_API_KEY:-offline}``).
_MASKED = re.compile(r"(?:[A-Za-z][A-Za-z0-9-]*\s+)?" + REDACTED)
_ENV_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-[^}]*)?\}")


def _placeholder(value: str) -> bool:
    """No credential: a mask, an expanded-later reference, or a made-up word such as
    ``offline-placeholder`` (shorter than 8, or no digit in fewer than 24 characters:
    generated keys and tokens have both length and digits)."""
    if _MASKED.fullmatch(value) or _ENV_REFERENCE.fullmatch(value):
        return True
    return len(value) < 8 or (len(value) < 24 and not any(char.isdigit() for char in value))


def _url_credentials(url: str, field: str) -> Iterator[tuple[str, str, str]]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    userinfo = parts.netloc.rpartition("@")[0]
    if userinfo:
        user, colon, password = userinfo.partition(":")
        secret = unquote(password if colon else user)
        if not _placeholder(secret):
            yield "URL userinfo credential", field, secret
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if is_credential_parameter(key) and not _placeholder(value):
            yield f"credential query parameter {key!r}", field, value


def _json_credentials(value: object, field: str) -> Iterator[tuple[str, str, str]]:
    pending: list[tuple[str, object]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if is_credential_body_field(str(key)) and isinstance(child, str) and not _placeholder(child):
                    yield "credential field", f"{field} (JSON {where})", child
                else:
                    pending.append((where, child))
        elif isinstance(item, list):
            pending += [(f"{path}[{n}]", child) for n, child in enumerate(item)]
