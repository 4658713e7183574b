"""The report page: an index table, then per cassette its timeline, numbers, golden status and rule breaks.

The page is one file with nothing outside it: inline CSS, inline SVG and a few
lines of script to sort the index. Cassettes are untrusted text (model output
can hold ``<script>``), so every string from them is escaped, and the page's
Content-Security-Policy lets only the script written here run, by its hash.
Nothing in it depends on the clock or the machine: the same cassettes give the
same bytes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from ..wire.coverage import WireCoverage
from .report_svg import Event, Mark, Series, timeline_svg

__all__ = ["Arrival", "CaseView", "render_page"]

INTERACTION_COLOURS = ("#2563eb", "#9333ea", "#0891b2", "#ca8a04", "#db2777")
COMPARE_COLOURS = ("#2563eb", "#ea580c")
FIRST_BYTE_COLOUR, FIRST_TEXT_COLOUR = "#6b7280", "#15803d"
PREVIEW = 120

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #111827; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 0 0 6px; }
table { border-collapse: collapse; } th, td { padding: 2px 8px; text-align: left; vertical-align: top; }
table.index th { cursor: pointer; background: #f3f4f6; border-bottom: 1px solid #d1d5db; user-select: none; }
table.index th[aria-sort=ascending]::after { content: " \\25B2"; }
table.index th[aria-sort=descending]::after { content: " \\25BC"; }
table.index tbody tr:nth-child(even) { background: #f9fafb; }
td.number, th.number { text-align: right; font-variant-numeric: tabular-nums; }
section { border-top: 1px solid #e5e7eb; margin-top: 20px; padding-top: 12px; }
.ok { color: #15803d; } .fail { color: #b91c1c; font-weight: 600; }
.path, .route { color: #6b7280; font-family: ui-monospace, monospace; font-size: 12px; }
dl.facts { display: flex; flex-wrap: wrap; gap: 4px 20px; margin: 6px 0; }
dl.facts div { display: flex; gap: 6px; } dt { color: #6b7280; } dd { margin: 0; font-weight: 600; }
pre { background: #f9fafb; border: 1px solid #e5e7eb; padding: 6px; overflow-x: auto; font-size: 12px; }
ul.violations { color: #b91c1c; }
table.fragments { font-family: ui-monospace, monospace; font-size: 12px; }
table.fragments td.chunk { color: #374151; padding-left: 40px; }
svg.timeline { max-width: 100%; height: auto; }
table.coverage td.unmapped { color: #b91c1c; font-weight: 600; } table.coverage td.ignored { color: #6b7280; }
""".strip()

SCRIPT = """
document.querySelectorAll("table.index th").forEach(function (th, column) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0];
    var up = th.getAttribute("aria-sort") !== "ascending";
    th.parentNode.querySelectorAll("th").forEach(function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    var numeric = th.classList.contains("number");
    function key(row) {
      var value = row.cells[column].getAttribute("data-value");
      if (!numeric) { return value; }
      var number = parseFloat(value);
      return isNaN(number) ? Infinity : number;
    }
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      var order = numeric ? (x > y) - (x < y) : x.localeCompare(y);
      return up ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
""".strip()

_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{_SCRIPT_HASH}'"


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    """One fragment as recorded: which response, when, where in the body, and its bytes (decoded for reading)."""

    interaction: int
    ms: float
    offset: int
    size: int
    preview: str
    chunks: tuple[str, ...] = ()
    #: the chunk types of ``chunks``, in order
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseView:
    """What the page shows of one cassette."""

    anchor: str
    case: str
    path: str
    route: str
    #: "200 OK" per recorded interaction
    responses: tuple[str, ...] = ()
    arrivals: tuple[Arrival, ...] = ()
    ttfb_ms: float | None = None
    first_text_ms: float | None = None
    first_text_interaction: int = 0
    golden: str = "n/a"
    golden_detail: str = ""
    verdict: str = ""
    ok: bool = False
    violations: tuple[str, ...] = ()
    raised: str = ""
    problem: str = ""
    note: str = ""
    #: the wire coverage of each replayed call (one per stream an HttpAdapter translated)
    coverage: tuple[WireCoverage, ...] = ()

    @property
    def chunks(self) -> int:
        return sum(len(arrival.chunks) for arrival in self.arrivals)

    @property
    def total_bytes(self) -> int:
        return sum(arrival.size for arrival in self.arrivals)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def _fragments_of(view: CaseView, interaction: int) -> tuple[tuple[float, int], ...]:
    return tuple((a.ms, a.size) for a in view.arrivals if a.interaction == interaction)


