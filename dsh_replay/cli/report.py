"""``dsh-replay report``: a self-contained HTML page with a timeline per cassette."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..errors import DshReplayError
from .common import FORCE_HELP, add_plugins, add_route, config_inputs, inference, route_table

if TYPE_CHECKING:
    from ..adapters.route_table import RouteTable
    from ..cassette.inferred import Inference
    from ..cassette.replay import CaseResult
    from ..cassette.store import Cassette
    from .report_html import CaseView

__all__ = ["write_report"]

DESCRIPTION = (
    "Replay every cassette with dsh_replay metadata under PATHS as recorded and write one\n"
    "self-contained HTML page (no external resources): an index table (case, route, fragments,\n"
    "chunks, time to first byte, first text, golden, verdict; click a header to sort), then per\n"
    "cassette a timeline of fragment arrival (bytes over time) with the chunks each fragment released,\n"
    "the golden status (matched, differs, missing) and any rule violations (P1-P12).\n"
    "--compare A B overlays two cassettes' timelines in one picture (say, before and after\n"
    "re-recording). The page is the same for the same cassettes, so it can be diffed.\n"
    "Exit 0 once the page is written, whatever the verdicts (dsh-replay check judges); 1 when there is\n"
    "no cassette to show. FILE may not be a cassette, a golden or a file read (unless --force)."
)
EXAMPLE = "dsh-replay report cassettes/anthropic cassettes/openai -o report.html"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATHS",
                        help="cassette files or folders (default: cassettes, unless --compare is given)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument("--compare", nargs=2, action="append", default=[], metavar=("A", "B"),
                        help="two cassettes whose timelines to overlay (may be given more than once)")
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)
    add_route(parser)
    add_plugins(parser)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    paths = args.paths or ([] if args.compare else ["cassettes"])
    routes = route_table(args)
    return write_report([Path(p) for p in paths], args.output, out, err=err,
                        compare=[(Path(a), Path(b)) for a, b in args.compare], routes=routes,
                        force=args.force, also_read=config_inputs(args), inference=inference(args, routes))


def _case_label(path: Path) -> str:
    for suffix in (".yaml", ".yml"):
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.name


def _cassettes(paths: Sequence[Path], compare: Sequence[tuple[Path, Path]], routes: RouteTable,
               inference: Inference | None) -> tuple[list[Path], dict[Path, Cassette | DshReplayError], int]:
    """The cassettes to show, each once, in the order given; the plain vcrpy ones read as cases (path -> the
    case, or why it is none); and how many YAML files without metadata were left out."""
    from ..errors import ConfigError
    from .check_cases import find_cases, read_plain_cases, sorted_paths

    found, _, skipped = find_cases([str(p) for p in paths]) if paths else ([], [], [])
    plain = read_plain_cases(skipped, routes, inference)
    found = sorted_paths([*found, *plain.cases]) if plain.cases else found
    for pair in compare:
        for path in pair:
            if not path.is_file():
                raise ConfigError(f"--compare {path}: no such cassette file; give two cassette files")
    ordered: list[Path] = []
    for path in [*found, *(p for pair in compare for p in pair)]:
        if path not in ordered:
            ordered.append(path)
    return ordered, plain.cases, len(plain.skipped)


def write_report(
    paths: Sequence[Path],
    output: str,
    out: TextIO,
    *,
    err: TextIO | None = None,
    compare: Sequence[tuple[Path, Path]] = (),
    routes: RouteTable | None = None,
    force: bool = False,
    also_read: Mapping[str, Iterable[Path]] | None = None,
    inference: Inference | None = None,
) -> int:
    """Replay the cassettes under ``paths`` (and those of ``compare``) and write the page to ``output``.

    ``output`` may not be a cassette, a golden, nor one of the cassettes or of
    ``also_read`` (labelled files the caller read), unless ``force``.
    """
    import asyncio

    from .._version import __version__
    from ..adapters.route_table import RouteTable
    from ..cassette.files import atomic_write, unwritable_reason
    from ..errors import ConfigError
    from .common import refuse_output
    from .report_html import render_page

    target = Path(output)
    reason = unwritable_reason(target)
    if reason is not None:  # asked first: a long replay should not end in a page that cannot be saved
        raise ConfigError(f"-o {output}: {reason}; choose a file that can be written")
    table = routes or RouteTable.load(pyproject=Path("pyproject.toml"))
    cassettes, plain, skipped = _cassettes(paths, compare, table, inference)
    refuse_output(target, what="report", inputs={"one of the cassettes being read": cassettes, **(also_read or {})},
                  force=force)
    if not cassettes:
        note = f" (skipped {skipped} YAML file(s) without dsh_replay metadata)" if skipped else ""
        (err or out).write(f"dsh-replay: no cassettes with dsh_replay metadata under "
                           f"{', '.join(str(p) for p in paths)}{note}; nothing written\n")
        return 1
    views = asyncio.run(_views(cassettes, table, plain))
    by_path = dict(zip(cassettes, views, strict=True))
    page = render_page(views, [(by_path[a], by_path[b]) for a, b in compare], title="dsh-replay report",
                       version=__version__)
    atomic_write(target, page.encode("utf-8"))  # a failure is a CassetteError naming the file and why
    failed = sum(1 for view in views if not view.ok)
    out.write(f"wrote {output}: {len(views)} cassette(s), {len(views) - failed} ok, {failed} failed\n")
    return 0


async def _views(cassettes: Sequence[Path], routes: RouteTable,
                 plain: Mapping[Path, Cassette | DshReplayError]) -> list[CaseView]:
    from dataclasses import replace

    from ..cassette.replay import CaseResult, replay_case
    from ..wire.coverage import collect_coverage

    views = []
    for number, path in enumerate(cassettes, start=1):
        case = plain.get(path)
        if isinstance(case, DshReplayError):  # a plain cassette with a call that cannot be read as one
            result = CaseResult(cassette=path, short=type(case).__name__, problem=str(case))
            views.append(await _view(f"case-{number}", path, result, routes, None))
            continue
        with collect_coverage(detail=True) as seen:  # the page shows each call's event kinds
            result = await replay_case(path, routes, cassette=case)
        view = await _view(f"case-{number}", path, result, routes, case)
        views.append(replace(view, coverage=tuple(seen.streams)))
    return views


def _goldens(path: Path, result: CaseResult) -> tuple[str, str]:
    """(status, detail) of the goldens of every replayed call: the first one that is not matched, else matched."""
    from ..cassette.replay import judge_golden

    judged = [judge_golden(path, outcome.golden_bytes(), update=False, call=call)
              for call, outcome in enumerate(result.outcomes, start=1)]
    return next(((status, detail) for status, detail in judged if status != "matched"),
                ("matched", "") if judged else ("n/a", ""))


def provenance_notes(metadata: dict[str, object]) -> list[str]:
    """What a reviewer must know about where a cassette's traffic came from, one line each."""
    notes = []
    if metadata.get("emulated") is True:
        notes.append("emulated: recorded against a scripted provider emulator, not the real provider")
    if metadata.get("fragments") == "inferred":
        notes.append("fragments inferred: imported whole, cut one per event at 0 ms; the network's were not recorded")
    return notes


