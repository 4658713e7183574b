"""Provider errors: what a refusal or an error event means, whatever its shape.

Every provider says "no" differently — OpenAI ``{"error": {"message", "type",
"code"}}``, Anthropic ``{"type": "error", "error": {...}}``, Gemini's Google RPC
status with ``details``, Ollama's bare string — in an HTTP error body and in
error events inside a 200 stream alike. One mapping turns all of them into the
:class:`ProviderError` subclasses, so the same provider code always gives the
same class: the HTTP status decides when there is one, the provider's code
refines it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import httpx

from ..errors import (
    AuthenticationError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
)

__all__ = [
    "REQUEST_ID_HEADERS",
    "error_from_payload",
    "error_from_response",
    "parse_retry_after",
    "retry_after_from_headers",
]

#: Response headers that carry the provider's request id, most common first
#: (OpenAI and compatibles, Anthropic, Google, AWS, Azure).
REQUEST_ID_HEADERS: tuple[str, ...] = (
    "x-request-id",
    "request-id",
    "x-goog-request-id",
    "x-amzn-requestid",
    "apim-request-id",
    "x-ms-request-id",
)

# Error codes, types and Google RPC statuses (lower-cased) by the class they mean.
_CLASS_BY_CODE: dict[str, type[ProviderError]] = {
    code: cls
    for cls, codes in (
        (OverloadedError, "overloaded_error overloaded"),
        (
            RateLimitError,
            "rate_limit_error rate_limit_exceeded resource_exhausted insufficient_quota",
        ),
        (
            AuthenticationError,
            "authentication_error permission_error invalid_api_key unauthenticated"
            " permission_denied unauthorized api_key_invalid",
        ),
        (
            InvalidRequestError,
            "invalid_request_error not_found_error request_too_large invalid_argument"
            " failed_precondition out_of_range not_found context_length_exceeded model_not_found",
        ),
        (
            ServerError,
            "api_error server_error internal internal_error unavailable deadline_exceeded",
        ),
    )
    for code in codes.split()
}

_HINTS: dict[type[ProviderError], str] = {
    AuthenticationError: "check the API key given to the adapter",
}


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds or an HTTP date.

    Returns ``None`` when absent or unparsable, and never less than 0 (a date in
    the past means "now"). *now* defaults to the current UTC time.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=timezone.utc)
    current = now or datetime.now(timezone.utc)
    return max(0.0, (when - current).total_seconds())


def retry_after_from_headers(headers: httpx.Headers) -> float | None:
    # OpenAI also sends the millisecond variant, which is more precise.
    millis = headers.get("retry-after-ms")
    if millis is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(millis) / 1000)
    return parse_retry_after(headers.get("retry-after"))


def _request_id(headers: httpx.Headers) -> str | None:
    return next((headers[name] for name in REQUEST_ID_HEADERS if name in headers), None)


@dataclass(frozen=True, slots=True)
class _ErrorFacts:
    message: str
    codes: tuple[str, ...]  # provider code/type/status strings, most specific first
    numeric: int | None  # an HTTP-like status found inside the payload
    request_id: str | None
    retry_after: float | None


def _facts(payload: object) -> _ErrorFacts:
    """Pull message, codes and hints out of any provider's error payload."""
    if isinstance(payload, list) and len(payload) == 1:  # Gemini sometimes wraps it
        payload = payload[0]
    if not isinstance(payload, dict):
        text = payload if isinstance(payload, str) else json.dumps(payload, default=str)
        return _ErrorFacts(text.strip() or "(empty error body)", (), None, None, None)
    inner = payload.get("error", payload)
    if isinstance(inner, str):  # Ollama: {"error": "model not found"}
        return _ErrorFacts(inner, (), None, _str(payload.get("request_id")), None)
    if not isinstance(inner, dict):
        inner = payload
    message = (
        _str(inner.get("message")) or _str(inner.get("detail")) or json.dumps(payload, default=str)
    )
    codes = tuple(
        code
        for code in (
            # google.rpc.ErrorInfo: {"reason": "API_KEY_INVALID"} is more specific than the status
            *_detail_reasons(inner),
            _str(inner.get("code")),
            _str(inner.get("type")),
            _str(inner.get("status")),
        )
        if code
    )
    numeric = next(
        (
            n
            for n in (inner.get("code"), inner.get("status"), inner.get("status_code"))
            if isinstance(n, int) and 100 <= n <= 599
        ),
        None,
    )
    request_id = _str(payload.get("request_id")) or _str(inner.get("request_id"))
    return _ErrorFacts(message, codes, numeric, request_id, _gemini_retry_delay(inner))


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _detail_reasons(error: Mapping[str, object]) -> list[str | None]:
    details = error.get("details")
    return [_str(d.get("reason")) for d in (details if isinstance(details, list) else ()) if isinstance(d, dict)]


