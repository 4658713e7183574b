"""What the provider emulator serves and what it saw: scripted responses, cut
into fragments, and the requests and exchanges it recorded.

Values only (no sockets): :mod:`dsh_replay.testing` serves them over HTTP and
re-exports every name in ``__all__``. The values check their arguments when
built, and the ``check_*`` helpers check the emulator's own, so that a bad script
fails where it is written rather than in the server thread.
"""

from __future__ import annotations

import itertools
import json as _json
import random
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeGuard, get_args

from ..protocol.fields import is_header_name, is_number, shown

__all__ = [
    "End",
    "Exchange",
    "RecordedRequest",
    "ScriptedResponse",
    "random_fragments",
    "split_by_sizes",
]

#: What happens after the last fragment (see :mod:`dsh_replay.testing`).
End = Literal["close", "truncate", "reset", "stall"]


# -- argument checks ----------------------------------------------------------
# A bad script must fail where it is written, naming the argument: once the server
# thread plays it, the client sees only a dropped connection or a truncated body.
# A wrong type raises TypeError, a wrong value ValueError.

#: The methods the emulator answers; ``ProviderEmulator.add`` refuses others.
METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")
_ENDS: tuple[str, ...] = get_args(End)
_BYTES_LIKE = (bytes, bytearray, memoryview)


