"""The run's tally and the terminal summary (one summary under pytest-xdist too).

Workers keep their own :class:`Tally` and ship it to the controller in
``workeroutput`` when they finish; the controller adds them up, looks for
unused goldens and orphan cassettes in the folders the run touched, and prints
the summary once.

A cassette is an orphan when no collected test uses it (collection records the
cassette each ``dsh_replay`` test would open, so a skipped test's cassette is
not an orphan). A golden is unused when nothing compared it and either its
cassette was replayed (a golden for a call the test no longer makes, or a test
that turned goldens off) or its cassette belongs to no test at all. A test that
did not pass may have stopped before some of its calls, so its cassette and
every golden of it count as used (:meth:`Tally.keep`).

Whether the run may list and delete such files is :class:`RunScope`'s call.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._golden import GOLDEN_SUFFIX

__all__ = ["RunScope", "Tally"]

_SUBSET = "only a run of every test can tell what is unused"

_COUNTERS = (
    "cassettes_recorded",
    "cassettes_replayed",
    "goldens_matched",
    "goldens_written",
    "goldens_updated",
    "goldens_differs",
    "goldens_missing",
    "goldens_unreadable",
    "secrets_scrubbed",
)


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    cassettes: set[str] = field(default_factory=set)
    goldens: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    expected: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)
    deselected: int = 0

    def expect(self, cassette: Path) -> None:
        """A collected test will open ``cassette`` (whether or not it gets to run)."""
        self.expected.add(str(cassette.resolve()))

    def keep(self, cassette: Path) -> None:
        """The test of ``cassette`` did not pass: the cassette and all its goldens count as used."""
        self.kept.add(str(cassette.resolve()))

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
            "expected": sorted(self.expected),
            "kept": sorted(self.kept),
            "deselected": self.deselected,
        }

    def merge(self, data: dict[str, Any]) -> None:
        self.counts.update(data.get("counts", {}))
        self.cassettes.update(data.get("cassettes", ()))
        self.goldens.update(data.get("goldens", ()))
        self.folders.update(data.get("folders", ()))
        self.expected.update(data.get("expected", ()))
        self.kept.update(data.get("kept", ()))
        self.deselected += int(data.get("deselected", 0))

    def unused(self) -> tuple[list[Path], list[Path]]:
        """(goldens no test compared, cassettes no test used) in the folders the run touched."""
        goldens: list[Path] = []
        cassettes: list[Path] = []
        known = self.cassettes | self.expected | self.kept
        for folder in sorted(self.folders):
            try:
                paths = sorted(Path(folder).iterdir())
            except OSError:
                continue
            for path in paths:
                resolved = str(path.resolve())
                if path.name.endswith(GOLDEN_SUFFIX):
                    if resolved not in self.goldens and self._golden_unused(path, known):
                        goldens.append(path)
                elif path.suffix in (".yaml", ".yml") and resolved not in known:
                    cassettes.append(path)
        return goldens, cassettes

    def _golden_unused(self, golden: Path, known: set[str]) -> bool:
        folder = golden.parent.resolve()
        owners = [str(folder / (stem + ext)) for stem in _cassette_stems(golden) for ext in (".yaml", ".yml")]
        if any(owner in self.kept for owner in owners):
            return False  # its test did not pass: it may not have reached the call this golden is for
        if any(owner in self.cassettes for owner in owners):
            return True  # its cassette was replayed, yet nothing compared this golden
        return not any(owner in known for owner in owners)

    def lines(self, *, scope: RunScope, root: Path, prune: bool = False) -> list[str]:
        """The summary lines; with ``prune`` (and a run ``scope`` allows it) the unused files are deleted."""
        c = self.counts
        if not (self.cassettes or any(c[name] for name in _COUNTERS)):
            return []
        out = [
            f"cassettes: {c['cassettes_replayed']} replayed, {c['cassettes_recorded']} recorded",
            _goldens_line(c),
            f"secrets scrubbed: {c['secrets_scrubbed']}",
        ]
        refusal = scope.refusal(deselected=self.deselected)
        if scope.covers_every_test(deselected=self.deselected):
            goldens, cassettes = self.unused()
            delete = prune and refusal is None
            verb = ", deleted" if delete and (goldens or cassettes) else ""
            out.append(f"unused goldens: {len(goldens)}{verb if goldens else ''}" + _listing(goldens, root))
            out.append(f"orphan cassettes: {len(cassettes)}{verb if cassettes else ''}" + _listing(cassettes, root))
            if delete:
                for path in (*goldens, *cassettes):
                    path.unlink(missing_ok=True)
        if prune and refusal is not None:
            out.append(f"pruned: nothing ({refusal})")
        return out


@dataclass
class RunScope:
    """How much of the suite a run covered: may it list unused files, may it delete them?

    Judged by the process that prints the summary; under pytest-xdist that is
    the controller, which receives every worker's test and collection reports,
    while deselections happen in the workers and arrive in their :class:`Tally`.

    - Listing needs every test: a test that was not selected (``-k``, ``-m``,
      node ids, ``--lf``), was deselected (``--deselect``, any plugin), was not
      collected (a collection error) or did not finish (``-x``, ``--maxfail``,
      Ctrl-C) would leave its files looking unused.
    - Deleting needs more: a run of the whole suite (``some_paths``: paths were
      named, or pytest started below the rootdir; a folder is shared by the
      modules of one name, and the others may not have run), with no failure
      or error (exit status 0). A failing test's files are kept already
      (:meth:`Tally.keep`), but a failing run is a poor witness (a broken
      fixture or conftest, a half-done refactoring), and "only a complete,
      green run prunes" is a rule users can predict. Skipped and xfailed tests
      do not stop pruning (suites skip by platform or optional dependency);
      their files are kept.
    """

    narrowed: bool = False
    some_paths: bool = False
    collected: int = 0
    collect_errors: int = 0
    finished: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    exitstatus: int = 0

    def covers_every_test(self, *, deselected: int) -> bool:
        return not (self.narrowed or deselected or self.collect_errors) and len(self.finished) >= self.collected

    def refusal(self, *, deselected: int) -> str | None:
        """Why nothing may be deleted, or None."""
        if not self.covers_every_test(deselected=deselected):
            return _SUBSET
        if self.some_paths:
            return "paths were named or pytest started in a subfolder; only a run of the whole suite prunes"
        if self.failed:
            n = len(self.failed)
            return f"{n} test{'s' if n != 1 else ''} failed or errored; only a run where every test passes prunes"
        if self.exitstatus != 0:
            return f"the run ended with exit status {self.exitstatus}; only a run where every test passes prunes"
        return None


def _goldens_line(c: Counter[str]) -> str:
    line = f"goldens: {c['goldens_matched']} matched, {c['goldens_written']} written, {c['goldens_updated']} updated"
    if c["goldens_differs"]:
        line += f", {c['goldens_differs']} differing"
    if c["goldens_missing"]:
        line += f", {c['goldens_missing']} missing"
    if c["goldens_unreadable"]:
        line += f", {c['goldens_unreadable']} unreadable"
    return line


def _cassette_stems(golden: Path) -> list[str]:
    """``case.chunks.jsonl`` → [``case``]; ``case.2.chunks.jsonl`` → [``case.2``, ``case``] (a later call's golden)."""
    stem = golden.name[: -len(GOLDEN_SUFFIX)]
    head, dot, call = stem.rpartition(".")
    return [stem, head] if dot and call.isdigit() and int(call) > 1 else [stem]


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