def _case_svg(view: CaseView) -> str:
    many = len(view.responses) > 1
    series = [Series(name=f"interaction {n}: {status}" if many else f"response: {status}",
                     colour=INTERACTION_COLOURS[n % len(INTERACTION_COLOURS)], fragments=_fragments_of(view, n))
              for n, status in enumerate(view.responses)]
    events = [Event(ms=a.ms, kind=kind, detail=chunk, series=f"interaction {a.interaction}" if many else "")
              for a in view.arrivals for kind, chunk in zip(a.kinds, a.chunks, strict=True)]
    marks = []
    if view.ttfb_ms is not None:
        marks.append(Mark(ms=view.ttfb_ms, label=f"first byte {_ms(view.ttfb_ms)}", colour=FIRST_BYTE_COLOUR))
    if view.first_text_ms is not None:
        marks.append(Mark(ms=view.first_text_ms, label=f"first text {_ms(view.first_text_ms)}", colour=FIRST_TEXT_COLOUR))
    return timeline_svg(series, events, marks, title=f"{view.case}: bytes received over time, chunks below")


def _compare_svg(a: CaseView, b: CaseView) -> str:
    series, marks = [], []
    for letter, view, colour in (("A", a, COMPARE_COLOURS[0]), ("B", b, COMPARE_COLOURS[1])):
        # the last response is the one that streamed: before it come the retried errors
        last = max(len(view.responses) - 1, 0)
        series.append(Series(name=f"{letter}: {view.path}", colour=colour, fragments=_fragments_of(view, last),
                             dashed=letter == "B"))
        if view.first_text_ms is not None:
            marks.append(Mark(ms=view.first_text_ms, label=f"{letter} first text {_ms(view.first_text_ms)}",
                              colour=colour))
    return timeline_svg(series, (), marks, title=f"{a.case} (A) against {b.case} (B)", lanes=False)


def _facts(pairs: Sequence[tuple[str, str]]) -> str:
    items = "".join(f"<div><dt>{escape(name)}</dt><dd>{escape(value)}</dd></div>" for name, value in pairs)
    return f'<dl class="facts">{items}</dl>'


def _verdict(view: CaseView) -> str:
    return f'<span class="verdict {"ok" if view.ok else "fail"}">{escape(view.verdict)}</span>'


def _first_text(view: CaseView) -> str:
    if view.first_text_ms is None or len(view.responses) < 2:
        return _ms(view.first_text_ms)
    return f"{_ms(view.first_text_ms)} (interaction {view.first_text_interaction})"


def _fragment_rows(view: CaseView) -> str:
    rows = ["<tr><th>interaction</th><th class=\"number\">ms</th><th class=\"number\">offset</th>"
            "<th class=\"number\">bytes</th><th>fragment → chunks</th></tr>"]
    for arrival in view.arrivals:
        preview = arrival.preview if len(arrival.preview) <= PREVIEW else arrival.preview[:PREVIEW] + "…"
        rows.append(f'<tr><td>{arrival.interaction}</td><td class="number">{arrival.ms:.1f}</td>'
                    f'<td class="number">{arrival.offset}</td><td class="number">{arrival.size}</td>'
                    f"<td>{escape(preview)}</td></tr>")
        rows += [f'<tr><td colspan="4"></td><td class="chunk">→ {escape(chunk)}</td></tr>' for chunk in arrival.chunks]
    return f'<table class="fragments">{"".join(rows)}</table>'


def _case_section(view: CaseView) -> str:
    data = (f'data-fragments="{len(view.arrivals)}" data-bytes="{view.total_bytes}" data-chunks="{view.chunks}" '
            f'data-ttfb-ms="{"" if view.ttfb_ms is None else f"{view.ttfb_ms:.1f}"}" '
            f'data-first-text-ms="{"" if view.first_text_ms is None else f"{view.first_text_ms:.1f}"}" '
            f'data-golden="{escape(view.golden)}"')
    parts = [f'<section class="case" id="{view.anchor}" {data}>',
             f'<h2><a href="#{view.anchor}">{escape(view.case)}</a> <span class="route">{escape(view.route)}</span> '
             f"{_verdict(view)}</h2>",
             f'<div class="path">{escape(view.path)}</div>',
             _facts([("responses", ", ".join(view.responses) or "none"), ("fragments", str(len(view.arrivals))),
                     ("bytes", str(view.total_bytes)), ("time to first byte", _ms(view.ttfb_ms)),
                     ("first text", _first_text(view)), ("chunks", str(view.chunks)), ("golden", view.golden)])]
    if view.arrivals or view.responses:
        parts.append(_case_svg(view))
    if view.note:
        parts.append(f'<p class="note">Chunks not shown: {escape(view.note)}</p>')
    if view.raised:
        parts.append(f'<p class="raised">The adapter raised {escape(view.raised)}</p>')
    if view.violations:
        parts.append('<ul class="violations">' + "".join(f"<li>{escape(v)}</li>" for v in view.violations) + "</ul>")
    if view.problem:
        parts.append(f'<pre class="problem">{escape(view.problem)}</pre>')
    if view.golden_detail and view.golden_detail != view.problem:
        parts.append(f'<pre class="golden">{escape(view.golden_detail)}</pre>')
    parts += [_coverage_table(view, n) for n in range(len(view.coverage))]
    if view.arrivals:
        parts.append(f"<details><summary>fragments and the chunks they released</summary>{_fragment_rows(view)}"
                     "</details>")
    parts.append("</section>")
    return "\n".join(parts)


