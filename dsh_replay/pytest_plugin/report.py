"""The run's tally and the terminal summary (one summary under pytest-xdist too).

Workers keep their own :class:`Tally` and ship it to the controller in
``workeroutput`` when they finish; the controller adds them up, looks for
unused goldens and orphan cassettes in the folders the run touched, and prints
the summary once.

Which files the summary may list, and ``--prune-unused`` may delete
-------------------------------------------------------------------

Only our own files, and only those no test outside the run could own:

- **Only a run of the whole suite lists anything** (:class:`RunScope`): a test
  that was not selected, was deselected, was not collected or did not finish
  could be the owner of any file (a ``cassette=`` in its marker may point into
  any folder), so a partial run lists none. Deleting needs that run green too.
- **Only folders the run touched**: those where this run's ``dsh_replay``
  tests and collected cases opened a cassette.
- **A cassette is ours** when it carries our top-level ``dsh_replay:`` metadata
  (:func:`dsh_replay.cassette.store.has_metadata`). A plain vcrpy or pytest-recording cassette beside
  ours is never an orphan, whatever its name: its tests open it in ways this
  plugin cannot see (``vcr.use_cassette(...)``, ``@pytest.mark.vcr``).
  An orphan is a cassette of ours that no collected test would open (the
  cassette each selected test would open is recorded at collection, so a
  skipped test's cassette is no orphan).
- **A golden is ours by its suffix** (``.chunks.jsonl``), but it is unused only
  when nothing compared it, no test that did not pass owns its cassette (that
  test may have stopped before the call the golden is for, :meth:`Tally.keep`),
  and its cassette (``<stem>.yaml`` or ``.yml`` beside it, where ``case.2`` may
  also be call 2 of ``case``) is

  1. one this run's tests replayed or recorded: the golden is for a call the
     test no longer makes, or the test turned goldens off; or
  2. an orphan of ours (see above): the golden goes with it; or
  3. absent, and no test of the run would open it: a leftover of a deleted test.

  Any other golden is kept: in particular one beside a cassette that is not
  ours and that no test of ours used, which we cannot tell is unused.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cassette.files import is_cassette_name, read_metadata_key
from ..cassette.golden import GOLDEN_SUFFIX
from .coverage import CoverageTally
from .shared import real_name

__all__ = ["RunScope", "Tally"]

_SUBSET = "only a run of every test can tell what is unused"
_PATHS = "paths were named or pytest started in a subfolder; only a run of the whole suite prunes"


def _is_ours(cassette: Path) -> bool:
    """A cassette this plugin may call an orphan: readable, with our metadata (never a vcrpy one)."""
    return read_metadata_key(cassette) is True

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
    "temp_files_removed",
)


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    cassettes: set[str] = field(default_factory=set)
    goldens: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    expected: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)
    #: golden path → why it was not written ("test failed", "test skipped", ...)
    unwritten: dict[str, str] = field(default_factory=dict)
    deselected: int = 0
    #: folders a test's dsh_replay_config chose: a skipped test there opens no fixture, so nothing
    #: tells which of their cassettes it owns, and they are never listed or pruned
    configured: set[str] = field(default_factory=set)
    #: wire coverage and drift of the streams replayed (see coverage.py)
    coverage: CoverageTally = field(default_factory=CoverageTally)
    #: cassettes of blocks in a recording mode that no request reached (a client we do not intercept?)
    silent: set[str] = field(default_factory=set)
    silent_since: int = field(default_factory=lambda: _engine().silent_mark() if _engine() else 0)

    def configured_folder(self, cassette: Path) -> None:
        self.configured.add(os.path.dirname(real_name(cassette)))

    def expect(self, cassette: Path) -> None:
        """A collected test will open ``cassette`` (whether or not it gets to run)."""
        self.expected.add(real_name(cassette))

    def keep(self, cassette: Path) -> None:
        """The test of ``cassette`` did not pass: the cassette and all its goldens count as used."""
        self.kept.add(real_name(cassette))

    def use(self, cassette: Path, golden: Path | None = None) -> None:
        name = real_name(cassette)
        self.cassettes.add(name)
        self.folders.add(os.path.dirname(name))
        if golden is not None:
            self.goldens.add(real_name(golden))

    def not_written(self, golden: Path, reason: str) -> None:
        """A golden the run had to write (recording, ``--update-golden``) was left as it was."""
        self.unwritten[real_name(golden)] = reason

    def to_json(self) -> dict[str, Any]:
        self.take_silent()
        return {
            "counts": dict(self.counts),
            "cassettes": sorted(self.cassettes),
            "goldens": sorted(self.goldens),
            "folders": sorted(self.folders),
            "expected": sorted(self.expected),
            "kept": sorted(self.kept),
            "unwritten": dict(sorted(self.unwritten.items())),
            "deselected": self.deselected,
            "configured": sorted(self.configured),
            "coverage": self.coverage.to_json(),
            "silent": sorted(self.silent),
        }

    def merge(self, data: dict[str, Any]) -> None:
        self.counts.update(data.get("counts", {}))
        self.cassettes.update(data.get("cassettes", ()))
        self.goldens.update(data.get("goldens", ()))
        self.folders.update(data.get("folders", ()))
        self.expected.update(data.get("expected", ()))
        self.kept.update(data.get("kept", ()))
        self.unwritten.update(data.get("unwritten", {}))
        self.deselected += int(data.get("deselected", 0))
        self.configured.update(data.get("configured", ()))
        self.coverage.merge(data.get("coverage", {}))
        self.silent.update(data.get("silent", ()))

    def take_silent(self) -> None:
        """Add the cassettes of this run's blocks that recorded nothing, as the engine noted them when
        they ended (inside tests, where no pytest object is at hand); taken from it, so that a pytest
        run inside a test (pytester) and the run around it each report their own."""
        engine = _engine()
        if engine is not None:
            self.silent.update(engine.take_silent(self.silent_since))

    def unused(self) -> tuple[list[Path], list[Path]]:
        """(goldens no test compared, cassettes of ours no test used) in the folders the run touched.

        The rules are in the module docstring; only a run of the whole suite may ask.
        """
        goldens: list[Path] = []
        cassettes: list[Path] = []
        known = self.cassettes | self.expected | self.kept
        for folder in sorted(self.folders - self.configured):  # real paths: an entry's is its own unless a link
            try:
                with os.scandir(folder) as listing:
                    entries = sorted(listing, key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                try:
                    if not entry.is_file():
                        continue
                    real = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
                except OSError:
                    continue
                if entry.name.endswith(GOLDEN_SUFFIX):
                    if real not in self.goldens and self._golden_unused(folder, entry.name, known):
                        goldens.append(Path(entry.path))
                elif is_cassette_name(entry.name) and real not in known and _is_ours(Path(entry.path)):
                    cassettes.append(Path(entry.path))
        return goldens, cassettes

    def _golden_unused(self, folder: str, golden: str, known: set[str]) -> bool:
        names = [os.path.join(folder, stem + ext) for stem in _cassette_stems(golden) for ext in (".yaml", ".yml")]
        if any(name in self.kept for name in names):
            return False  # its test did not pass: it may not have reached the call this golden is for
        if any(name in self.cassettes for name in names):
            return True  # rule 1: its cassette was replayed or recorded, yet nothing compared this golden
        if any(name in known for name in names):
            return False  # a test of the run would open its cassette, and may yet compare it
        # rule 2 (every cassette it may belong to is an orphan of ours) or rule 3 (there is none);
        # a cassette that is not ours (vcrpy, pytest-recording) keeps it
        return all(_is_ours(Path(name)) for name in names if os.path.exists(name))

    def lines(self, *, scope: RunScope, root: Path, prune: bool = False) -> list[str]:
        """The summary lines; with ``prune`` (and a run ``scope`` allows it) the unused files are deleted."""
        c = self.counts
        self.take_silent()
        if not (self.cassettes or self.unwritten or self.silent or any(c[name] for name in _COUNTERS)):
            return []
        out = [
            f"cassettes: {c['cassettes_replayed']} replayed, {c['cassettes_recorded']} recorded",
            _goldens_line(c),
            *_unwritten_lines(self.unwritten, root),
            f"secrets scrubbed: {c['secrets_scrubbed']}",
        ]
        if self.silent:
            silent = sorted(Path(path) for path in self.silent)
            out.insert(1, f"cassettes recorded nothing: {len(silent)}" + _listing(silent, root))
        if c["temp_files_removed"]:
            out.append(f"temp files of killed writes removed: {c['temp_files_removed']}")
        out += self.coverage.lines(root)
        refusal = scope.refusal(deselected=self.deselected)
        if scope.listing_refusal(deselected=self.deselected) is None:
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

    - Listing needs a run of the whole suite. A test that was not selected
      (``-k``, ``-m``, node ids, ``--lf``), was deselected (``--deselect``, any
      plugin), was not collected (a collection error, named paths, ``--ignore``,
      pytest started below the rootdir) or did not finish (``-x``,
      ``--maxfail``, Ctrl-C) would leave its files looking unused: the files of
      its folder, and any file its marker's ``cassette=`` names elsewhere.
      A module skipped at collection (an optional dependency missing) counts
      as not collected: its tests' files are listed and deleted by no run
      until it is collected again.
    - Deleting needs that run green too: no failure or error (exit status 0).
      A failing test's files are kept already (:meth:`Tally.keep`), but a
      failing run is a poor witness (a broken fixture or conftest, a half-done
      refactoring), and "only a complete, green run prunes" is a rule users can
      predict. Skipped and xfailed tests do not stop pruning (suites skip by
      platform or optional dependency); their files are kept.
    """

    narrowed: bool = False
    some_paths: bool = False
    collected: int = 0
    collect_errors: int = 0
    #: modules (or packages) skipped while collecting (``pytest.skip(allow_module_level=True)``,
    #: ``importorskip``): their tests were never collected, so nothing says which files they own
    skipped_collectors: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    exitstatus: int = 0

    def covers_every_test(self, *, deselected: int) -> bool:
        return not (self.narrowed or deselected or self.collect_errors) and len(self.finished) >= self.collected

    def listing_refusal(self, *, deselected: int) -> str | None:
        """Why unused files may not even be listed, or None."""
        if self.skipped_collectors:
            n, names = len(self.skipped_collectors), ", ".join(sorted(self.skipped_collectors)[:5])
            more = ", …" if n > 5 else ""
            return (f"{n} module{'s' if n != 1 else ''} skipped at collection ({names}{more}): "
                    f"the files of {'their' if n != 1 else 'its'} tests cannot be told from unused ones")
        if not self.covers_every_test(deselected=deselected):
            return _SUBSET
        if self.some_paths:
            return _PATHS
        return None

    def refusal(self, *, deselected: int) -> str | None:
        """Why nothing may be deleted, or None."""
        why = self.listing_refusal(deselected=deselected)
        if why is not None:
            return why
        if self.failed:
            n = len(self.failed)
            return f"{n} test{'s' if n != 1 else ''} failed or errored; only a run where every test passes prunes"
        if self.exitstatus != 0:
            return f"the run ended with exit status {self.exitstatus}; only a run where every test passes prunes"
        return None


