"""The pytest plugin (entry point ``pytest11: dsh_replay``): thin hooks.

Options are parsed once into :class:`Settings`; the fixture, the collected
cassette items and the summary keep their logic in their own modules.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from ._collection import SETTINGS_KEY, TALLY_KEY, CassetteFile, has_metadata
from ._fixture import DshReplay, MarkerOptions, cassette_path_for
from ._report import Tally
from ._settings import Settings, add_options

_DESELECTED = pytest.StashKey[int]()
_CALL_FAILED = pytest.StashKey[bool]()


def _pytest_recording_active(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Will pytest-recording (which defines ``--record-mode`` too) be loaded in this run?"""
    if pluginmanager.has_plugin("recording") or pluginmanager.has_plugin("pytest_recording.plugin"):
        return True
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        # only plugins named with -p load, in order; one named after us is not seen here
        return False
    return importlib.util.find_spec("pytest_recording") is not None and not pluginmanager.is_blocked("recording")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    # pytest-recording owns --record-mode when installed; both plugins then read its value
    add_options(parser, with_record_mode=not _pytest_recording_active(pluginmanager))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "dsh_replay(cassette=None, route=None, fragmentation=None, speed=None, allow_interleaving=False, "
        "json_arguments=True, golden=True, allow_unplayed=False, expect_error=False): "
        "options of the dsh_replay fixture for this test",
    )
    config.addinivalue_line("markers", "dsh_replay_case: a test item replaying one cassette (collected)")
    config.stash[SETTINGS_KEY] = Settings.from_config(config)
    config.stash[TALLY_KEY] = Tally()
    config.stash[_DESELECTED] = 0
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(), "dsh_replay.xdist")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    settings = parent.config.stash[SETTINGS_KEY]
    if not settings.collect or file_path.suffix not in (".yaml", ".yml"):
        return None
    root = settings.cassette_dir or parent.config.rootpath / "cassettes"
    if root not in file_path.parents or not has_metadata(file_path):
        return None
    return CassetteFile.from_parent(parent, path=file_path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("dsh_replay")
        if marker is not None:
            MarkerOptions.from_marker(marker, item.nodeid)  # a bad argument stops the run here


def pytest_collection_finish(session: pytest.Session) -> None:
    # The cassette each selected test would open is no orphan, even if the test is skipped.
    # Every test counts, not only ours: pytest-recording names its cassettes the same way.
    settings, tally = session.config.stash[SETTINGS_KEY], session.config.stash[TALLY_KEY]
    for item in session.items:
        if isinstance(item, pytest.Function):
            options = MarkerOptions.from_marker(item.get_closest_marker("dsh_replay"), item.nodeid)
            tally.expect(cassette_path_for(item, settings, options))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        config = items[0].config
        config.stash[_DESELECTED] = config.stash.get(_DESELECTED, 0) + len(items)


@pytest.fixture
def dsh_replay(request: pytest.FixtureRequest) -> Iterator[DshReplay]:
    """Run an adapter inside this test's cassette: ``chunks = await dsh_replay.stream(adapter, options)``."""
    config = request.config
    replay = DshReplay(request.node, config.stash[SETTINGS_KEY], config.stash[TALLY_KEY])
    yield replay
    replay.close(test_failed=request.node.stash.get(_CALL_FAILED, False))


# -- the summary, once, also under pytest-xdist -----------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["dsh_replay"] = session.config.stash[TALLY_KEY].to_json()


class _XdistController:
    """Hooks that exist only under pytest-xdist (pluggy refuses unknown hook names)."""

    def pytest_testnodedown(self, node: object, error: object) -> None:
        output = getattr(node, "workeroutput", {}) or {}
        config = getattr(node, "config", None)
        if config is not None and "dsh_replay" in output:
            config.stash[TALLY_KEY].merge(output["dsh_replay"])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    # unused goldens and orphan cassettes only mean something when every test of a folder ran
    complete = not (
        config.stash.get(_DESELECTED, 0)
        or config.getoption("keyword")
        or config.getoption("markexpr")
        or any("::" in str(arg) for arg in config.args)
    )
    settings = config.stash[SETTINGS_KEY]
    lines = config.stash[TALLY_KEY].lines(complete_run=complete, root=config.rootpath, prune=settings.prune_unused)
    if lines:
        terminalreporter.write_sep("-", "dsh-replay")
        for line in lines:
            terminalreporter.write_line(line)
