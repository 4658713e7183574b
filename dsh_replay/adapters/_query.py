"""Default query parameters of an adapter (``HttpAdapter(default_query=...)``): checked, then put in each URL.

Some endpoints need a query parameter that no request mapping sets: Azure
OpenAI's ``api-version``, the ``beta=true`` of the Anthropic SDK's beta client.
``default_query`` adds them to every request the adapter sends. A parameter
the mapping sets itself (Gemini's ``alt=sse``) is refused, not overridden:
either winner would silently change what the mapping means. A credential is
refused too: it belongs in a header (the transport refuses a URL carrying one,
and a recording would only keep it as REDACTED).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ConfigError
from ..protocol.fields import shown
from ..protocol.options import GenerateOptions, Message
from ..wire.credentials import is_credential_parameter
from ..wire.transport import StreamRequest

__all__ = ["checked_query", "refuse_clash", "with_default_query"]

#: options any request mapping can build a request from: what the query of its URL is asked of
_PROBE = GenerateOptions(model="m", messages=[Message(role="user", content="x")])


def checked_query(owner: str, value: object) -> dict[str, str]:
    """``default_query`` as a dict of str to str; anything else, or a credential, is a ConfigError naming it."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{owner}: default_query must be a mapping of str to str, got {type(value).__name__}")
    for name, item in value.items():
        if not isinstance(name, str) or not name or not isinstance(item, str):
            raise ConfigError(f"{owner}: default_query must map parameter names to str values; got "
                              f"{shown(name)}: {shown(item)}")
        if is_credential_parameter(name):
            # the value may be a key: name the parameter, never show it
            raise ConfigError(f"{owner}: default_query[{name!r}] would send a credential in the URL, where "
                              "proxies and access logs keep it; pass it in a header (headers=...) instead")
    return dict(value)


def refuse_clash(owner: str, build_request: Callable[[GenerateOptions], StreamRequest],
                 query: Mapping[str, str]) -> None:
    """A parameter of ``query`` the request mapping sets itself is a ConfigError now, not at the first request.

    The mapping is asked for one request; one that cannot build it yet (a subclass
    whose mapping reads what its own constructor sets after ``HttpAdapter``'s) is
    checked at its first request instead, by :func:`with_default_query`.
    """
    try:
        url = build_request(_PROBE).url
    except AttributeError:
        return
    _merged(owner, url, query)


def with_default_query(owner: str, request: StreamRequest, query: Mapping[str, str]) -> StreamRequest:
    """``request`` with ``query`` after the parameters of its URL (a clash is a ConfigError naming both)."""
    return dataclasses.replace(request, url=_merged(owner, request.url, query)) if query else request


def _merged(owner: str, url: str, query: Mapping[str, str]) -> str:
    parts = urlsplit(url)
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in query:
            raise ConfigError(f"{owner}: default_query sets {name}={query[name]}, but the adapter's request "
                              f"mapping sends {name}={value} itself; leave {name!r} out of default_query")
    added = urlencode(list(query.items()))
    return urlunsplit(parts._replace(query=f"{parts.query}&{added}" if parts.query else added))
