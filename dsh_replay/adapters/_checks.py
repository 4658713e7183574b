"""Constructor checks of :class:`~dsh_replay.adapters.HttpAdapter`.

Bad arguments fail here, as ConfigError naming the argument, rather than later
inside httpx as an AttributeError or a "stream interrupted" that hides the cause.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping

import httpx

from ..errors import ConfigError
from ..protocol.fields import is_header_name, shown
from ..wire.transport import RetryPolicy, check_seconds

__all__ = ["check_api_key", "check_base_url", "check_options", "checked_headers"]


# What may stand in an HTTP header value as httpx sends it (ASCII, no CR/LF: a line
# break would start a forged header).
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]*")
# Every provider's keys are printable ASCII without spaces (sk-..., AIza...).
_API_KEY = re.compile(r"[\x21-\x7e]+")


def check_api_key(owner: str, api_key: object, *, required: bool) -> None:
    # None or "" is "no key" (allowed for local servers); never echo a key in a message.
    if api_key is None or api_key == "":
        if required:
            raise ConfigError(f"{owner} needs an api_key")
        return
    if not isinstance(api_key, str):
        raise ConfigError(f"{owner}: api_key must be a str, got {type(api_key).__name__}")
    if not _API_KEY.fullmatch(api_key):
        raise ConfigError(
            f"{owner}: api_key must be printable ASCII with no spaces or line breaks "
            "(the key is not shown here); check for a stray newline or quote"
        )


def check_base_url(owner: str, base: object) -> None:
    url = None
    # httpx percent-encodes a space rather than refusing it; a newline from an env file
    # would end up inside every request path.
    if isinstance(base, str) and not any(char.isspace() for char in base):
        with contextlib.suppress(httpx.InvalidURL):
            url = httpx.URL(base)
    if url is None or url.scheme not in ("http", "https") or not url.host:
        # a user:password in a mistyped URL is still a credential: mask it
        masked = re.sub(r"//[^/@]*@", "//***@", base) if isinstance(base, str) else base
        raise ConfigError(
            f"{owner}: base_url must be an http(s) URL with a host, "
            f"e.g. 'https://api.example.com/v1', got {shown(masked)}"
        )


def check_options(
    owner: str, client: object, drop_reasoning: object, retry: object, read_timeout: object
) -> None:
    if client is not None and not isinstance(client, httpx.AsyncClient):
        kind = type(client).__name__
        raise ConfigError(f"{owner}: client must be an httpx.AsyncClient or None, got {kind}")
    if not isinstance(drop_reasoning, bool):
        raise ConfigError(f"{owner}: drop_reasoning must be True or False, got {shown(drop_reasoning)}")
    if not isinstance(retry, RetryPolicy):
        raise ConfigError(
            f"{owner}: retry must be a RetryPolicy, got {shown(retry)}; leave it out "
            "for the default or pass RetryPolicy(max_retries=0) for none"
        )
    check_seconds(owner, "read_timeout", read_timeout, allow_zero=False)


def checked_headers(owner: str, headers: object) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        kind = type(headers).__name__
        raise ConfigError(f"{owner}: headers must be a mapping of str to str, got {kind}")
    for name, value in headers.items():
        if not is_header_name(name):
            raise ConfigError(f"{owner}: headers has a name that is not a valid header name: {shown(name)}")
        # The value may be a credential (a proxy's key): name the header, never show the value.
        if not isinstance(value, str) or not _HEADER_VALUE.fullmatch(value):
            raise ConfigError(
                f"{owner}: headers[{name!r}] must be a str of printable ASCII with no line breaks"
            )
    return dict(headers)
