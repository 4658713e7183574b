"""``dsh-replay show``: the timeline of a cassette (fragments with timing, decoded events, resulting chunks)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

import orjson

from ..adapters.route_table import RouteTable
from ..cassette.store import Cassette, Interaction
from ..protocol.jsonl import chunk_to_json
from .common import FORCE_HELP, add_plugins, config_inputs, route_table
from .timeline import StreamTimeline, fragment_preview, stream_timeline

__all__ = ["run_show"]


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


def run_show(path: str, out: TextIO, *, routes: RouteTable | None = None, html: str | None = None,
             force: bool = False, also_read: Mapping[str, Iterable[Path]] | None = None) -> int:
    cassette = Cassette.load(path)
    if html is not None:
        from .report import write_report

        # the page may not replace the cassette shown, another cassette or a golden (unless force)
        return write_report([Path(path)], html, out, routes=routes, force=force, also_read=also_read)
    meta = cassette.metadata
    out.write(f"cassette {path}  route={meta.get('route', '?')}  {meta.get('library', 'plain vcrpy')}\n")
    from .report import provenance_notes

    for note in provenance_notes(meta):
        out.write(f"{note}\n")
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
    timeline = asyncio.run(stream_timeline(cassette, routes))
    if timeline.note:
        out.write(f"\n(chunks not shown: {timeline.note})\n")
    _fragments(timeline, len(cassette.interactions), out)
    return 0


def _fragments(timeline: StreamTimeline, interactions: int, out: TextIO) -> None:
    """One row per fragment (arrival ms, byte offset, size, the bytes), the chunks it released under it."""
    out.write(f"\n{'ms':>7}  {'offset':>7}  {'bytes':>6}  fragment → chunks\n")
    shown = -1
    for piece in timeline.pieces:
        if interactions > 1 and piece.interaction != shown:
            out.write(f"{'':25}(interaction {piece.interaction})\n")
        shown = piece.interaction
        preview = fragment_preview(piece.data)
        out.write(f"{piece.ms:7.1f}  {piece.offset:7}  {piece.size:6}  {preview[:70]}{'…' if len(preview) > 70 else ''}\n")
        for chunk in piece.chunks:
            out.write(f"{'':25}→ {orjson.dumps(chunk_to_json(chunk)).decode()[:110]}\n")
    if timeline.outcome is not None and timeline.outcome.raised is not None:
        raised = timeline.outcome.raised
        out.write(f"{'':25}→ raised {type(raised).__name__}: {raised}\n")
    first_chunk = timeline.first_piece_with()
    ttfb = f"{timeline.first_byte_ms:.1f} ms" if timeline.first_byte_ms is not None else "n/a"
    ttfc = f"{first_chunk.ms:.1f} ms" if first_chunk is not None else "n/a"
    out.write(f"\ntime to first byte: {ttfb}; time to first chunk: {ttfc}\n")


DESCRIPTION = (
    "Print each interaction's request (scrubbed) and response, then every fragment with its arrival\n"
    "time and size and the chunks the adapter produced from it; time to first byte and first chunk.\n"
    "With --html FILE, write the page `dsh-replay report` would write for this one cassette instead\n"
    "(FILE may not be a cassette, a golden or a file read, unless --force)."
)
EXAMPLE = "dsh-replay show cassettes/anthropic/text.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cassette", metavar="CASSETTE")
    parser.add_argument("--html", default=None, metavar="FILE",
                        help="write a self-contained HTML page of the timeline to FILE instead of the text")
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return run_show(args.cassette, out, routes=route_table(args), html=args.html, force=args.force,
                    also_read=config_inputs(args))
