"""What the provider emulator serves and what it saw: scripted responses, cut
into fragments, and the requests and exchanges it recorded.

Values only (no sockets): :mod:`dsh_replay.testing` serves them over HTTP and
re-exports every public name here.
"""

from __future__ import annotations

import itertools
import json as _json
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

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


def split_by_sizes(body: bytes, sizes: int | Sequence[int]) -> list[bytes]:
    """Cut *body* into pieces of the given sizes; a sequence is cycled, an int repeated."""
    cycle = [sizes] if isinstance(sizes, int) else list(sizes)
    if not cycle or any(size <= 0 for size in cycle):
        raise ValueError(f"fragment sizes must be positive, got {sizes!r}")
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
    if max_size <= 0:
        raise ValueError(f"max_size must be positive, got {max_size}")
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
    """

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    fragments: Sequence[bytes] = ()
    delay: float = 0.0
    delays: Sequence[float] = ()
    end: End = "close"
    chunked: bool = True

    def __post_init__(self) -> None:
        if self.end not in ("close", "truncate", "reset", "stall"):
            raise ValueError(
                f"end must be 'close', 'truncate', 'reset' or 'stall', got {self.end!r}"
            )
        if not 100 <= self.status <= 999:
            raise ValueError(f"status must be a 3-digit HTTP status, got {self.status}")
        if self.delay < 0 or any(d < 0 for d in self.delays):
            raise ValueError("delays must not be negative")
        # Tuples, so that a script cannot be changed behind the server's back.
        object.__setattr__(self, "fragments", tuple(self.fragments))
        object.__setattr__(self, "delays", tuple(self.delays))
        object.__setattr__(self, "headers", dict(self.headers))

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
        fragments = (
            _split_events(body) if fragment_sizes is None else split_by_sizes(body, fragment_sizes)
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