def _gemini_retry_delay(error: Mapping[str, object]) -> float | None:
    # google.rpc.RetryInfo in "details": {"retryDelay": "3s"} (a Duration in seconds).
    details = error.get("details")
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and (match := re.fullmatch(r"(\d+(?:\.\d+)?)s", delay)):
            return float(match.group(1))
    return None


def _class_for_status(status: int) -> type[ProviderError] | None:
    if status in (401, 403):
        return AuthenticationError
    if status == 429:
        return RateLimitError
    if status == 529:
        return OverloadedError
    if status in (400, 404, 409, 413, 422):
        return InvalidRequestError
    if 500 <= status <= 599:
        return ServerError
    return None


def _class_for_codes(codes: Iterable[str]) -> type[ProviderError] | None:
    # The most specific code that means something decides: OpenAI's
    # {"type": "invalid_request_error", "code": "invalid_api_key"} is an auth error.
    return next((_CLASS_BY_CODE[c.lower()] for c in codes if c.lower() in _CLASS_BY_CODE), None)


def error_from_payload(
    payload: object,
    *,
    route: str,
    status: int | None = None,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """The :class:`ProviderError` subclass an error payload stands for.

    Understands the shapes providers use, in an HTTP error body or as an event
    inside a 200 stream: OpenAI ``{"error": {"message", "type", "code"}}`` (also
    Responses' flat ``{"type": "error", "code", "message"}``), Anthropic
    ``{"type": "error", "error": {"type", "message"}}``, Gemini ``{"error":
    {"code", "message", "status"}}`` (possibly inside a one-element list), Ollama
    ``{"error": "message"}``, and plain text.

    *status*, when given, decides the class (401 → authentication, 429 → rate
    limit ...); the provider's code only refines it (a 5xx whose code says
    "overloaded" is an :class:`OverloadedError`). Without a status the code
    decides, then any status number found in the payload; otherwise the result
    is a plain :class:`ProviderError`. The message is the provider's own.

    In a translator, ``raise self.error(payload)`` calls this with the route
    filled in. Example::

        error_from_payload({"error": {"type": "overloaded_error", "message": "busy"}}, route="anthropic")
        # -> OverloadedError('busy')
        error_from_payload({"id": "c1e0", "message": "trial key limit"}, route="cohere", status=429)
        # -> RateLimitError('trial key limit'), status=429
    """
    facts = _facts(payload)
    by_code = _class_for_codes(facts.codes)
    by_status = _class_for_status(status) if status is not None else None
    if by_status is None:
        cls = (
            by_code
            or (_class_for_status(facts.numeric) if facts.numeric else None)
            or ProviderError
        )
    elif (by_status, by_code) in ((ServerError, OverloadedError), (InvalidRequestError, AuthenticationError)):
        # a 5xx that says "overloaded"; Gemini's 400 whose reason is API_KEY_INVALID
        cls = by_code or by_status
    else:
        cls = by_status
    message = facts.message
    if hint := _HINTS.get(cls):
        message = f"{message}; {hint}"
    code = facts.codes[0] if facts.codes else None
    request_id = request_id or facts.request_id
    if cls is RateLimitError:
        wait = retry_after if retry_after is not None else facts.retry_after
        return RateLimitError(
            message,
            retry_after=wait,
            route=route,
            status=status,
            provider_code=code,
            request_id=request_id,
        )
    return cls(message, route=route, status=status, provider_code=code, request_id=request_id)


def error_from_response(
    status: int, headers: httpx.Headers, body: bytes, *, route: str, reason: str = ""
) -> ProviderError:
    """The :class:`ProviderError` for a non-2xx response whose body has been read.

    The body is parsed as JSON when it is JSON (else kept as text, cut to 500
    characters) and handed to :func:`error_from_payload` with the status, the
    request id and ``Retry-After`` from *headers*. The shared transport calls it
    for every error status, so an adapter rarely needs to. Example::

        error_from_response(404, httpx.Headers({"x-request-id": "req_1"}),
                            b'{"message": "model not found"}', route="cohere")
        # -> InvalidRequestError('model not found'), status=404, request_id='req_1'
    """
    text = body.decode("utf-8", "replace")
    try:
        payload: object = json.loads(text)
    except ValueError:
        # An HTML page from a proxy or a bare string: keep it short but keep it.
        payload = text.strip()[:500] or f"HTTP {status} {reason}".strip()
    return error_from_payload(
        payload,
        route=route,
        status=status,
        request_id=_request_id(headers),
        retry_after=retry_after_from_headers(headers),
    )
