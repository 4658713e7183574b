"""``--dsh-shard K/N``: this job's share of the collected cassette cases, for a CI matrix of N jobs.

Only the cassette items (:class:`~.items.CassetteItem`) are split, by node id
(relative to the rootdir, ``/``-separated: the same on every machine), with
:class:`~dsh_replay.cassette.shard.Shard`'s round robin; the other shards'
items are deselected (``pytest_deselected``, so the summary counts them and
nothing is called unused). Test functions are not split: they run in every
job. It runs after the other plugins' selection (``-k``, ``-m``, ``--deselect``),
so N jobs with the same selection split the same items.

Under xdist each worker collects and splits the same items the same way; the
controller prints the shard line from the first worker's counts.
"""

from __future__ import annotations

import pytest

from ..cassette.shard import Shard
from .items import CassetteItem

__all__ = ["ShardSelector", "register"]

_OUTPUT = "dsh_replay_shard"


class ShardSelector:
    """Registered for the run when a shard is asked for."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        #: (cases kept, cases collected), once known
        self.counts: tuple[int, int] | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        cases = [position for position, item in enumerate(items) if isinstance(item, CassetteItem)]
        kept = {cases[n] for n in self.shard.select([items[position].nodeid for position in cases])}
        dropped = set(cases) - kept
        self.counts = (len(kept), len(cases))
        if dropped:
            config.hook.pytest_deselected(items=[items[position] for position in sorted(dropped)])
            items[:] = [item for position, item in enumerate(items) if position not in dropped]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None and self.counts is not None:
            workeroutput[_OUTPUT] = list(self.counts)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        if getattr(config, "workerinput", None) is None and self.counts is not None:
            terminalreporter.write_line(f"dsh-replay: {self.shard.describe(*self.counts, noun='cassette cases')}")


class _XdistCounts:
    """The controller collects nothing: it takes the counts from a worker (xdist's hook, so only under xdist)."""

    def __init__(self, selector: ShardSelector) -> None:
        self.selector = selector

    def pytest_testnodedown(self, node: object, error: object) -> None:
        counts = (getattr(node, "workeroutput", None) or {}).get(_OUTPUT)
        if counts is not None and self.selector.counts is None:
            self.selector.counts = (int(counts[0]), int(counts[1]))


def register(config: pytest.Config, shard: Shard | None) -> None:
    """Register the selector for this run when ``shard`` is set."""
    if shard is None:
        return
    selector = ShardSelector(shard)
    config.pluginmanager.register(selector, "dsh_replay.shard")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistCounts(selector), "dsh_replay.shard.xdist")
