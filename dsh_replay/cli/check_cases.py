"""The cases of ``dsh-replay check`` (and of ``serve`` and ``report``): the cassettes and goldens under some paths."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..cassette.files import cassette_kind, has_metadata
from ..cassette.golden import GOLDEN_SUFFIX
from ..errors import CassetteError, DshReplayError

if TYPE_CHECKING:
    from ..adapters.route_table import RouteTable
    from ..cassette.inferred import Inference
    from ..cassette.store import Cassette

__all__ = ["Cases", "PlainCases", "claim_goldens", "collect_cases", "find_cases", "read_plain_cases", "sorted_paths",
           "uncovered", "unreadable_folder"]


class Cases(NamedTuple):
    """What ``check`` found under its paths."""

    cassettes: list[Path]
    #: goldens without a cassette
    goldens: list[Path]
    #: YAML files without dsh_replay metadata
    skipped: list[Path]
    #: folders that could not be listed, and why
    unreadable: list[tuple[Path, str]]


def find_cases(paths: Sequence[str]) -> tuple[list[Path], list[Path], list[Path]]:
    """(cassettes with metadata, goldens without a cassette, YAML files without metadata) under ``paths``.

    A YAML file given by name is a case even without metadata: its row then says what is missing.
    A folder that cannot be listed raises ``DshReplayError`` naming it: what it holds would be missed.
    """
    found = collect_cases(paths)
    if found.unreadable:
        raise DshReplayError(unreadable_folder(*found.unreadable[0]))
    return found.cassettes, found.goldens, found.skipped


def collect_cases(paths: Sequence[str]) -> Cases:
    """Every case under ``paths``, and the folders there that could not be listed (``check`` shows them as rows)."""
    found = Cases([], [], [], [])
    goldens: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            yamls, chunk_files = _files_under(path, found.unreadable)
            for yaml_file in yamls:
                (found.cassettes if has_metadata(yaml_file) else found.skipped).append(yaml_file)
            goldens += chunk_files
        elif path.is_file():
            (goldens if path.name.endswith(GOLDEN_SUFFIX) else found.cassettes).append(path)
        else:
            raise DshReplayError(_not_a_case(path))
    found.goldens.extend(uncovered(goldens, found.cassettes))
    return found


def _not_a_case(path: Path) -> str:
    """Why a path named on the command line is neither a file nor a folder."""
    if path.is_symlink():
        return f"{path}: a link to nothing that exists (its target is missing, or the links make a loop)"
    if path.exists():
        return f"{path}: not a file or a folder (a device, a pipe or a socket); name cassette files or folders"
    return f"{path}: no such file or folder"


def uncovered(goldens: Sequence[Path], cassettes: Sequence[Path]) -> list[Path]:
    """The goldens of ``goldens`` that belong to none of ``cassettes`` (``a.chunks.jsonl``, ``a.2.chunks.jsonl``)."""
    covered = {p.with_suffix("") for p in cassettes}
    return [g for g in goldens if Path(str(g)[: -len(GOLDEN_SUFFIX)]).with_suffix("") not in covered
            and Path(str(g)[: -len(GOLDEN_SUFFIX)]) not in covered]


class PlainCases(NamedTuple):
    """Plain vcrpy cassettes read in place as cases (:mod:`dsh_replay.cassette.inferred`)."""

    #: path -> the case in memory, or why the file holds a call that cannot be read as one (its row fails)
    cases: dict[Path, Cassette | DshReplayError]
    #: the plain cassettes that hold no call to read
    skipped: list[Path]


def read_plain_cases(plain: Sequence[Path], routes: RouteTable, inference: Inference | None) -> PlainCases:
    """The files of ``plain`` (YAML files without our metadata) that ``inference`` reads as cases."""
    found = PlainCases({}, [])
    if inference is None or not inference.enabled:
        return found._replace(skipped=list(plain))
    from ..cassette.inferred import NotACase, read_plain_case

    for path in plain:
        try:
            found.cases[path] = read_plain_case(path, routes, inference)
        except NotACase:
            found.skipped.append(path)
        except DshReplayError as exc:
            found.cases[path] = exc
    return found


def claim_goldens(plain: PlainCases, goldens: Sequence[Path]) -> tuple[PlainCases, list[Path]]:
    """The skipped YAML files whose golden is among ``goldens`` made cases again: (plain cases, the others).

    A golden beside a file that is no case would pass alone, rules checked and
    nothing replayed, so an emptied, damaged or re-encoded cassette would read
    as green. Each of them is a case instead: a plain vcrpy cassette fails its
    row saying how to read it (its golden was written reading it in place); any
    other file is returned, to be replayed as a file named on the command line
    is, whose row then says what is wrong with it.
    """
    if not plain.skipped:  # nearly every run: nothing to pair with the goldens
        return plain, []
    stems = {Path(str(g)[: -len(GOLDEN_SUFFIX)]) for g in goldens}
    claimed = [path for path in plain.skipped if path.with_suffix("") in stems]
    if not claimed:
        return plain, []
    cases, others = dict(plain.cases), []
    for path in claimed:
        if cassette_kind(path) == "vcrpy":
            cases[path] = CassetteError(
                f"{path} is a plain vcrpy cassette with a golden beside it, not read as a case: pass --route ROUTE "
                "or name its host in [tool.dsh_replay.hosts], as when the golden was written")
        else:
            others.append(path)
    return PlainCases(cases, [path for path in plain.skipped if path not in claimed]), others


def _files_under(folder: Path, unreadable: list[tuple[Path, str]]) -> tuple[list[Path], list[Path]]:
    """(YAML files, golden files) anywhere under ``folder``, each list sorted as paths sort.

    One walk for both, where a glob per suffix would walk the tree three times;
    like ``rglob``, it does not descend into linked folders. Unlike ``rglob``
    (and ``os.walk`` left to itself), a folder it cannot list is not passed
    over in silence: it goes into ``unreadable`` with the reason, and the walk
    goes on.
    """
    def note(exc: OSError) -> None:
        unreadable.append((Path(exc.filename), exc.strerror or str(exc)))

    yamls: list[str] = []
    goldens: list[str] = []
    for root, folders, names in os.walk(folder, onerror=note):
        # a folder named like a golden is listed too: its row then says it cannot be read
        goldens += (os.path.join(root, name) for name in folders if name.endswith(GOLDEN_SUFFIX))
        for name in names:
            if name.endswith((".yaml", ".yml")):
                found = os.path.join(root, name)
                if os.path.isfile(found):  # a link to nothing, or to a folder, is no cassette
                    yamls.append(found)
            elif name.endswith(GOLDEN_SUFFIX):
                goldens.append(os.path.join(root, name))
    return sorted_paths(yamls), sorted_paths(goldens)


def unreadable_folder(folder: Path, reason: str) -> str:
    """The one line that says a folder could not be listed, and why."""
    return f"cannot read folder {folder}: {reason}"


def sorted_paths(names: Sequence[str | Path]) -> list[Path]:
    # the order of Path objects (part by part), sorting strings: a thousand Path
    # comparisons cost more than the walk
    return [Path(name) for name in sorted(map(str, names), key=lambda name: name.split(os.sep))]
