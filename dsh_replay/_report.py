"""The run's tally and the terminal summary (one summary under pytest-xdist too).

Workers keep their own :class:`Tally` and ship it to the controller in
``workeroutput`` when they finish; the controller adds them up, looks for
unused goldens and orphan cassettes in the folders the run touched, and prints
the summary once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._golden import GOLDEN_SUFFIX

__all__ = ["Tally"]

_COUNTERS = (
    "cassettes_recorded",
    "cassettes_replayed",
    "goldens_matched",
    "goldens_written",
    "goldens_updated",
    "secrets_scrubbed",
)


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    cassettes: set[str] = field(default_factory=set)
    goldens: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)

    def use(self, cassette: Path, golden: Path | None = None) -> None:
        self.cassettes.add(str(cassette.resolve()))
        self.folders.add(str(cassette.resolve().parent))
        if golden is not None:
            self.goldens.add(str(golden.resolve()))

    def to_json(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "cassettes": sorted(self.cassettes),
            "goldens": sorted(self.goldens),
            "folders": sorted(self.folders),
        }

    def merge(self, data: dict[str, Any]) -> None:
        self.counts.update(data.get("counts", {}))
        self.cassettes.update(data.get("cassettes", ()))
        self.goldens.update(data.get("goldens", ()))
        self.folders.update(data.get("folders", ()))

    def unused(self) -> tuple[list[Path], list[Path]]:
        """(goldens no test compared, cassettes no test used) in the folders the run touched."""
        goldens, cassettes = [], []
        for folder in sorted(self.folders):
            for path in sorted(Path(folder).iterdir()):
                resolved = str(path.resolve())
                if path.name.endswith(GOLDEN_SUFFIX) and resolved not in self.goldens:
                    goldens.append(path)
                elif path.suffix in (".yaml", ".yml") and resolved not in self.cassettes:
                    cassettes.append(path)
        return goldens, cassettes

    def lines(self, *, complete_run: bool, root: Path) -> list[str]:
        c = self.counts
        if not (self.cassettes or any(c[name] for name in _COUNTERS)):
            return []
        out = [
            f"cassettes: {c['cassettes_replayed']} replayed, {c['cassettes_recorded']} recorded",
            f"goldens: {c['goldens_matched']} matched, {c['goldens_written']} written, {c['goldens_updated']} updated",
            f"secrets scrubbed: {c['secrets_scrubbed']}",
        ]
        if complete_run:
            goldens, cassettes = self.unused()
            out.append(f"unused goldens: {len(goldens)}" + _listing(goldens, root))
            out.append(f"orphan cassettes: {len(cassettes)}" + _listing(cassettes, root))
        return out


def _listing(paths: list[Path], root: Path) -> str:
    if not paths:
        return ""
    shown = [_relative(p, root) for p in paths[:10]]
    more = f", … (+{len(paths) - 10})" if len(paths) > 10 else ""
    return " (" + ", ".join(shown) + more + ")"


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