def _engine() -> Any:
    """The cassette engine's interception module, if loaded (it is not imported for this: not
    loaded, no block ran)."""
    return sys.modules.get("dsh_replay.cassette.intercept")


def _goldens_line(c: Counter[str]) -> str:
    line = f"goldens: {c['goldens_matched']} matched, {c['goldens_written']} written, {c['goldens_updated']} updated"
    if c["goldens_differs"]:
        line += f", {c['goldens_differs']} differing"
    if c["goldens_missing"]:
        line += f", {c['goldens_missing']} missing"
    if c["goldens_unreadable"]:
        line += f", {c['goldens_unreadable']} unreadable"
    return line


def _unwritten_lines(unwritten: dict[str, str], root: Path) -> list[str]:
    """``goldens: 2 not written (test failed): a.chunks.jsonl, b.chunks.jsonl``, one line per reason."""
    by_reason: dict[str, list[Path]] = {}
    for path, reason in sorted(unwritten.items()):
        by_reason.setdefault(reason, []).append(Path(path))
    return [
        f"goldens: {len(paths)} not written ({reason}): {_names(paths, root)}"
        for reason, paths in sorted(by_reason.items())
    ]


def _cassette_stems(golden: str) -> list[str]:
    """``case.chunks.jsonl`` → [``case``]; ``case.2.chunks.jsonl`` → [``case.2``, ``case``] (a later call's golden)."""
    stem = golden[: -len(GOLDEN_SUFFIX)]
    head, dot, call = stem.rpartition(".")
    return [stem, head] if dot and call.isdigit() and int(call) > 1 else [stem]


def _listing(paths: list[Path], root: Path) -> str:
    return f" ({_names(paths, root)})" if paths else ""


def _names(paths: list[Path], root: Path) -> str:
    """The first ten paths relative to the rootdir, and how many more."""
    shown = [_relative(p, root) for p in paths[:10]]
    more = f", … (+{len(paths) - 10})" if len(paths) > 10 else ""
    return ", ".join(shown) + more


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