async def _view(anchor: str, path: Path, result: CaseResult, routes: RouteTable, case: Cassette | None,
                ) -> CaseView:
    from dataclasses import replace

    import orjson

    from ..cassette.store import Cassette
    from ..protocol.jsonl import chunk_to_json
    from .report_html import Arrival, CaseView
    from .timeline import fragment_preview, stream_timeline

    judged = CaseView(anchor=anchor, case=_case_label(path), path=str(path), route=result.route,
                      verdict=result.verdict, ok=result.ok, problem=result.problem,
                      violations=tuple(f"{v.rule} at chunk {v.position}: {v.message}"
                                       for o in result.outcomes for v in o.violations))
    if result.route == "?" and case is None and result.problem:
        return judged  # not read far enough to show more (why is in ``problem``)
    try:
        cassette = case or Cassette.load(path)
    except DshReplayError:  # replay_case has said why, in ``problem``
        return judged
    timeline = await stream_timeline(cassette, routes)
    arrivals = []
    for piece in timeline.pieces:
        shown = [chunk_to_json(chunk) for chunk in piece.chunks]
        arrivals.append(Arrival(
            interaction=piece.interaction, ms=piece.ms, offset=piece.offset, size=piece.size,
            preview=fragment_preview(piece.data),
            chunks=tuple(orjson.dumps(chunk).decode() for chunk in shown), kinds=tuple(c["type"] for c in shown)))
    first_text = timeline.first_text
    raised = timeline.outcome.raised if timeline.outcome is not None else None
    golden, detail = _goldens(path, result)
    for note in provenance_notes(cassette.metadata):
        judged = replace(judged, verdict=f"{judged.verdict}, {note.split(':', 1)[0]}")
    return replace(
        judged,
        responses=tuple(f"{i.status} {i.reason}".strip() for i in cassette.interactions),
        arrivals=tuple(arrivals), ttfb_ms=timeline.first_byte_ms,
        first_text_ms=first_text.ms if first_text is not None else None,
        first_text_interaction=first_text.interaction if first_text is not None else 0,
        golden=golden, golden_detail=detail, note=timeline.note,
        raised=f"{type(raised).__name__}: {raised}" if raised is not None else "",
    )
