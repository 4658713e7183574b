"""Cassettes that several tests share through the marker's ``cassette=``, recorded without loss.

Re-recording (``rewrite``, ``all``) starts a test's cassette afresh. When
several tests name one cassette, the first of them to write it in a run starts
it afresh and each later one adds its interactions after the earlier ones, so
the file ends up holding every test's recording in test order, as a replay of
all of them needs. A run that deselects one of them may not re-record the
cassette: the deselected test's recording would be dropped. Under pytest-xdist the tests of one cassette may run in
different processes at once, each writing its own version of the file: a
recording there would keep only the last writer's, so it is refused.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from ..cassette.store import RecordMode


def real_name(path: str | os.PathLike[str]) -> str:
    """The real path of ``path`` (links followed), asked of the file system once per absolute path in a run.

    A test's cassette and goldens are looked up under their real paths several times
    (who shares them, what was used, what was written), for every test: keyed by
    the text of the path, which a ``Path`` made afresh each time would compute again.
    """
    name = os.fspath(path)
    return _real_absolute(name) if os.path.isabs(name) else os.path.realpath(name)  # a relative one follows the cwd


@functools.lru_cache(maxsize=16384)
def _real_absolute(name: str) -> str:
    folder, base = os.path.split(name)
    if base in ("", ".", "..") or os.path.islink(name):
        return os.path.realpath(name)
    # a folder's cassettes and goldens share its real path: one lstat for each of them, not one per part
    return os.path.join(_real_folder(folder), base)


@functools.lru_cache(maxsize=4096)
def _real_folder(name: str) -> str:
    return os.path.realpath(name)


__all__ = ["SharedCassettes", "real_name"]


class SharedCassettes:
    """Which cassettes the collected tests share, and which of them this run has written afresh."""

    def __init__(self) -> None:
        self._owners: dict[str, list[str]] = {}
        self._written: set[str] = set()
        self._deselected: dict[str, list[str]] = {}

    def collected(self, uses: list[tuple[Path, str]]) -> None:
        """The (cassette named in a marker, test node id) pairs of the collected tests."""
        owners: dict[str, list[str]] = {}
        for path, nodeid in uses:
            owners.setdefault(real_name(path), []).append(nodeid)
        self._owners = {path: nodes for path, nodes in owners.items() if len(nodes) > 1}

    def deselected(self, uses: list[tuple[Path, str]]) -> None:
        """Tests that name a cassette in their marker but were deselected (``-k``, ``--deselect``, ``-m``)."""
        for path, nodeid in uses:
            self._deselected.setdefault(real_name(path), []).append(nodeid)

    def owners(self, path: Path) -> list[str]:
        """The tests that share ``path`` ([] when only one test uses it)."""
        return self._owners.get(real_name(path), [])

    def appends(self, path: Path, mode: RecordMode) -> bool:
        """Whether a test re-recording ``path`` in ``mode`` adds to what an earlier test of the run wrote."""
        return mode in (RecordMode.REWRITE, RecordMode.ALL) and real_name(path) in self._written

    def wrote(self, path: Path) -> None:
        if self.owners(path):
            self._written.add(real_name(path))

    def refusal(self, path: Path, mode: RecordMode, nodeid: str, *, xdist: bool) -> str | None:
        """Why this test may not record into its shared cassette in this run, or None."""
        if not self._deselected and not self._owners:
            return None  # no test of the run shares a cassette (most runs): nothing to look up
        absent = self._deselected.get(real_name(path), [])
        if absent and mode in (RecordMode.REWRITE, RecordMode.ALL):
            return (
                f"cassette {path} is shared with {len(absent)} deselected test(s) ({', '.join(absent[:3])}"
                f"{', …' if len(absent) > 3 else ''}): re-recording it (--record-mode={mode.value}) would drop "
                "their recordings. Re-record it in a run that selects every test using it."
            )
        owners = self.owners(path)
        if not xdist or not owners or mode is RecordMode.NONE or (mode is RecordMode.ONCE and path.exists()):
            return None
        others = ", ".join(node for node in owners if node != nodeid)
        return (
            f"cassette {path} is shared by {len(owners)} tests (marker cassette=; also {others}): "
            f"recording it (--record-mode={mode.value}) under pytest-xdist would let the workers overwrite "
            "each other's recordings. Record these tests in one process (-p no:xdist, or -n 0), "
            "then replay them with -n as usual."
        )
