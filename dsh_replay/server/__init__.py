"""Serving and proxying over HTTP, for clients in any language: replay from cassettes, record through to a provider.

- :mod:`.replay` — which recorded interaction answers a request, and how it is
  played (sans-I/O: :class:`CassetteServer`);
- :mod:`.wire` — one response on the wire (h11 frames it): head, pieces, and an
  ending that is a final chunk, a cut, a reset or a stall;
- :mod:`.http` — connections, requests, limits (idle timeout, connection cap),
  and the :class:`Responder` each request is handed to;
- :mod:`.record` — the recording proxy (``dsh-replay serve --record``): the
  request goes to the real provider, its answer streams through to the client
  and into a cassette, with the cassette engine's recorder, scrubber, matcher
  and atomic writer (:class:`~dsh_replay.cassette.session.CassetteSession`);
  :mod:`.upstream` says where a request goes, :mod:`.naming` which file it
  is recorded in, :mod:`.metadata` what the file's ``dsh_replay:`` key holds.

This room sits above the cassette engine and below the conformance suite
(which serves its cases through it to adapters in other languages) and the
command line.
"""

from __future__ import annotations

from .http import HttpServer, ReplayResponder, Request, Responder
from .replay import SELECT_HEADER, SELECT_PREFIX, CassetteServer, NoMatch, Playback
from .wire import Reply

__all__ = [
    "SELECT_HEADER",
    "SELECT_PREFIX",
    "CassetteServer",
    "HttpServer",
    "NoMatch",
    "Playback",
    "ReplayResponder",
    "Reply",
    "Request",
    "Responder",
]
