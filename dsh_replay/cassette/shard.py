"""Shards: the cases of one run split over N jobs (a CI matrix), each case in exactly one.

Theory of operation. A case is known by its *key*: a path in POSIX form,
relative to something every machine agrees on (``dsh-replay check``: the
argument the case was found under; pytest: the rootdir, i.e. the node id).
The keys are sorted by code point and dealt round robin: the case at 0-based
position ``p`` of the sorted list belongs to shard ``p % N + 1``. So

- every case is in exactly one of the N shards, and together they hold all;
- the shards differ in size by at most one case (1,044 cases in 4 shards are
  4 x 261);
- the split depends on nothing but the keys: not on the file system's listing
  order, the locale, ``PYTHONHASHSEED`` or the Python version.

Why not a hash of each key modulo N, which would keep a case in its shard
when others are added? Because the slowest shard sets the wall time of the
matrix, and a hash only balances on average: 1,044 cases over 4 shards land
261 +- 14 each, and 8 cases over 4 shards leave a shard empty about four
times in ten. What dealing gives up (a case added early in the order moves
the cases after it to the next shard) costs nothing here: every job of a run
splits the same commit's cases the same way, and nothing is kept per shard.

Sans-I/O: keys in, positions out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Shard"]

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
#: the most shards whose names a message lists one by one
_LISTED = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Shard:
    """The ``index``-th (1-based) of ``total`` shards."""

    index: int
    total: int

    def __post_init__(self) -> None:
        if self.total < 1:
            raise ValueError(f"there is no shard {self}: N is 1 or more (e.g. 2/4 is the second of 4 shards)")
        if not 1 <= self.index <= self.total:
            raise ValueError(f"there is no shard {self}; valid: {_valid(self.total)}")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"K/N"``; a ``ValueError`` that lists the valid values when it is not one."""
        spec = _SPEC.fullmatch(text)
        if spec is None:
            raise ValueError(f"expected K/N, the K-th of N shards with 1 <= K <= N (e.g. 2/4); got {text!r}")
        return cls(index=int(spec.group(1)), total=int(spec.group(2)))

    def select(self, keys: Sequence[str]) -> list[int]:
        """The positions in ``keys`` of this shard's cases, ascending (so the caller's order is kept)."""
        # equal keys (one file reached through two arguments) keep their order: still one shard each
        order = sorted(range(len(keys)), key=lambda position: (keys[position], position))
        return sorted(order[self.index - 1 :: self.total])

    def describe(self, selected: int, whole: int, noun: str = "cases") -> str:
        """``shard 2/4: 261 of 1,044 cases``."""
        return f"shard {self}: {selected:,} of {whole:,} {noun}"

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def _valid(total: int) -> str:
    if total <= _LISTED:
        return ", ".join(f"{k}/{total}" for k in range(1, total + 1))
    return f"1/{total}, 2/{total}, ... {total}/{total}"
