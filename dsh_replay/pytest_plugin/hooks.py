"""The pytest plugin (entry point ``pytest11: dsh_replay``): thin hooks.

Options are parsed once into :class:`Settings`; the fixture, the collected
cassette items and the summary keep their logic in their own modules.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..cassette.files import has_metadata, remove_stale_temp_files
from .fixture import DshReplay
from .items import (
    COLLECTED_KEY,
    SETTINGS_KEY,
    TALLY_KEY,
    CassetteFile,
    CassetteItem,
    Collected,
    is_collectable,
    only_cassettes_under,
    plain_case,
)
from .marker import MarkerOptions, item_cassette, item_options

# the fixtures of per-test configuration are the plugin's: re-exported for pytest to find here
from .per_test import _dsh_replay_active_config as _dsh_replay_active_config
from .per_test import configuration_of
from .per_test import dsh_replay_config as dsh_replay_config
from .per_test import dsh_replay_record_mode as dsh_replay_record_mode
from .report import RunScope, Tally
from .settings import GIVEN_MODE_OPTION, Settings, add_options
from .sharding import register as register_shard
from .shared import SharedCassettes

_SCOPE = pytest.StashKey[RunScope]()
_STARTED = pytest.StashKey[float]()
_STARTED_OPTION = "dsh_replay_started"
SHARED_KEY = pytest.StashKey[SharedCassettes]()
_CALL_OUTCOME = pytest.StashKey[str]()


#: the other plugins that define ``--record-mode``: (entry point name, plugin module, package)
_RECORD_MODE_OWNERS = (
    ("recording", "pytest_recording.plugin", "pytest_recording"),
    ("cassetter", "cassetter.pytest_plugin", "cassetter"),
)


def _pytest_recording_active(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Will pytest-recording or cassetter (which define ``--record-mode`` too) be loaded in this run?"""
    return any(_loads(pluginmanager, *owner) for owner in _RECORD_MODE_OWNERS)


def _loads(pluginmanager: pytest.PytestPluginManager, name: str, module: str, package: str) -> bool:
    if pluginmanager.has_plugin(name) or pluginmanager.has_plugin(module):
        return True
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        # only plugins named with -p load, in order; one named after us is not seen here
        return False
    return importlib.util.find_spec(package) is not None and not pluginmanager.is_blocked(name)


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    # pytest-recording owns --record-mode when installed; both plugins then read its value
    add_options(parser, with_record_mode=not _pytest_recording_active(pluginmanager))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "dsh_replay(cassette=None, route=None, record_mode=None, fragmentation=None, speed=None, allow_interleaving=False, "
        "json_arguments=True, golden=True, allow_unplayed=False, expect_error=False): "
        "options of the dsh_replay fixture for this test",
    )
    config.addinivalue_line("markers", "dsh_replay_case: a test item replaying one cassette (collected)")
    settings = config.stash[SETTINGS_KEY] = Settings.from_config(config)
    # whether it was given travels to xdist's workers with the options
    setattr(config.option, GIVEN_MODE_OPTION, settings.record_mode.value if settings.record_mode_given else None)
    if not _pytest_recording_active(config.pluginmanager) and config.option.record_mode is None:
        # our own option answers config.getoption("--record-mode") with the run's mode; pytest-recording's
        # is left alone, so its cassettes keep the mode it gives them
        config.option.record_mode = settings.record_mode.value
    config.stash[TALLY_KEY] = Tally()
    config.stash[_STARTED] = time.time()
    config.stash[COLLECTED_KEY] = Collected()
    config.stash[SHARED_KEY] = SharedCassettes()
    if getattr(config, "workerinput", None) is None:
        config.stash[_SCOPE] = RunScope()
        config.pluginmanager.register(_RunWatcher(config), "dsh_replay.run")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(), "dsh_replay.xdist")
    register_shard(config, settings.shard)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    settings = config.stash[SETTINGS_KEY]
    if not settings.collect or not is_collectable(file_path, root=config.rootpath, cassette_dir=settings.cassette_dir):
        return None
    if has_metadata(file_path):
        case = None
    elif (case := plain_case(config, settings, file_path)) is None:
        return None
    if not config.stash[COLLECTED_KEY].first_time(file_path):
        return None
    collected: CassetteFile = CassetteFile.from_parent(parent, path=file_path)
    collected.case = case
    return collected


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    settings = config.stash[SETTINGS_KEY]
    # with cassette items off, a folder of nothing but cassettes and goldens holds no test
    if not settings.collect and only_cassettes_under(collection_path, root=config.rootpath,
                                                     cassette_dir=settings.cassette_dir):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    read = [(item, item_options(item)) for item in items]  # a bad argument stops the run here
    settings = config.stash[SETTINGS_KEY]
    ours = [(item, options) for item, options in read if _uses_fixture(item)]
    _refuse_shared_derived_cassettes(settings, ours)
    config.stash[SHARED_KEY].collected(_named_cassettes(settings, items))


