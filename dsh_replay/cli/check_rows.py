"""The rows of ``dsh-replay check``: one per case, per golden without a cassette, per folder not listed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..cassette.golden import GOLDEN_SUFFIX
from ..cassette.replay import CaseResult
from ..errors import DshReplayError
from .check_cases import unreadable_folder

__all__ = ["case_label", "case_row", "golden_only", "golden_row", "skipped_note", "unreadable_row"]


def case_label(path: Path) -> str:
    name = path.name
    for suffix in (GOLDEN_SUFFIX, ".yaml", ".yml"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def case_row(path: Path, result: CaseResult) -> dict[str, Any]:
    where = [str(result.where[0]), result.where[1]] if result.where else None
    return {
        # "?": the cassette could not be read far enough to know its route
        "case": case_label(path), "route": None if result.route == "?" else result.route, "path": str(path),
        "fragments": result.fragments, "chunks": result.chunks, "blocks": result.blocks,
        "ok": result.ok, "verdict": result.verdict, "seconds": result.seconds, "where": where,
        # the golden diff ends with the pytest way to accept; here it is this command's
        "problem": result.problem.replace("with: pytest --update-golden", "with: dsh-replay check --update"),
    }


def golden_row(path: Path) -> dict[str, Any]:
    """The row of a golden without a cassette: the rules only, no route (nothing was replayed)."""
    from .validate import validate_file

    started = time.perf_counter()
    row: dict[str, Any] = {"case": case_label(path), "route": None, "path": str(path), "fragments": 0,
                           "where": None}
    try:
        report = validate_file(path)
    except DshReplayError as exc:  # unreadable (a folder of that name), or not a chunk file at all
        verdict = "FAIL not a chunk file" if path.is_file() else "FAIL unreadable"
        return row | {"chunks": 0, "blocks": 0, "ok": False, "verdict": verdict, "problem": str(exc),
                      "seconds": time.perf_counter() - started}
    problem = verdict = ""
    if report.violations:
        line, first = report.violations[0]
        problem = "\n".join(f"{path}:{n}: {v.rule} {v.message}" for n, v in report.violations)
        verdict = f"FAIL {first.rule} (line {line})"
        row["where"] = [str(path), line]
    if not verdict:
        # nothing was replayed, so nothing of an adapter was tested: not a pass, and it says so
        verdict = "golden only: rules hold, nothing replayed"
        verdict += f" (raised {report.raised})" if report.raised is not None else ""
        row["golden_only"] = True
    return row | {"chunks": report.chunks, "blocks": report.blocks, "ok": not problem, "verdict": verdict,
                  "problem": problem, "seconds": time.perf_counter() - started}


def unreadable_row(folder: Path, reason: str) -> dict[str, Any]:
    return {"case": folder.name, "route": None, "path": str(folder), "fragments": 0, "chunks": 0, "blocks": 0,
            "ok": False, "verdict": "FAIL unreadable", "seconds": 0.0, "where": None,
            "problem": unreadable_folder(folder, reason)}


def skipped_note(skipped: Sequence[Path]) -> str:
    if not skipped:
        return ""
    return (f"; skipped {len(skipped)} YAML file(s) without dsh_replay metadata (plain vcrpy cassettes: "
            "--route ROUTE or [tool.dsh_replay.hosts] reads them as cases, dsh-replay import converts them)")


def golden_only(rows: Sequence[dict[str, Any]]) -> int:
    return sum(1 for row in rows if row.get("golden_only") and row["ok"])
