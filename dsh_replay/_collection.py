"""Cassette-driven tests: every cassette with ``dsh_replay:`` metadata is a test item.

With ``dsh_replay_collect = true``, a cassette under the cassette folder is
replayed through the adapter of its route (built-in, ``[tool.dsh_replay.routes]``
or the plugin YAML) and compared with its golden — no test function needed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._exceptions import DshReplayError
from ._golden import golden_path_for
from ._replay import CaseResult, replay_case
from ._report import Tally
from ._routes import RouteTable
from ._settings import Settings

__all__ = ["CassetteFile", "CassetteItem", "has_metadata"]


# Our top-level key at the start of a line, in block style, plain or quoted.
_TOP_LEVEL_KEY = re.compile(rb"\n(?:dsh_replay|\"dsh_replay\"|'dsh_replay')[ \t]*:")


def has_metadata(path: Path) -> bool:
    """Does this YAML file have our top-level ``dsh_replay:`` key, wherever it is?

    The file is read in blocks, not parsed: a directory may hold large cassettes
    and plain vcrpy ones. A file that cannot be read counts as a case, so that
    loading it reports why instead of the file being skipped in silence.
    """
    try:
        with path.open("rb") as fh:
            # The file's start (after a BOM) is a line start; a key cut by a block
            # edge is found with the end of the block before it.
            text = b"\n" + fh.read(1 << 16).removeprefix(b"\xef\xbb\xbf")
            while not _TOP_LEVEL_KEY.search(text):
                block = fh.read(1 << 16)
                if not block:
                    return False
                text = text[-64:] + block
    except OSError:
        return True
    return True


class CaseFailed(Exception):
    """A cassette case did not pass; the message says why."""


class CassetteFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield CassetteItem.from_parent(self, name=self.path.stem)


class CassetteItem(pytest.Item):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_marker("dsh_replay_case")

    def runtest(self) -> None:
        config = self.config
        settings: Settings = config.stash[SETTINGS_KEY]
        tally: Tally = config.stash[TALLY_KEY]
        try:
            routes = routes_for(config, settings)
        except DshReplayError as exc:
            raise CaseFailed(str(exc)) from None
        result: CaseResult = asyncio.run(
            replay_case(
                self.path, routes, fragmentation=settings.fragmentation, speed=settings.speed,
                update_golden=settings.update_golden,
            )
        )
        for call in range(1, max(1, len(result.outcomes)) + 1):
            tally.use(self.path, golden_path_for(self.path, call))
        if result.outcomes:
            tally.counts["cassettes_replayed"] += 1
        if result.golden:
            tally.counts[f"goldens_{result.golden}"] += 1
        if not result.ok:
            raise CaseFailed(f"{result.route} case {self.path}:\n{result.problem}")

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
