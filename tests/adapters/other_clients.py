"""Shipped adapters over other HTTP clients: a route's request and event mapping, its HTTP done with
aiohttp or requests instead of httpx.

:class:`OverAiohttp` and :class:`OverRequests` wrap a shipped :class:`HttpAdapter`:
they send its ``build_request`` with their client, read the body the way users of
that client do (``content.iter_any()``, ``iter_content(None)``), and feed the
adapter's own decoder and translator, with the transport's decisions (error
statuses, retries, draining after the terminal event) made as ``stream_events``
makes them. Replayed from a bundled cassette, they must yield its golden byte
for byte: the cassette engine serves every client the same stream.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import httpx
import requests

from dsh_replay import GenerateOptions, LlmAdapter, ProviderError, StreamChunk
from dsh_replay.adapters import HttpAdapter, StreamRequest
from dsh_replay.wire.provider_errors import error_from_response, retry_after_from_headers
from dsh_replay.wire.sequencer import BlockSequencer
from dsh_replay.wire.transport import _retryable


class _OverClient(LlmAdapter):
    """A shipped adapter's mapping, its HTTP done by another client (``_pieces``)."""

    client = "?"

    def __init__(self, inner: HttpAdapter[Any]) -> None:
        self.inner = inner
        self.route = inner.route

    def _give_up(self, error: ProviderError, headers: httpx.Headers, attempt: int) -> bool:
        if not _retryable(error):
            return True
        retry_after = retry_after_from_headers(headers)
        retry_after = retry_after if retry_after is not None else getattr(error, "retry_after", None)
        return self.inner.retry.delay(attempt, retry_after) is None  # a replay does not wait it out

    def _pieces(self, request: StreamRequest) -> AsyncIterator[bytes]:
        raise NotImplementedError

    async def _events(self, request: StreamRequest) -> AsyncIterator[Any]:
        decoder = self.inner.decoder()
        async with contextlib.aclosing(self._pieces(request)) as pieces:
            async for piece in pieces:
                for event in decoder.feed(piece):
                    yield event
        for event in decoder.flush():
            yield event

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        translator = self.inner.translator(BlockSequencer(drop_reasoning=self.inner.drop_reasoning))
        try:
            async with contextlib.aclosing(self._events(self.inner.build_request(options))) as events:
                async for event in events:
                    for chunk in translator.event(event):
                        yield chunk
                    if translator.finished:
                        with contextlib.suppress(ProviderError):
                            async for _ in events:  # the rest of the body, as HttpAdapter drains it
                                pass
                        return
                for chunk in translator.end():
                    yield chunk
        except ProviderError as exc:
            if exc.route is None:
                exc.route = self.route
            raise


class OverAiohttp(_OverClient):
    client = "aiohttp"

    async def _pieces(self, request: StreamRequest) -> AsyncIterator[bytes]:
        async with aiohttp.ClientSession() as session:
            for attempt in itertools.count():
                async with session.request(
                    request.method, request.url, headers=dict(request.headers), json=request.json
                ) as response:
                    if 200 <= response.status < 300:
                        async for piece in response.content.iter_any():
                            yield piece
                        return
                    headers = httpx.Headers(list(response.headers.items()))
                    error = error_from_response(response.status, headers, await response.read(),
                                                route=self.route, reason=response.reason or "")
                if self._give_up(error, headers, attempt):
                    raise error


class OverRequests(_OverClient):
    client = "requests"

    async def _pieces(self, request: StreamRequest) -> AsyncIterator[bytes]:
        # requests is synchronous: each piece is read in the event loop's thread, as a sync SDK would
        with requests.Session() as session:
            for attempt in itertools.count():
                response = session.request(request.method, request.url, headers=dict(request.headers),
                                           json=request.json, stream=True)
                with response:
                    if 200 <= response.status_code < 300:
                        for piece in _pieces(response):
                            yield piece
                        return
                    headers = httpx.Headers(list(response.headers.items()))
                    error = error_from_response(response.status_code, headers, response.content,
                                                route=self.route, reason=response.reason or "")
                if self._give_up(error, headers, attempt):
                    raise error


def _pieces(response: requests.Response) -> Iterator[bytes]:
    yield from response.iter_content(chunk_size=None)


OVER = {"aiohttp": OverAiohttp, "requests": OverRequests}
