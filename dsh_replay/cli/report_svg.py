"""The report's pictures: a stream's bytes over time as inline SVG, with its chunks on the same axis.

Pure text in, text out: every string from a cassette is escaped here, and every
number is printed with a fixed precision, so that the same cassettes always give
the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["LANES", "Event", "Mark", "Series", "timeline_svg"]

WIDTH = 960
LEFT, RIGHT, TOP = 64, 24, 30
PLOT_HEIGHT = 170
LANE_HEIGHT = 16
#: how many chunks a marker's tooltip lists before it only counts the rest
TOOLTIP_CHUNKS = 8

#: (lane name, chunk types drawn in it)
LANES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("block-start", ("block-start",)),
    ("deltas", ("text-delta", "reasoning-delta", "tool-call-delta")),
    ("block-end", ("block-end",)),
    ("usage", ("usage",)),
    ("finish", ("finish",)),
)
KIND_COLOURS = {
    "block-start": "#6b7280", "text-delta": "#15803d", "reasoning-delta": "#7c3aed",
    "tool-call-delta": "#c2410c", "block-end": "#1d4ed8", "usage": "#0f766e", "finish": "#b91c1c",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One response body's arrival: (ms, bytes) per fragment, drawn as cumulative bytes."""

    name: str
    colour: str
    fragments: tuple[tuple[float, int], ...]
    dashed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """A chunk placed at the arrival time of the fragment that released it."""

    ms: float
    kind: str
    #: the chunk as protocol JSON, shown on hover
    detail: str
    series: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Mark:
    """A moment worth a vertical line: the first byte, the first text."""

    ms: float
    label: str
    colour: str