def _uses_fixture(item: pytest.Item) -> bool:
    return isinstance(item, pytest.Function) and "dsh_replay" in item.fixturenames


def _named_cassettes(settings: Settings, items: list[pytest.Item]) -> list[tuple[Path, str]]:
    """(cassette, node id) of each test whose marker names its cassette."""
    return [
        (item_cassette(item, settings), item.nodeid)
        for item in items
        if _uses_fixture(item) and item_options(item).cassette
    ]


def _refuse_shared_derived_cassettes(settings: Settings, ours: list[tuple[pytest.Item, MarkerOptions]]) -> None:
    """Two tests whose names map to one cassette file would overwrite each other's recording.

    Names are made file-safe (``a/b`` and ``a:b`` both become ``a-b``), and with one
    cassette dir, modules of the same name share a folder. A cassette named in
    the marker may be shared on purpose; a derived one never is.
    """
    owners: dict[Path, str] = {}
    for item, options in ours:
        if options.cassette is not None:
            continue
        path = item_cassette(item, settings, options)
        other = owners.setdefault(path, item.nodeid)
        if other != item.nodeid:
            raise pytest.UsageError(
                f"dsh-replay: {other} and {item.nodeid} would both record into {path}; give one of them "
                "its own cassette with @pytest.mark.dsh_replay(cassette=...) or rename it"
            )


def pytest_collection_finish(session: pytest.Session) -> None:
    # The cassette each selected test would open is no orphan, even if the test is skipped.
    # Every test counts, not only ours: pytest-recording names its cassettes the same way.
    settings, tally = session.config.stash[SETTINGS_KEY], session.config.stash[TALLY_KEY]
    folders: set[Path] = set()
    for item in session.items:
        cassette = _cassette_of(item, settings)
        if cassette is not None:
            tally.expect(cassette)
            folders.add(cassette.parent)
    _remove_stale_temp_files(session.config, folders)


def _remove_stale_temp_files(config: pytest.Config, folders: set[Path]) -> None:
    """A write killed mid-way (kill -9, a power cut) left its temp file beside the cassette, where
    ``git add`` would pick it up: remove those older than this run in the folders its tests use."""
    workerinput = getattr(config, "workerinput", None)
    # under xdist the controller's start: a worker starting later must not take a sibling's file for stale
    started = workerinput.get(_STARTED_OPTION) if workerinput is not None else None
    started = started if isinstance(started, float) else config.stash[_STARTED]
    for folder in sorted(folders):
        removed = remove_stale_temp_files(folder, older_than=started, recursive=False)
        config.stash[TALLY_KEY].counts["temp_files_removed"] += len(removed)


def _cassette_of(item: pytest.Item, settings: Settings) -> Path | None:
    if isinstance(item, CassetteItem):
        return item.path
    if isinstance(item, pytest.Function):
        return item_cassette(item, settings)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        # an xpass (not strict) is a pass; an xfail is reported as skipped, named here for the summary
        item.stash[_CALL_OUTCOME] = "xfailed" if report.skipped and hasattr(report, "wasxfail") else report.outcome
    if report.failed or report.skipped:  # skipped includes xfailed
        # it may have stopped before some of its calls: none of its files is unused
        cassette = _cassette_of(item, item.config.stash[SETTINGS_KEY])
        if cassette is not None:
            item.config.stash[TALLY_KEY].keep(cassette)
    return report


