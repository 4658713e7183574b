"""Cassette-driven tests: every cassette with ``dsh_replay:`` metadata is a test item.

With ``dsh_replay_collect = true``, a cassette in a cassette folder is replayed
through the adapter of its route (built-in, ``[tool.dsh_replay.routes]`` or the
plugin YAML) and compared with its golden — no test function needed.

The cassette folders (:func:`is_collectable`) are the ones the fixture writes
to: ``dsh_replay_cassette_dir`` when the ini names one, and the default layout,
a ``cassettes/`` folder beside the test modules (``tests/cassettes/test_x/``,
as pytest-recording lays them out) or at the rootdir (the project's own
``cassettes/<route>/``). pytest offers each file once to
``pytest_collect_file``; a file reached twice anyway (overlapping arguments, a
symlinked folder) becomes one item (:class:`Collected`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..adapters.route_table import RouteTable
from ..cassette.golden import golden_path_for
from ..cassette.replay import CaseResult, replay_case
from ..cassette.store import Cassette, RecordMode
from ..errors import DshReplayError
from ..wire.coverage import collect_coverage
from .coverage import strict_failure, verify_case
from .report import Tally
from .settings import Settings

__all__ = ["CassetteFile", "CassetteItem", "Collected", "is_collectable", "only_cassettes_under", "plain_case"]


CASSETTES = "cassettes"


def is_collectable(path: Path, *, root: Path, cassette_dir: Path | None) -> bool:
    """Is this YAML file in a cassette folder: under ``cassette_dir``, or a ``cassettes/`` folder below ``root``?

    Only the place is judged here; whether it is ours is :func:`has_metadata`'s call.
    """
    if path.suffix not in (".yaml", ".yml"):
        return False
    if cassette_dir is not None and cassette_dir in path.parents:
        return True
    try:
        folders = path.relative_to(root).parts[:-1]
    except ValueError:
        return False  # above the rootdir, any folder could be called cassettes
    return CASSETTES in folders


#: what a cassette folder holds: cassettes (YAML; vcrpy's JSON ones too), goldens (JSON lines), git's own files
_CASSETTE_FOLDER_FILES = (".yaml", ".yml", ".json", ".jsonl")
_GIT_FILES = (".git",)


def only_cassettes_under(folder: Path, *, root: Path, cassette_dir: Path | None) -> bool:
    """Is ``folder`` a cassette folder holding, at any depth, nothing but cassettes and goldens?

    Then pytest need not walk it: it would offer each of its files to every
    plugin's collection hooks (about 0.1 ms a file, so a suite of 500
    recorded tests, 1,000 files, paid 50 ms a run) and none would make a
    test of them. One other file anywhere in it (a ``conftest.py``, a test
    module, a README), a link, or a folder that cannot be listed, and pytest
    walks it as before.
    """
    if folder != cassette_dir and (folder.name != CASSETTES or folder == root or root not in folder.parents):
        return False
    pending = [os.fspath(folder)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        return False
                    if entry.is_dir():
                        pending.append(entry.path)
                    elif not entry.name.endswith(_CASSETTE_FOLDER_FILES) and not entry.name.startswith(_GIT_FILES):
                        return False
        except OSError:  # not a folder, or one that cannot be listed: pytest's walk says what it says
            return False
    return True


class Collected:
    """The cassettes made into items this session, by resolved path: each one once."""

    def __init__(self) -> None:
        self._seen: set[Path] = set()

    def first_time(self, path: Path) -> bool:
        resolved = path.resolve()
        if resolved in self._seen:
            return False
        self._seen.add(resolved)
        return True


class CaseFailed(Exception):
    """A cassette case did not pass; the message says why."""


class CassetteFile(pytest.File):
    #: a plain vcrpy cassette read as a case (or why it cannot be one); None for one of ours
    case: Cassette | DshReplayError | None = None

    def collect(self) -> Iterator[pytest.Item]:
        yield CassetteItem.from_parent(self, name=self.path.stem)


def plain_case(config: pytest.Config, settings: Settings, path: Path) -> Cassette | DshReplayError | None:
    """The plain vcrpy cassette at ``path`` read as a case when ``[tool.dsh_replay.hosts]`` names its hosts.

    ``None``: not a case (no hosts table, or no streamed LLM call to a host it names). A call that
    cannot be read is returned as the error, and its item fails with it.
    """
    from ..cassette.inferred import Inference, NotACase, read_plain_case

    try:
        routes = routes_for(config, settings)
    except DshReplayError as exc:  # the items of our own cassettes fail with it; this one too
        return exc
    if not routes.hosts:
        return None
    try:
        return read_plain_case(path, routes, Inference(hosts=routes.hosts))
    except NotACase:
        return None
    except DshReplayError as exc:
        return exc


class CassetteItem(pytest.Item):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_marker("dsh_replay_case")

    def runtest(self) -> None:
        config = self.config
        settings: Settings = config.stash[SETTINGS_KEY]
        tally: Tally = config.stash[TALLY_KEY]
        case = self.parent.case if isinstance(self.parent, CassetteFile) else None
        if isinstance(case, DshReplayError):
            raise CaseFailed(str(case))
        try:
            routes = routes_for(config, settings)
        except DshReplayError as exc:
            raise CaseFailed(str(exc)) from None
        with collect_coverage() as seen:
            result: CaseResult = asyncio.run(
                replay_case(
                    self.path, routes, fragmentation=settings.fragmentation, speed=settings.speed,
                    update_golden=settings.update_golden, cassette=case,
                )
            )
        unmapped = tally.coverage.add_collected(self.path, seen)
        for call in range(1, max(1, len(result.outcomes)) + 1):
            tally.use(self.path, golden_path_for(self.path, call))
        if result.outcomes:
            tally.counts["cassettes_replayed"] += 1
        if result.golden:
            tally.counts[f"goldens_{result.golden}"] += 1
        if not result.ok:
            raise CaseFailed(f"{result.route} case {self.path}:\n{result.problem}")
        if unmapped and settings.strict_coverage:
            raise CaseFailed(strict_failure(self.path, unmapped))
        if settings.record_mode is RecordMode.VERIFY:
            if case is not None:
                pytest.skip(f"{self.path} is a plain vcrpy cassette read in place: verify re-records a "
                            "dsh-replay cassette; dsh-replay import makes it one")
            verify_case(config, tally, self.path, routes)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"cassette {self.path.name}"


def routes_for(config: pytest.Config, settings: Settings) -> RouteTable:
    """The session's route table, built once."""
    table = config.stash.get(ROUTES_KEY, None)
    if table is None:
        table = RouteTable.load(pyproject=config.rootpath / "pyproject.toml", plugins=settings.plugins)
        config.stash[ROUTES_KEY] = table
    return table


SETTINGS_KEY = pytest.StashKey[Settings]()
TALLY_KEY = pytest.StashKey[Tally]()
ROUTES_KEY = pytest.StashKey[RouteTable]()
COLLECTED_KEY = pytest.StashKey[Collected]()