def _coverage_table(view: CaseView, call: int) -> str:
    """What the provider sent, by kind of event, and what the adapter does with each (mapped, ignored, unmapped)."""
    stream = view.coverage[call]
    which = f"call {call + 1}: " if len(view.coverage) > 1 else ""
    if not stream.declared:
        return f'<p class="coverage">{which}wire coverage: the translator declares no kinds ({stream.events} events)</p>'
    rows = ['<tr><th>event kind</th><th class="number">count</th><th class="number">first line</th>'
            "<th>status</th><th>why ignored</th></tr>"]
    rows += [f'<tr><td>{escape(k.kind)}</td><td class="number">{k.count}</td>'
             f'<td class="number">{"" if k.first_line is None else k.first_line}</td>'
             f'<td class="{k.status}">{k.status}</td><td>{escape(k.reason)}</td></tr>' for k in stream.kinds]
    unmapped = len(stream.unmapped)
    title = (f"{which}wire coverage: {len(stream.kinds)} kind(s) in {stream.events} event(s)"
             + (f", {unmapped} unmapped" if unmapped else ", none unmapped"))
    opened = " open" if unmapped else ""
    return f'<details class="coverage"{opened}><summary>{escape(title)}</summary><table class="coverage">{"".join(rows)}</table></details>'


INDEX_COLUMNS = (("case", ""), ("route", ""), ("fragments", "number"), ("chunks", "number"), ("TTFB", "number"),
                 ("first text", "number"), ("golden", ""), ("verdict", ""))


def _index(views: Sequence[CaseView]) -> str:
    head = "".join(f'<th class="{kind}">{name}</th>' if kind else f"<th>{name}</th>" for name, kind in INDEX_COLUMNS)
    rows = []
    for view in views:
        cells = [
            (view.case, f'<a href="#{view.anchor}">{escape(view.case)}</a>', ""),
            (view.route, escape(view.route), ""),
            (str(len(view.arrivals)), str(len(view.arrivals)), "number"),
            (str(view.chunks), str(view.chunks), "number"),
            ("" if view.ttfb_ms is None else f"{view.ttfb_ms:.1f}", _ms(view.ttfb_ms), "number"),
            ("" if view.first_text_ms is None else f"{view.first_text_ms:.1f}", _ms(view.first_text_ms), "number"),
            (view.golden, escape(view.golden), ""),
            (view.verdict, _verdict(view), ""),
        ]
        rows.append("<tr>" + "".join(f'<td class="{kind}" data-value="{escape(value)}">{shown}</td>' if kind
                                     else f'<td data-value="{escape(value)}">{shown}</td>'
                                     for value, shown, kind in cells) + "</tr>")
    return f'<table class="index"><thead><tr>{head}</tr></thead><tbody>\n' + "\n".join(rows) + "\n</tbody></table>"


def _comparison(number: int, a: CaseView, b: CaseView) -> str:
    def row(name: str, left: str, right: str) -> str:
        return f"<tr><th>{escape(name)}</th><td>{escape(left)}</td><td>{escape(right)}</td></tr>"

    rows = [row("cassette", a.path, b.path), row("fragments", str(len(a.arrivals)), str(len(b.arrivals))),
            row("bytes", str(a.total_bytes), str(b.total_bytes)), row("time to first byte", _ms(a.ttfb_ms), _ms(b.ttfb_ms)),
            row("first text", _first_text(a), _first_text(b)), row("chunks", str(a.chunks), str(b.chunks)),
            row("golden", a.golden, b.golden), row("verdict", a.verdict, b.verdict)]
    return "\n".join([
        f'<section class="comparison" id="compare-{number}">',
        f'<h2>Compared: <a href="#{a.anchor}">{escape(a.case)}</a> (A) and <a href="#{b.anchor}">{escape(b.case)}</a> (B)</h2>',
        _compare_svg(a, b),
        '<table class="compared"><tr><th></th><th>A</th><th>B</th></tr>' + "".join(rows) + "</table>",
        "</section>",
    ])


def render_page(
    views: Sequence[CaseView], comparisons: Sequence[tuple[CaseView, CaseView]] = (), *, title: str, version: str
) -> str:
    """The whole page, as text."""
    failed = sum(1 for view in views if not view.ok)
    summary = (f"{len(views)} cassette(s): {len(views) - failed} ok, {failed} failed. "
               f"Replayed as recorded by dsh-replay {version}; times are ms after each response's headers.")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>\n{STYLE}\n</style></head><body>",
        f"<header><h1>{escape(title)}</h1><p class=\"summary\">{escape(summary)}</p></header>",
        _index(views),
        *(_comparison(n, a, b) for n, (a, b) in enumerate(comparisons, start=1)),
        *(_case_section(view) for view in views),
        f"<script>{SCRIPT}</script>",
        "</body></html>",
        "",
    ])
