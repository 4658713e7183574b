"""Where the recording proxy sends a request, and what goes with it.

The upstreams are given on the command line: ``--upstream URL`` for one
provider, or one per route, ``--upstream openai=https://api.openai.com``. A
request picks a route with the header ``x-dsh-replay-route: ROUTE`` or with
the first part of its cassette name (``/_dsh/openai/text/-/...``); a shipped
route nobody gave an upstream for goes to its provider's public address
(:data:`PUBLIC_UPSTREAMS`). The request's own path follows the upstream's
(``https://api.openai.com`` + ``/v1/chat/completions``), as it followed the
client's base URL. The host the client named never counts: the proxy sends
nowhere but to an upstream it was given or a shipped route's provider, so it
is no open proxy.

An upstream must be ``https://``: the client's credential goes along.
``allow_insecure`` (``--allow-insecure-upstream``) lets ``http://`` through,
for a loopback emulator in tests or a local Ollama.

Forwarded headers are the client's, less the hop-by-hop ones, ``host`` and
``content-length`` (set for the upstream), and ours. ``accept-encoding`` is
replaced by ``identity``: an uncompressed body is what the secret scan can
read and what the cassette keeps readable, and every client takes one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..errors import ConfigError
from .replay import SELECT_HEADER

__all__ = ["PUBLIC_UPSTREAMS", "ROUTE_HEADER", "Upstreams", "forwarded_headers", "upstream_url"]

#: the request header that picks the route (and so the upstream) of a request
ROUTE_HEADER = "x-dsh-replay-route"

#: each shipped route's provider, as an origin: the client's path (``/v1/...``) follows it
PUBLIC_UPSTREAMS: Mapping[str, str] = {
    "openai": "https://api.openai.com",
    "openai-responses": "https://api.openai.com",
    "deepseek": "https://api.deepseek.com",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "ollama": "http://localhost:11434",
}

_NOT_FORWARDED = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", SELECT_HEADER, ROUTE_HEADER,
})


def _checked(url: str, where: str, *, insecure: bool) -> str:
    """``url`` as an upstream, without a trailing slash; a :class:`ConfigError` saying what is wrong."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as exc:
        raise ConfigError(f"{where}: {url!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: {url!r} is not an http(s) URL such as https://api.openai.com")
    if "@" in parts.netloc:
        raise ConfigError(f"{where}: {parts.scheme}://…@{parts.hostname}: a credential in the URL would be sent "
                          "with every request; the client sends its own")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: {url!r} has a query or fragment; give the base URL only")
    if parts.scheme == "http" and not insecure:
        raise ConfigError(f"{where}: {url} is not https://, and the client's credential would cross the network "
                          "in clear; use https://, or add --allow-insecure-upstream for a loopback emulator "
                          "or a local server")
    return url.rstrip("/")


@dataclass(frozen=True, slots=True)
class Upstreams:
    """The upstream of each route, and the one for every request (``default``), if given."""

    default: str | None = None
    by_route: Mapping[str, str] = field(default_factory=dict)
    insecure: bool = False

    @classmethod
    def parse(cls, values: Sequence[str], *, insecure: bool = False) -> Upstreams:
        """``--upstream`` values: ``URL`` or ``ROUTE=URL`` each."""
        default: str | None = None
        by_route: dict[str, str] = {}
        for value in values:
            route, equals, url = value.partition("=")
            if equals and "://" not in route:
                route = route.strip()
                if not route or route in by_route:
                    raise ConfigError(f"--upstream {value}: " + ("a route before '='" if not route else
                                      f"route {route!r} has two upstreams"))
                by_route[route] = _checked(url.strip(), f"--upstream {route}", insecure=insecure)
            elif default is not None:
                raise ConfigError(f"--upstream {value}: a second upstream for every request; give each its route, "
                                  "--upstream ROUTE=URL")
            else:
                default = _checked(value.strip(), "--upstream", insecure=insecure)
        return cls(default, by_route, insecure)

    def routes(self) -> list[str]:
        """The routes a request may pick."""
        return sorted({*self.by_route, *PUBLIC_UPSTREAMS})

    def pick(self, name: str, headers: Sequence[tuple[str, str]]) -> tuple[str | None, str]:
        """(the route, the upstream) of a request recorded as ``name``; a :class:`ConfigError` says why none."""
        asked = next((value.strip() for key, value in headers if key.lower() == ROUTE_HEADER), None)
        first = name.split("/", 1)[0]
        route = asked or (first if first in self.by_route or first in PUBLIC_UPSTREAMS else None)
        if route is not None and route in self.by_route:
            return route, self.by_route[route]
        if asked is not None and asked not in PUBLIC_UPSTREAMS and self.default is None:
            raise ConfigError(f"{ROUTE_HEADER}: {asked!r} has no upstream; routes: {', '.join(self.routes())}")
        if self.default is not None:
            return route, self.default
        if route is not None:
            return route, _checked(PUBLIC_UPSTREAMS[route], f"the {route} provider", insecure=self.insecure)
        if len(self.by_route) == 1:
            return next(iter(self.by_route.items()))
        raise ConfigError(
            f"cassette {name!r} names no route, so it is not known which provider to send it to: start its name "
            f"with one (/_dsh/openai/{name}/-/...), send the header {ROUTE_HEADER}: ROUTE, or start the server "
            f"with --upstream URL; routes: {', '.join(self.routes())}"
        )


def upstream_url(upstream: str, path: str, query: str) -> str:
    """The URL the request goes to: the upstream, then the request's path and query."""
    return upstream + (path if path.startswith("/") else f"/{path}") + (f"?{query}" if query else "")


def forwarded_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers as they go upstream (see the module docstring)."""
    kept = [(name, value) for name, value in headers if name.lower() not in _NOT_FORWARDED]
    return [*kept, ("accept-encoding", "identity")]
