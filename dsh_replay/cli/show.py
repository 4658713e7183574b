"""``dsh-replay show``: the timeline of a cassette (fragments with timing, decoded events, resulting chunks)."""

from __future__ import annotations

import argparse
import asyncio
import types
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import orjson

from ..adapters.route_table import RouteTable
from ..cassette.intercept import install, replay_response, uninstall
from ..cassette.pacing import Fragmentation
from ..cassette.replay import Outcome, case_options
from ..cassette.store import Cassette, Interaction
from ..errors import CassetteError, DshReplayError
from ..protocol.jsonl import chunk_to_json
from .common import add_plugins, route_table

__all__ = ["run_show"]


class _Timeline:
    """Serves a cassette's interactions in order and notes which fragment is being read."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.position = 0
        self.fragment = -1

    def handle(self, request: Any, inner: Any, lib: types.ModuleType, is_async: bool) -> Any:
        if self.position >= len(self.cassette.interactions):
            raise CassetteError(f"{self.cassette.path}: the adapter made more requests than were recorded")
        interaction = self.cassette.interactions[self.position]
        self.position += 1
        response = replay_response(lib, request, interaction, fragmentation=Fragmentation("recorded"), speed=0.0,
                                   fault=None, path=str(self.cassette.path), is_async=is_async)
        inner_stream = response.stream.source

        async def counting() -> Any:
            async for piece in inner_stream:
                self.fragment += 1
                yield piece

        response.stream.source = counting()
        return response


def _summary(interaction: Interaction) -> str:
    try:
        body = orjson.loads(interaction.request.body or b"")
    except orjson.JSONDecodeError:
        return f"{len(interaction.request.body or b'')} bytes"
    if not isinstance(body, dict):
        return type(body).__name__
    facts = [f"model={body.get('model')}"] if "model" in body else []
    for key in ("messages", "contents", "input", "tools"):
        if isinstance(body.get(key), list):
            facts.append(f"{key}={len(body[key])}")
    return ", ".join(facts) or ", ".join(list(body)[:6])


def run_show(path: str, out: TextIO, *, routes: RouteTable | None = None) -> int:
    cassette = Cassette.load(path)
    meta = cassette.metadata
    out.write(f"cassette {path}  route={meta.get('route', '?')}  {meta.get('library', 'plain vcrpy')}\n")
    for number, interaction in enumerate(cassette.interactions):
        request = interaction.request
        query = urlsplit(request.uri).query
        out.write(f"\ninteraction {number}: {request.method} {request.path}{'?' + query if query else ''}\n")
        out.write(f"  request: {_summary(interaction)}\n")
        headers = ", ".join(f"{k}: {v}" for k, v in request.headers.items() if k.lower() not in ("host", "content-length"))
        out.write(f"  headers: {headers}\n")
        state = "complete" if interaction.complete else "closed by the caller before the end of the body"
        error = f", failed with {interaction.error.kind} at byte {interaction.error.offset}" if interaction.error else ""
        out.write(f"  response: {interaction.status} {interaction.reason}, {len(interaction.body)} bytes in "
                  f"{len(interaction.fragment_sizes())} fragment(s), {state}{error}\n")
    chunks_by_fragment: dict[int, list[str]] = {}
    outcome: Outcome | None = None
    if "route" in meta:
        try:
            route, calls, base_url = case_options(cassette)
            adapter = (routes or RouteTable.load(pyproject=Path("pyproject.toml"))).adapter(route, base_url=base_url)
        except DshReplayError as exc:
            out.write(f"\n(chunks not shown: {exc})\n")
        else:
            timeline = _Timeline(cassette)

            async def run() -> Outcome:
                result = Outcome()
                install(timeline)
                try:
                    for options in calls:
                        async for chunk in adapter.stream(options):
                            result.chunks.append(chunk)
                            chunks_by_fragment.setdefault(timeline.fragment, []).append(
                                orjson.dumps(chunk_to_json(chunk)).decode())
                except Exception as exc:  # shown in the timeline, not raised
                    result.raised = exc
                finally:
                    uninstall(timeline)
                return result

            outcome = asyncio.run(run())
    _fragments(cassette, chunks_by_fragment, outcome, out)
    return 0


def _fragments(cassette: Cassette, chunks: dict[int, list[str]], outcome: Outcome | None, out: TextIO) -> None:
    """One row per fragment (arrival ms, byte offset, size, the bytes), the chunks it released under it."""
    out.write(f"\n{'ms':>7}  {'offset':>7}  {'bytes':>6}  fragment → chunks\n")
    index = 0
    first_chunk_ms: float | None = None
    for number, interaction in enumerate(cassette.interactions):
        if len(cassette.interactions) > 1:
            out.write(f"{'':25}(interaction {number})\n")
        at = 0
        # the pieces replay serves: the recorded fragments, or the whole body as one
        for ms, size in interaction.fragments or ([(0.0, len(interaction.body))] if interaction.body else []):
            piece = interaction.body[at:at + size].decode("utf-8", "replace")
            preview = piece.replace("\r", "\\r").replace("\n", "\\n")
            out.write(f"{ms:7.1f}  {at:7}  {size:6}  {preview[:70]}{'…' if len(preview) > 70 else ''}\n")
            at += size
            for line in chunks.get(index, []):
                if first_chunk_ms is None:
                    first_chunk_ms = ms
                out.write(f"{'':25}→ {line[:110]}\n")
            index += 1
    if outcome is not None and outcome.raised is not None:
        out.write(f"{'':25}→ raised {type(outcome.raised).__name__}: {outcome.raised}\n")
    first = cassette.interactions[0].fragments if cassette.interactions else None
    ttfb = f"{first[0][0]:.1f} ms" if first else "n/a"
    ttfc = f"{first_chunk_ms:.1f} ms" if first_chunk_ms is not None else "n/a"
    out.write(f"\ntime to first byte: {ttfb}; time to first chunk: {ttfc}\n")


DESCRIPTION = (
    "Print each interaction's request (scrubbed) and response, then every fragment with its arrival\n"
    "time and size and the chunks the adapter produced from it; time to first byte and first chunk."
)
EXAMPLE = "dsh-replay show cassettes/anthropic/text.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cassette", metavar="CASSETTE")
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_show(args.cassette, out, routes=route_table(args))
