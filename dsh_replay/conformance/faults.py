"""The fault matrix's material: the providers' own HTTP error bodies, the class
each status must raise, and where a body is cut.

The error bodies are the shapes the providers document and send (OpenAI's
``{"error": {"message", "type", "param", "code"}}``, Anthropic's
``{"type": "error", "error": {"type", "message"}}``, Google's RPC status,
Ollama's bare string). A route without a table here uses the error response
its own cassettes recorded, with the status swapped.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from ..errors import (
    AuthenticationError,
    InvalidRequestError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
)

__all__ = ["EXPECTED_BY_STATUS", "STATUSES", "error_body", "event_starts", "family_of", "last_needed_event"]

STATUSES = (400, 401, 403, 404, 429, 500, 503, 529)

#: status -> the error classes an adapter may raise for it (the first is the usual one)
EXPECTED_BY_STATUS: Mapping[int, tuple[type[ProviderError], ...]] = {
    400: (InvalidRequestError,),
    401: (AuthenticationError,),
    403: (AuthenticationError,),
    404: (InvalidRequestError,),
    429: (RateLimitError,),
    500: (ServerError,),
    503: (ServerError, OverloadedError),
    529: (OverloadedError,),
}

_FAMILIES = {
    "openai": "openai", "openai-compatible": "openai", "deepseek": "openai", "openai-responses": "openai",
    "anthropic": "anthropic", "gemini": "google", "ollama": "ollama",
}

_OPENAI: Mapping[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid value for 'temperature': must be between 0 and 2."),
    401: ("invalid_request_error", "invalid_api_key",
          "Incorrect API key provided: sk-test-****************0000. You can find your API key at "
          "https://platform.openai.com/account/api-keys."),
    403: ("request_forbidden", "unsupported_country_region_territory",
          "Country, region, or territory not supported"),
    404: ("invalid_request_error", "model_not_found",
          "The model `gpt-unknown` does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded",
          "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    503: ("server_error", None, "The engine is currently overloaded, please try again later"),
    529: ("server_error", None, "The engine is currently overloaded, please try again later"),
}
_ANTHROPIC = {
    400: ("invalid_request_error", "max_tokens: Field required"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "model: claude-unknown"),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "Internal server error"),
    503: ("api_error", "Service unavailable"),
    529: ("overloaded_error", "Overloaded"),
}
_GOOGLE = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "Method doesn't allow unregistered callers."),
    404: ("NOT_FOUND", "models/gemini-unknown is not found for API version v1beta."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: ("INTERNAL", "An internal error has occurred."),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    529: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
}
_OLLAMA = {
    400: "invalid options: temperature",
    401: "unauthorized",
    403: "forbidden",
    404: 'model "llama-unknown" not found, try pulling it first',
    429: "too many concurrent requests",
    500: "an error was encountered while running the model",
    503: "server busy, please try again. maximum pending requests exceeded",
    529: "server overloaded",
}


def family_of(route: str) -> str | None:
    """The error-body family of a shipped route, or None for a route of the user's own."""
    return _FAMILIES.get(route)


def error_body(family: str, status: int) -> bytes:
    """The provider family's JSON error body for ``status``."""
    if family == "openai":
        kind, code, message = _OPENAI[status]
        return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})
    if family == "anthropic":
        kind, message = _ANTHROPIC[status]
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message},
                             "request_id": "req_011CConformance000000000"})
    if family == "google":
        rpc, message = _GOOGLE[status]
        return orjson.dumps({"error": {"code": status, "message": message, "status": rpc}})
    return orjson.dumps({"error": _OLLAMA[status]})


def event_starts(body: bytes, ndjson: bool) -> list[int]:
    """The offset where each event (an SSE event, or an NDJSON line) of ``body`` begins."""
    separators = (b"\n",) if ndjson else (b"\r\n\r\n", b"\n\n", b"\r\r")
    starts, at = [0], 0
    while True:
        found = [(body.find(s, at), s) for s in separators]
        hits = [(position, s) for position, s in found if position >= 0]
        if not hits:
            break
        position, separator = min(hits)
        at = position + len(separator)
        if at < len(body):
            starts.append(at)
    return starts


def last_needed_event(body: bytes, ndjson: bool) -> int:
    """Where the last event the turn needs begins: cutting there loses the end of the turn.

    A trailing ``data: [DONE]`` adds nothing a client needs once the finish and
    the usage have arrived (some servers never send it), so the event before it
    is the last needed one.
    """
    starts = event_starts(body.rstrip(b"\r\n") + b"\n\n" if not ndjson else body, ndjson)
    last = starts[-1]
    if not ndjson and body[last:].strip() == b"data: [DONE]" and len(starts) > 1:
        last = starts[-2]
    return last