def pytest_deselected(items: list[pytest.Item]) -> None:
    # under xdist this runs in the workers only; their tallies carry the count to the controller
    if items:
        config = items[0].config
        config.stash[TALLY_KEY].deselected += len(items)
        config.stash[SHARED_KEY].deselected(_named_cassettes(config.stash[SETTINGS_KEY], items))


@pytest.fixture
def dsh_replay(request: pytest.FixtureRequest) -> Iterator[DshReplay]:
    """Run an adapter inside this test's cassette: ``chunks = await dsh_replay.stream(adapter, options)``."""
    config = request.config
    replay = DshReplay(request.node, config.stash[SETTINGS_KEY], config.stash[TALLY_KEY], configuration_of(request),
                       shared=config.stash[SHARED_KEY])
    yield replay
    # failed, skipped, xfailed, or never got to a report (Ctrl-C): not passed, so nothing is written
    replay.close(outcome=request.node.stash.get(_CALL_OUTCOME, "interrupted"))


# -- the summary, once, also under pytest-xdist -----------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["dsh_replay"] = session.config.stash[TALLY_KEY].to_json()


class _XdistController:
    """Hooks that exist only under pytest-xdist (pluggy refuses unknown hook names)."""

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[_STARTED_OPTION] = node.config.stash[_STARTED]

    def pytest_testnodedown(self, node: object, error: object) -> None:
        output = getattr(node, "workeroutput", {}) or {}
        config = getattr(node, "config", None)
        if config is not None and "dsh_replay" in output:
            config.stash[TALLY_KEY].merge(output["dsh_replay"])


class _RunWatcher:
    """Fills the :class:`RunScope` in the process that prints the summary.

    Under xdist that is the controller: it collects nothing itself, but every
    worker's test and collection reports are replayed to its hooks.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.scope = config.stash[_SCOPE]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.scope.collect_errors += 1
        elif report.skipped:
            self.scope.skipped_collectors.add(report.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.scope.finished.add(report.nodeid)
        if report.failed and not hasattr(report, "wasxfail"):
            self.scope.failed.add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = self.config
        self.scope.collected = session.testscollected
        self.scope.exitstatus = int(exitstatus)
        # the controller has the same options as its workers, so a selection shows here too;
        # --lf drops tests and whole files while collecting, with no deselection to count
        self.scope.narrowed = bool(
            config.getoption("keyword")
            or config.getoption("markexpr")
            or config.getoption("deselect", None)
            or config.getoption("lf", False)
            or any("::" in str(arg) for arg in config.args)
        )
        self.scope.some_paths = not _every_path(config)


def _every_path(config: pytest.Config) -> bool:
    """Did pytest start from the whole suite, not from paths named on the command line or a subfolder?

    A folder of cassettes is shared by every module of the same name (with
    ``dsh_replay_cassette_dir``, ``unit/test_api.py`` and ``e2e/test_api.py``
    both use ``test_api/``), and a marker's ``cassette=`` may point into any
    folder, so even a run of whole files can miss a folder's users: it lists
    nothing and deletes nothing. Naming the rootdir itself is the whole suite.
    """
    if any(str(arg).startswith("--ignore") for arg in config.invocation_params.args):
        return False  # --ignore, --ignore-glob on this command line (in addopts they shape the suite)
    if config.args_source is pytest.Config.ArgsSource.TESTPATHS:
        return True
    if config.args_source is pytest.Config.ArgsSource.INVOCATION_DIR:
        return config.invocation_params.dir == config.rootpath
    # `pytest path/to/project` from elsewhere: the rootdir itself, named, is the whole suite
    root = config.rootpath.resolve()
    return any("::" not in str(arg) and (config.invocation_params.dir / str(arg)).resolve() == root for arg in config.args)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    tally, settings = config.stash[TALLY_KEY], config.stash[SETTINGS_KEY]
    lines = tally.lines(scope=config.stash[_SCOPE], root=config.rootpath, prune=settings.prune_unused)
    refused = settings.ci_refusal()
    if refused is not None:
        lines.insert(0, refused)  # shown even when no test of ours ran: the flag was ignored all the same
    if lines:
        terminalreporter.write_sep("-", "dsh-replay")
        for line in lines:
            terminalreporter.write_line(line)
