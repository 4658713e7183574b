"""The one exception tree of dsh-replay.

::

    DshReplayError
    ├── ProtocolViolation        a chunk sequence broke rules P1-P12 (carries .violations)
    ├── ConfigError              bad route, plugin config, option or marker argument
    ├── CassetteError            missing/corrupt cassette or golden, unmatched request,
    │                            secret found before writing (carries .path)
    └── ProviderError            the provider said no, or the stream broke
        ├── AuthenticationError      401/403, or an auth error event
        ├── RateLimitError           429 (carries .retry_after in seconds)
        ├── OverloadedError          529 or an "overloaded" error
        ├── InvalidRequestError      400/404/422
        ├── ServerError              500/502/503 and other 5xx
        ├── StreamInterruptedError   connection dropped, or body ended without the
        │                            provider's terminal event
        ├── StreamTimeoutError       no bytes for longer than the read timeout
        └── MalformedStreamError     an event that is not valid UTF-8/JSON/shape
                                     (carries .raw, the offending bytes, truncated)

Every error carries structured attributes so that callers never parse messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "AuthenticationError",
    "CassetteError",
    "ConfigError",
    "DshReplayError",
    "InvalidRequestError",
    "MalformedStreamError",
    "OverloadedError",
    "ProtocolViolation",
    "ProviderError",
    "RateLimitError",
    "ServerError",
    "StreamInterruptedError",
    "StreamTimeoutError",
]


class DshReplayError(Exception):
    """Base class of every error raised by dsh-replay."""


class RuleBreach(Protocol):
    """What an error needs of a rule violation (``dsh_replay.Violation`` is one).

    Structural, so that the exception tree stays at the bottom of the package
    and never imports the validator that produces violations.
    """

    @property
    def rule(self) -> str: ...

    @property
    def position(self) -> int: ...

    @property
    def message(self) -> str: ...


class ProtocolViolation(DshReplayError):
    """A chunk sequence broke one or more StreamChunk rules.

    ``violations`` lists every violation found, each with its rule id, the
    0-based position of the offending chunk and a one-line message.
    """

    def __init__(self, violations: Sequence[RuleBreach], *, source: str | None = None) -> None:
        self.violations: list[RuleBreach] = list(violations)
        self.source = source
        where = f" in {source}" if source else ""
        lines = [f"{len(self.violations)} protocol violation(s){where}:"]
        lines += [f"  {v}" for v in self.violations]
        super().__init__("\n".join(lines))


class ConfigError(DshReplayError):
    """Configuration is wrong: unknown route, bad plugin config, bad option value."""


class CassetteError(DshReplayError):
    """A cassette or golden file cannot be used as asked.

    ``path`` names the file concerned, when there is one.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class ProviderError(DshReplayError):
    """The provider refused the request, or its stream could not be read to the end."""

    def __init__(
        self,
        message: str,
        *,
        route: str | None = None,
        status: int | None = None,
        provider_code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        self.route = route
        self.status = status
        self.provider_code = provider_code
        self.request_id = request_id
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        facts = [
            f"{name}={value}"
            for name, value in (
                ("route", self.route),
                ("status", self.status),
                ("code", self.provider_code),
                ("request_id", self.request_id),
            )
            if value is not None
        ]
        return f"{self.message} ({', '.join(facts)})" if facts else self.message


class AuthenticationError(ProviderError):
    """The credentials were missing, wrong or not allowed (401/403)."""


class RateLimitError(ProviderError):
    """Too many requests (429). ``retry_after`` is the provider's advice in seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: object) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kwargs)  # type: ignore[arg-type]


class OverloadedError(ProviderError):
    """The provider is overloaded (529, or an ``overloaded`` error code)."""


class InvalidRequestError(ProviderError):
    """The provider rejected the request itself (400/404/422)."""


class ServerError(ProviderError):
    """The provider failed (5xx)."""


class StreamInterruptedError(ProviderError):
    """The stream stopped before the provider's terminal event."""


class StreamTimeoutError(ProviderError):
    """No bytes arrived within the read timeout while streaming."""


class MalformedStreamError(ProviderError):
    """An event could not be decoded. ``raw`` holds the offending bytes (truncated)."""

    def __init__(self, message: str, *, raw: bytes = b"", **kwargs: object) -> None:
        self.raw = raw[:200]
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
