"""Wire coverage as the commands print it (``trace``, ``check``, ``drift``).

``check`` adds :func:`coverage_fields` to each case's row (the unmapped kinds
of every call, JSON-ready), prints :func:`unmapped_section` after its table and,
with ``--strict-coverage``, fails those rows (:func:`strict_rows`); ``trace``
prints :func:`unmapped_lines` and, with ``--coverage``, :func:`coverage_table`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..wire.coverage import MAPPED, TIMES, KindCount, WireCoverage, unmapped_of

__all__ = ["coverage_fields", "coverage_table", "strict_rows", "unmapped_lines", "unmapped_note", "unmapped_section"]


def unmapped_lines(streams: Iterable[WireCoverage]) -> list[str]:
    """``unmapped: KIND ×N (first at body line L)``, one per unmapped kind of every stream."""  # noqa: RUF002
    return [line for stream in streams for line in stream.unmapped_lines()]


def coverage_fields(streams: Sequence[WireCoverage]) -> dict[str, Any]:
    """What a ``check`` row adds about coverage: ``{"unmapped": [{kind, count, first_line}]}``, or nothing.

    Rows stay as they were when every kind is mapped or ignored on purpose.
    """
    unmapped = unmapped_of(streams)
    if not unmapped:
        return {}
    return {"unmapped": [{"kind": k.kind, "count": k.count, "first_line": k.first_line} for k in unmapped]}


def unmapped_note(row: dict[str, Any]) -> str:
    """``KIND ×N (first at body line L), ...`` for a row with unmapped kinds, else ``""``."""  # noqa: RUF002
    return ", ".join(
        KindCount(kind=k["kind"], count=k["count"], status="unmapped", first_line=k["first_line"]).describe()
        for k in row.get("unmapped", ()))


def unmapped_section(rows: Sequence[dict[str, Any]]) -> str:
    """What ``check`` prints after its table: the unmapped kinds of each case that has any."""
    listed = [f"  {row['case']} ({row['route']}): {unmapped_note(row)}\n" for row in rows if row.get("unmapped")]
    return f"\nunmapped event kinds (sent by the provider, neither mapped nor ignored by the adapter):\n{''.join(listed)}" \
        if listed else ""


def strict_rows(rows: Sequence[dict[str, Any]]) -> None:
    """``check --strict-coverage``: a passing case with unmapped kinds fails."""
    for row in rows:
        if row.get("unmapped") and row["ok"]:
            row.update(ok=False, verdict="FAIL unmapped kinds",
                       problem=f"unmapped event kinds (--strict-coverage): {unmapped_note(row)}")


def coverage_table(stream: WireCoverage) -> list[str]:
    """Every kind of one stream (status, count, first line, why ignored), then the fields no kind read."""
    if not stream.declared:
        return [f"coverage: the {stream.route} translator declares no kinds; {stream.events} event(s) not judged"]
    width = max((len(k.kind) for k in stream.kinds), default=4)
    lines = [f"coverage: {len(stream.kinds)} kind(s) in {stream.events} event(s), {stream.status}"]
    for kind in stream.kinds:
        where = f"line {kind.first_line}" if kind.first_line is not None else ""
        reason = f"  {kind.reason}" if kind.reason else ""
        lines.append(f"  {kind.status:<9} {kind.kind:<{width}} {TIMES}{kind.count:<5} {where:<10}{reason}".rstrip())
    lines += _unread_lines([k for k in stream.kinds if k.status == MAPPED])
    return lines


def _unread_lines(kinds: Sequence[KindCount]) -> list[str]:
    """The unread field paths of mapped kinds; those every such kind leaves unread are said once."""
    if not kinds or not any(k.unread for k in kinds):
        return []
    common = set(kinds[0].unread).intersection(*(k.unread for k in kinds[1:]))
    lines = ["fields never read (inside mapped events):"]
    if common:
        lines.append(f"  every kind: {', '.join(sorted(common))}")
    lines += [f"  {k.kind}: {', '.join(p for p in k.unread if p not in common)}"
              for k in kinds if set(k.unread) - common]
    return lines
