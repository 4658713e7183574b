"""``dsh-replay check --shard K/N``: this job's share of the cases, for a CI matrix of N jobs.

The split is :class:`~dsh_replay.cassette.shard.Shard`'s (round robin over the
sorted keys). A case's key is its path relative to the argument it was found
under, in POSIX form: the same on every machine and in every checkout, wherever
the repository sits (``check cassettes`` and ``check ./cassettes/`` agree). A
file named as an argument is known by its name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..cassette.shard import Shard
from ..errors import ConfigError

__all__ = ["SHARD_HELP", "parse_shard", "shard_cases"]

SHARD_HELP = ("check only the K-th of N shards of the cases (round robin over their sorted paths: N jobs with "
              "1/N ... N/N check every case exactly once)")


def parse_shard(text: str | None) -> Shard | None:
    """``--shard``'s value; a bad one is a one-line usage error (exit 2) that lists the valid ones."""
    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--shard: {exc}") from None


def shard_cases(
    paths: Sequence[str], cassettes: list[Path], goldens: list[Path], shard: Shard
) -> tuple[list[Path], list[Path]]:
    """The cassettes and goldens of ``shard``, each list in its own order; cases are cassettes and goldens alike."""
    cases = [*cassettes, *goldens]
    keep = set(shard.select([_key(case, paths) for case in cases]))
    return ([path for n, path in enumerate(cassettes) if n in keep],
            [path for n, path in enumerate(goldens, start=len(cassettes)) if n in keep])


def _key(case: Path, paths: Sequence[str]) -> str:
    found = str(case)
    for name in paths:
        root = str(Path(name))  # as the walk spelt it (collect_cases walks Path(name))
        if found == root:
            return case.name
        if found.startswith(root + os.sep):
            return found[len(root) + 1 :].replace(os.sep, "/")
    return case.name  # pragma: no cover - every case was found under one of the paths
