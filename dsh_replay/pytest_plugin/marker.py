"""The marker ``@pytest.mark.dsh_replay(...)`` and the cassette file a test uses.

The marker's keyword arguments map one-to-one onto :class:`MarkerOptions`; a bad
one stops the run with a ``pytest.UsageError`` listing the valid ones. A test's
cassette is ``<cassette dir>/<module>/<test name>.yaml`` unless the marker names
one (:func:`cassette_path_for`).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..cassette.files import is_cassette_name
from ..cassette.pacing import Fragmentation, parse_speed
from ..cassette.store import RecordMode
from ..errors import CassetteError
from .settings import Settings

__all__ = ["MarkerOptions", "cassette_name", "cassette_path_for", "item_cassette", "item_options"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkerOptions:
    """What ``@pytest.mark.dsh_replay(...)`` may set for one test."""

    cassette: str | None = None
    route: str | None = None
    record_mode: str | None = None
    fragmentation: str | None = None
    speed: float | None = None
    allow_interleaving: bool = False
    json_arguments: bool = True
    golden: bool = True
    allow_unplayed: bool = False
    expect_error: bool = False

    @classmethod
    def from_marker(cls, marker: pytest.Mark | None, where: str) -> MarkerOptions:
        if marker is None:
            return cls()
        valid = [f.name for f in dataclasses.fields(cls)]
        if marker.args:
            raise pytest.UsageError(
                f"{where}: @pytest.mark.dsh_replay takes keyword arguments only ({', '.join(valid)}); "
                f"got positional {marker.args!r}"
            )
        unknown = sorted(set(marker.kwargs) - set(valid))
        if unknown:
            close = [m for name in unknown for m in difflib.get_close_matches(name, valid, n=1)]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise pytest.UsageError(
                f"{where}: unknown @pytest.mark.dsh_replay argument(s) {', '.join(unknown)}{hint}; "
                f"valid: {', '.join(valid)}"
            )
        options = cls(**marker.kwargs)
        options.check(where)
        return options

    def check(self, where: str) -> None:
        for name in ("allow_interleaving", "json_arguments", "golden", "allow_unplayed", "expect_error"):
            if not isinstance(getattr(self, name), bool):
                raise pytest.UsageError(f"{where}: dsh_replay marker argument {name} must be True or False")
        if self.record_mode is not None:
            try:
                RecordMode.parse(self.record_mode)
            except CassetteError as exc:
                raise pytest.UsageError(f"{where}: dsh_replay marker argument record_mode: {exc}") from None
        for name in ("cassette", "route"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise pytest.UsageError(f"{where}: dsh_replay marker argument {name} must be a non-empty string")
        problem = _cassette_name_problem(self.cassette) if self.cassette is not None else None
        if problem:
            raise pytest.UsageError(f"{where}: dsh_replay marker argument cassette={self.cassette!r} {problem}")
        if self.fragmentation is not None:
            if not isinstance(self.fragmentation, str):
                raise pytest.UsageError(
                    f"{where}: dsh_replay marker argument fragmentation must be a string: "
                    "recorded, single, bytes, random or random:SEED"
                )
            try:
                Fragmentation.parse(self.fragmentation)
            except CassetteError as exc:
                raise pytest.UsageError(f"{where}: dsh_replay marker: {exc}") from None
        if self.speed is not None:
            if isinstance(self.speed, str):  # parse_speed takes text too; the marker wants a number
                raise pytest.UsageError(f"{where}: dsh_replay marker argument speed must be a number, got {self.speed!r}")
            try:
                parse_speed(self.speed)
            except CassetteError as exc:
                raise pytest.UsageError(f"{where}: dsh_replay marker argument {exc}") from None


#: an item's marker and what it reads as; its derived cassette and the options it was derived from
_OPTIONS = pytest.StashKey[tuple["pytest.Mark | None", MarkerOptions]]()
_CASSETTE = pytest.StashKey[tuple[MarkerOptions, Path]]()


def item_options(item: pytest.Item) -> MarkerOptions:
    """The test's ``@pytest.mark.dsh_replay`` options, read once per marker.

    Asked at collection and again by each layer of a test's set-up; a marker
    added later (``request.applymarker``, another plugin's hook) is read anew.
    """
    marker = item.get_closest_marker("dsh_replay")
    cached = item.stash.get(_OPTIONS, None)
    if cached is not None and cached[0] is marker:
        return cached[1]
    options = MarkerOptions.from_marker(marker, item.nodeid)
    item.stash[_OPTIONS] = (marker, options)
    return options


def item_cassette(item: pytest.Item, settings: Settings, options: MarkerOptions | None = None) -> Path:
    """The test's cassette from the run's settings (no per-test ``cassette_dir``), found once per marker.

    ``options``: the item's, when the caller has just read them.
    """
    if options is None:
        options = item_options(item)
    cached = item.stash.get(_CASSETTE, None)
    if cached is not None and cached[0] is options:
        return cached[1]
    path = cassette_path_for(item, settings, options)
    item.stash[_CASSETTE] = (options, path)
    return path


def cassette_name(node: pytest.Item) -> str:
    """``Class.test_name[param]`` with characters unsafe in file names replaced, as pytest-recording does."""
    cls = getattr(node, "cls", None)
    name = f"{cls.__name__}.{node.name}" if cls is not None else node.name
    for char in r"<>?%*:|\"'/\\":
        name = name.replace(char, "-")
    return name


def _cassette_name_problem(name: str) -> str | None:
    """Why the marker's ``cassette`` would not name a file inside the cassette folder (None: it does).

    An absolute path is documented, and taken as it is; a name or relative path
    must stay inside the folder and end in a file name.
    """
    if Path(name).is_absolute():
        return None
    pieces = (name.replace(os.altsep, os.sep) if os.altsep else name).split(os.sep)
    if ".." in pieces:
        return (
            "leaves the cassette folder; a name or relative path stays inside it (no '..'), "
            "an absolute path may point anywhere"
        )
    if pieces[-1] in ("", "."):  # "sub/dir/" would become sub/dir.yaml, "." the folder's own name
        return "names a folder, not a file; end it with the cassette's name, e.g. 'sub/name'"
    return None


def cassette_path_for(item: pytest.Item, settings: Settings, options: MarkerOptions,
                      cassette_dir: Path | None = None) -> Path:
    """``<cassette dir>/<module stem>/<cassette name>.yaml`` for one test.

    The cassette dir is ``cassettes/`` next to the test module unless the ini
    ``dsh_replay_cassette_dir`` (or ``cassette_dir``, the test's configuration)
    names one; the marker's ``cassette`` may be a name, a relative path or an
    absolute path.
    """
    # os.path on text and one Path at the end: the same path as Path's operators, built for every test
    module = os.fspath(item.path)
    stem = os.path.splitext(os.path.basename(module))[0]
    base = cassette_dir or settings.cassette_dir
    folder = os.path.join(base, stem) if base is not None else os.path.join(os.path.dirname(module), "cassettes", stem)
    name = options.cassette or cassette_name(item)
    path = name if os.path.isabs(name) else os.path.join(folder, name)
    # a name with no suffix ("case", "case.", ".hidden") gets one
    return Path(path if is_cassette_name(path) else path + ".yaml")