def _got(value: object) -> str:
    return f"{shown(value)} ({type(value).__name__})"


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_int(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """*value* if it is an int (not a bool) from *low* to *high*; else a ``TypeError``/``ValueError``."""
    if high is not None:
        wanted = f"an int from {low} to {high}"
    else:
        wanted = "an int" if low is None else "a positive int" if low == 1 else f"an int >= {low}"
    if not _is_int(value):
        raise TypeError(f"{name} must be {wanted}, got {_got(value)}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be {wanted}, got {value!r}")
    return value


def check_seconds(name: str, value: object) -> float:
    """*value* as a float if it is a finite number of seconds >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {_got(value)}")
    if not is_number(value, 0, sys.float_info.max):  # also refuses NaN and infinities
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def check_bytes(name: str, value: object) -> bytes:
    """*value* as ``bytes`` if it is bytes-like."""
    if not isinstance(value, _BYTES_LIKE):
        hint = "; encode the text first" if isinstance(value, str) else ""
        raise TypeError(f"{name} must be bytes, got {_got(value)}{hint}")
    return bytes(value)


def _items(name: str, value: object, of: str) -> tuple[object, ...]:
    # A str or bytes is a sequence too, of the wrong things: refuse it whole.
    if isinstance(value, (str, *_BYTES_LIKE)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a sequence of {of}, got {_got(value)}")
    return tuple(value)


def _size_cycle(name: str, sizes: object) -> list[int]:
    if _is_int(sizes):
        return [check_int(name, sizes, 1)]
    items = _items(name, sizes, "positive ints")
    cycle = [check_int(f"{name}[{i}]", size, 1) for i, size in enumerate(items)]
    if not cycle:
        raise ValueError(
            f"{name} must be a positive int or a non-empty sequence of them, got {sizes!r}"
        )
    return cycle


def _fragments(value: object) -> tuple[bytes, ...]:
    items = _items("fragments", value, "bytes")
    return tuple(check_bytes(f"fragments[{i}]", item) for i, item in enumerate(items))


def _delays(value: object) -> tuple[float, ...]:
    items = _items("delays", value, "numbers of seconds")
    return tuple(check_seconds(f"delays[{i}]", item) for i, item in enumerate(items))


def _headers(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise TypeError(f"headers must be a mapping of str to str, got {_got(value)}")
    for name, text in value.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise TypeError(f"headers must map str to str, got {name!r}: {_got(text)}")
        if not is_header_name(name):
            raise ValueError(
                f"header names must be HTTP tokens (no ':', space, CR or LF), got {name!r}"
            )
        if "\r" in text or "\n" in text:
            raise ValueError(f"headers[{name!r}] must not contain CR or LF, got {text!r}")
    return dict(value)


def check_route(method: object, path: object) -> tuple[str, str]:
    """The ``(METHOD, path)`` key of a script for ``ProviderEmulator.add``."""
    if not isinstance(method, str) or method.upper() not in METHODS:
        error = ValueError if isinstance(method, str) else TypeError
        raise error(f"method must be one of {', '.join(METHODS)}, got {_got(method)}")
    route_path = check_path(path)
    if not route_path.startswith("/"):
        raise ValueError(f"path must start with '/', got {route_path!r}")
    if "?" in route_path:
        raise ValueError(f"routes match the path only; drop the query from {route_path!r}")
    return method.upper(), route_path


def check_path(path: object) -> str:
    """*path* if it is a str."""
    if not isinstance(path, str):
        raise TypeError(f"path must be a str such as '/v1/chat/completions', got {_got(path)}")
    return path


def check_responses(responses: tuple[object, ...]) -> None:
    """The responses given to ``ProviderEmulator.add``: at least one, each a ScriptedResponse."""
    if not responses:
        raise ValueError("add() needs at least one ScriptedResponse")
    for index, response in enumerate(responses):
        if not isinstance(response, ScriptedResponse):
            unpack = isinstance(response, (list, tuple))
            hint = "; unpack a list: add(method, path, *responses)" if unpack else ""
            raise TypeError(
                f"responses[{index}] must be a ScriptedResponse, got {_got(response)}{hint}"
            )


def split_by_sizes(body: bytes, sizes: int | Sequence[int]) -> list[bytes]:
    """Cut *body* into pieces of the given sizes; a sequence is cycled, an int repeated."""
    body = check_bytes("body", body)
    cycle = _size_cycle("sizes", sizes)
    pieces: list[bytes] = []
    position = 0
    while position < len(body):
        size = cycle[len(pieces) % len(cycle)]
        pieces.append(body[position : position + size])
        position += size
    return pieces


def random_fragments(body: bytes, *, seed: int, max_size: int = 32) -> list[bytes]:
    """Cut *body* at seeded random places, deliberately inside the awkward spots.

    Decoders break where a piece ends between ``\\r`` and ``\\n`` (or between the
    two line ends of an event boundary) or in the middle of a multi-byte UTF-8
    character. About half of those spots are cut, and at least one of each kind
    when the body has any; random cuts keep every piece at most *max_size* bytes.
    The same seed always gives the same pieces.
    """
    body = check_bytes("body", body)
    check_int("seed", seed)
    check_int("max_size", max_size, 1)
    rng = random.Random(seed)
    line_ends = [i for i in range(1, len(body)) if body[i - 1] in b"\r\n" and body[i] in b"\r\n"]
    inside_chars = [i for i in range(1, len(body)) if body[i] & 0xC0 == 0x80]
    cuts = {i for i in line_ends + inside_chars if rng.random() < 0.5}
    for spots in (line_ends, inside_chars):
        if spots and cuts.isdisjoint(spots):
            cuts.add(rng.choice(spots))
    position = rng.randint(1, max_size)
    while position < len(body):
        cuts.add(position)
        position += rng.randint(1, max_size)
    bounds = [0, *sorted(cuts), len(body)]
    return [body[start:stop] for start, stop in itertools.pairwise(bounds) if stop > start]


def _split_events(body: bytes) -> list[bytes]:
    """One piece per SSE event (blank-line terminated) or, failing that, per line."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n" if b"\n\n" in body else b"\n"
    pieces = [piece + separator for piece in body.split(separator)]
    pieces[-1] = pieces[-1][: -len(separator)]
    return [piece for piece in pieces if piece]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedResponse:
    """One scripted answer.

    ``fragments`` are written one ``send`` each. ``delay`` is the pause before
    every fragment but the first; ``delays``, when given, sets the pause before
    each fragment individually (index *i* = before fragment *i*) and overrides
    ``delay``. With ``chunked`` (the default) the body uses HTTP chunked
    encoding, one chunk per fragment; otherwise a ``Content-Length`` of the
    whole body is sent. ``end`` says what happens after the last fragment.
    ``status`` is an int from 100 to 599, delays finite and >= 0, and header
    names and values free of CR and LF; anything else is refused when built.
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    fragments: Sequence[bytes] = ()
    delay: float = 0.0
    delays: Sequence[float] = ()
    end: End = "close"
    chunked: bool = True

    def __post_init__(self) -> None:
        if self.end not in _ENDS:
            raise ValueError(f"end must be one of {', '.join(map(repr, _ENDS))}, got {self.end!r}")
        if not isinstance(self.chunked, bool):
            raise TypeError(f"chunked must be True or False, got {_got(self.chunked)}")
        check_int("status", self.status, 100, 599)
        check_seconds("delay", self.delay)
        # Tuples, so that a script cannot be changed behind the server's back.
        object.__setattr__(self, "fragments", _fragments(self.fragments))
        object.__setattr__(self, "delays", _delays(self.delays))
        object.__setattr__(self, "headers", _headers(self.headers))

    def pause_before(self, index: int) -> float:
        """Seconds to wait before writing fragment *index*."""
        if index < len(self.delays):
            return self.delays[index]
        return self.delay if index > 0 else 0.0

    @classmethod
    def streaming(
        cls,
        body: bytes,
        *,
        fragment_sizes: int | Sequence[int] | None = None,
        delay: float = 0.0,
        status: int = 200,
        content_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
        end: End = "close",
    ) -> ScriptedResponse:
        """A streamed body cut into fragments.

        By default each SSE event (or NDJSON line) is one fragment, as providers
        flush them; ``fragment_sizes`` cuts by byte counts instead (cycled).
        """
        body = check_bytes("body", body)
        fragments = (
            _split_events(body)
            if fragment_sizes is None
            else split_by_sizes(body, _size_cycle("fragment_sizes", fragment_sizes))
        )
        return cls(
            status=status,
            headers={"content-type": content_type, **(headers or {})},
            fragments=fragments,
            delay=delay,
            end=end,
        )

    @classmethod
    def fragmented(
        cls,
        body: bytes,
        *,
        seed: int,
        max_size: int = 32,
        delay: float = 0.0,
        content_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
        end: End = "close",
    ) -> ScriptedResponse:
        """A streamed body cut by :func:`random_fragments` (hostile, reproducible)."""
        return cls(
            headers={"content-type": content_type, **(headers or {})},
            fragments=random_fragments(body, seed=seed, max_size=max_size),
            delay=delay,
            end=end,
        )

    @classmethod
    def json(
        cls, payload: object, *, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> ScriptedResponse:
        """A whole JSON body with a ``Content-Length``, as providers send errors."""
        return cls(
            status=status,
            headers={"content-type": "application/json", **(headers or {})},
            fragments=[_json.dumps(payload).encode()],
            chunked=False,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """A request as the emulator received it. Header names are lower-case."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        """The body parsed as JSON."""
        return _json.loads(self.body)


class Exchange:
    """One request and the emulator's progress in answering it.

    The events are set by the server thread and can be waited on from any
    thread: ``all_sent`` once every fragment is written (and, for ``"close"``,
    the body is finished); ``client_closed`` when the client hung up before the
    response was over; ``done`` when the server is finished with the connection.
    """

    def __init__(
        self, request: RecordedRequest, response: ScriptedResponse, scripted: bool
    ) -> None:
        self.request = request
        self.response = response
        self.scripted = scripted
        self.fragments_sent = 0
        self.all_sent = threading.Event()
        self.client_closed = threading.Event()
        self.done = threading.Event()

    def wait_client_closed(self, timeout: float = 5.0) -> bool:
        """Wait until the client closed the connection early; ``False`` on timeout."""
        return self.client_closed.wait(timeout)

    def wait_done(self, timeout: float = 5.0) -> bool:
        """Wait until the server is finished with this exchange; ``False`` on timeout."""
        return self.done.wait(timeout)

    def __repr__(self) -> str:
        r = self.request
        return f"<Exchange {r.method} {r.path} status={self.response.status} sent={self.fragments_sent}>"