def _num(value: float) -> str:
    return f"{value:.1f}"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``top`` (steps of 1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [round(step * n, 10) for n in range(math.ceil(top / step - 1e-9) + 1)]


def _bytes_label(value: float) -> str:
    return f"{value / 1000:g}k" if value >= 10_000 else f"{value:g}"


class _Scale:
    def __init__(self, max_ms: float, max_bytes: float) -> None:
        self.x_ticks = nice_ticks(max_ms)
        self.y_ticks = nice_ticks(max_bytes)
        self.x_top = self.x_ticks[-1]
        self.y_top = self.y_ticks[-1]

    def x(self, ms: float) -> float:
        return LEFT + (WIDTH - LEFT - RIGHT) * ms / self.x_top

    def y(self, size: float) -> float:
        return TOP + PLOT_HEIGHT - PLOT_HEIGHT * size / self.y_top


def _axes(scale: _Scale, lanes_bottom: float) -> list[str]:
    bottom = TOP + PLOT_HEIGHT
    parts = ['<g class="axes" font-size="11" fill="#374151">']
    for tick in scale.y_ticks:
        y = _num(scale.y(tick))
        parts.append(f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                     f"{_bytes_label(tick)}</text>")
    for tick in scale.x_ticks:
        x = _num(scale.x(tick))
        parts.append(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{_num(lanes_bottom)}" stroke="#f3f4f6"/>')
        parts.append(f'<text x="{x}" y="{_num(lanes_bottom + 14)}" text-anchor="middle">{tick:g}</text>')
    parts.append(f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#9ca3af"/>')
    parts.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#9ca3af"/>')
    parts.append(f'<text x="{WIDTH - RIGHT}" y="{_num(lanes_bottom + 28)}" text-anchor="end">'
                 "ms after the response headers</text>")
    parts.append(f'<text x="12" y="{TOP + PLOT_HEIGHT / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 12 {TOP + PLOT_HEIGHT / 2})">bytes received</text>')
    parts.append("</g>")
    return parts


def _series(scale: _Scale, series: Series) -> list[str]:
    path = [f"M{_num(scale.x(0))} {_num(scale.y(0))}"]
    dots = []
    total = 0
    for number, (ms, size) in enumerate(series.fragments):
        total += size
        x, y = _num(scale.x(ms)), _num(scale.y(total))
        path.append(f"H{x} V{y}")
        tip = f"{series.name}: fragment {number} at {ms:.1f} ms, +{size} bytes, {total} in all"
        dots.append(f'<circle cx="{x}" cy="{y}" r="2.5" fill="{series.colour}"><title>{escape(tip)}</title></circle>')
    dash = ' stroke-dasharray="6 3"' if series.dashed else ""
    return [f'<g class="series" data-series="{escape(series.name)}" data-fragments="{len(series.fragments)}" '
            f'data-bytes="{total}">',
            f'<path d="{" ".join(path)}" fill="none" stroke="{series.colour}" stroke-width="2"{dash}/>',
            *dots, "</g>"]


def _lanes(scale: _Scale, events: Sequence[Event]) -> list[str]:
    parts = ['<g class="lanes" font-size="10" fill="#374151">']
    for row, (name, kinds) in enumerate(LANES):
        top = TOP + PLOT_HEIGHT + 10 + row * LANE_HEIGHT
        middle = _num(top + LANE_HEIGHT / 2)
        parts.append(f'<text x="{LEFT - 6}" y="{middle}" text-anchor="end" dominant-baseline="middle">{name}</text>')
        parts.append(f'<line x1="{LEFT}" y1="{middle}" x2="{WIDTH - RIGHT}" y2="{middle}" stroke="#f3f4f6"/>')
        groups: dict[tuple[str, float], list[Event]] = {}
        for event in events:
            if event.kind in kinds:
                groups.setdefault((event.series, event.ms), []).append(event)
        for (series, ms), group in groups.items():
            lines = [f"{series + ': ' if series else ''}{len(group)} chunk(s) at {ms:.1f} ms"]
            lines += [e.detail if len(e.detail) <= 160 else e.detail[:159] + "…" for e in group[:TOOLTIP_CHUNKS]]
            if len(group) > TOOLTIP_CHUNKS:
                lines.append(f"… and {len(group) - TOOLTIP_CHUNKS} more")
            width = 4 if len(group) > 1 else 3
            parts.append(f'<rect class="event" data-kind="{escape(group[0].kind)}" data-count="{len(group)}" '
                         f'x="{_num(scale.x(ms) - width / 2)}" y="{_num(top + 3)}" width="{width}" '
                         f'height="{LANE_HEIGHT - 6}" fill="{KIND_COLOURS.get(group[0].kind, "#111827")}">'
                         f"<title>{escape(chr(10).join(lines))}</title></rect>")
    parts.append("</g>")
    return parts


def _marks(scale: _Scale, marks: Sequence[Mark], lanes_bottom: float) -> list[str]:
    parts = ['<g class="marks" font-size="11">']
    for row, mark in enumerate(marks):
        x = _num(scale.x(mark.ms))
        parts.append(f'<line x1="{x}" y1="{TOP - 4}" x2="{x}" y2="{_num(lanes_bottom)}" stroke="{mark.colour}" '
                     'stroke-dasharray="3 3"/>')
        anchor = "end" if scale.x(mark.ms) > WIDTH * 0.7 else "start"
        shift = -4 if anchor == "end" else 4
        parts.append(f'<text x="{_num(scale.x(mark.ms) + shift)}" y="{TOP + 10 + row * 13}" '
                     f'text-anchor="{anchor}" fill="{mark.colour}">{escape(mark.label)}</text>')
    parts.append("</g>")
    return parts


def _legend(series: Sequence[Series]) -> list[str]:
    parts = ['<g class="legend" font-size="11" fill="#111827">']
    x = float(LEFT)
    for item in series:
        dash = ' stroke-dasharray="6 3"' if item.dashed else ""
        parts.append(f'<line x1="{_num(x)}" y1="10" x2="{_num(x + 22)}" y2="10" stroke="{item.colour}" '
                     f'stroke-width="3"{dash}/>')
        parts.append(f'<text x="{_num(x + 28)}" y="10" dominant-baseline="middle">{escape(item.name)}</text>')
        # an estimate of the label's width: SVG text cannot be measured without a browser
        x += 48 + 6.5 * min(len(item.name), 90)
    parts.append("</g>")
    return parts


def timeline_svg(
    series: Sequence[Series], events: Sequence[Event] = (), marks: Sequence[Mark] = (), *, title: str, lanes: bool = True
) -> str:
    """One SVG: each series' cumulative bytes over time, the chunks in lanes below, the marks across."""
    times = [ms for item in series for ms, _ in item.fragments] + [e.ms for e in events] + [m.ms for m in marks]
    totals = [sum(size for _, size in item.fragments) for item in series]
    scale = _Scale(max(times, default=0.0), float(max(totals, default=0)))
    lanes_bottom = TOP + PLOT_HEIGHT + (10 + len(LANES) * LANE_HEIGHT if lanes else 0)
    height = _num(lanes_bottom + 36)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" role="img" font-family="system-ui, sans-serif">',
             f"<title>{escape(title)}</title>",
             *_axes(scale, lanes_bottom)]
    if lanes:
        parts += _lanes(scale, events)
    parts += _marks(scale, marks, lanes_bottom)
    for item in series:
        parts += _series(scale, item)
    parts += _legend(series)
    parts.append("</svg>")
    return "\n".join(parts)
