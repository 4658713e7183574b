"""Each test's recording configuration: ini < ``dsh_replay_config`` < marker < command line.

The ``dsh_replay_config`` fixture plays the part of pytest-recording's
``vcr_config``: override it in a conftest, module or class to return a dict
(:mod:`dsh_replay.cassette.config` lists the keys). The merged configuration
is active while the test runs, so a ``use_cassette`` block in the test follows
it as the ``dsh_replay`` fixture does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from ..cassette.config import RecordingConfig, activated
from ..cassette.pacing import Fragmentation
from ..cassette.store import RecordMode
from ..errors import ConfigError
from .items import SETTINGS_KEY
from .settings import RECORDING_MODES, Settings

__all__ = ["dsh_replay_config", "dsh_replay_record_mode", "merged_configuration"]

_CONFIG_KEY = pytest.StashKey[RecordingConfig]()
#: (id of a dsh_replay_config's configuration, marker options) -> (that configuration, the merged one)
_MERGED_KEY = pytest.StashKey[dict[tuple[int, Any], tuple[RecordingConfig, RecordingConfig]]]()
_USER_CONFIGS: dict[int, tuple[object, RecordingConfig]] = {}


@pytest.fixture(scope="module")
def dsh_replay_config() -> dict[str, Any]:
    """Override to configure recording for a conftest, module or class (vcrpy's names where they exist)."""
    return {}


def _user_config(request: pytest.FixtureRequest) -> RecordingConfig:
    data = request.getfixturevalue("dsh_replay_config")
    # parsed once per dict the fixture returned, not once per test
    cached = _USER_CONFIGS.get(id(data))
    if cached is not None and cached[0] is data:
        return cached[1]
    try:
        config = RecordingConfig.from_mapping(data, "dsh_replay_config", root=request.config.rootpath)
    except ConfigError as exc:
        raise pytest.UsageError(f"dsh-replay: {request.node.nodeid}: {exc}") from None
    _USER_CONFIGS[id(data)] = (data, config)
    return config


def merged_configuration(item: pytest.Item, settings: Settings, user: RecordingConfig,
                       marker: Any) -> RecordingConfig:
    """The one configuration of ``item``: each setting from the highest layer that has it."""
    mode, source = settings.record_mode, settings.record_mode_from
    if not settings.record_mode_given:
        if marker.record_mode is not None:
            mode, source = RecordMode.parse(marker.record_mode), "@pytest.mark.dsh_replay(record_mode=...)"
        elif user.record_mode is not None:
            mode, source = user.record_mode, "dsh_replay_config record_mode"
    if settings.ci and mode is RecordMode.ONCE:
        mode = RecordMode.NONE  # as for the command line: CI replays, a missing cassette fails
    elif settings.ci and mode in RECORDING_MODES:
        pytest.fail(
            f"{item.nodeid}: {source} = {mode.value} is refused because CI is set: CI only replays committed "
            "cassettes and goldens. Record locally, review the diff, and commit.", pytrace=False,
        )
    fragmentation = settings.fragmentation
    if "fragmentation" not in settings.given:
        fragmentation = Fragmentation.parse(marker.fragmentation) if marker.fragmentation else (
            user.fragmentation or settings.fragmentation
        )
    speed = settings.speed
    if "speed" not in settings.given:
        speed = marker.speed if marker.speed is not None else (user.speed if user.speed is not None else speed)
    return dataclasses.replace(user, record_mode=mode, fragmentation=fragmentation, speed=speed,
                               cassette_dir=user.cassette_dir or settings.cassette_dir)


def configuration_of(request: pytest.FixtureRequest) -> RecordingConfig:
    """The test's configuration, merged once per test (and once per run for each set of layers)."""
    node = request.node
    if _CONFIG_KEY not in node.stash:
        from .marker import item_options

        marker, user = item_options(node), _user_config(request)
        # most tests of a suite share their layers: the ini, one dsh_replay_config, no marker
        merged = request.config.stash.setdefault(_MERGED_KEY, {})
        known = merged.get((id(user), marker))
        if known is None or known[0] is not user:
            known = merged[(id(user), marker)] = (
                user, merged_configuration(node, request.config.stash[SETTINGS_KEY], user, marker))
        node.stash[_CONFIG_KEY] = known[1]
    config: RecordingConfig = node.stash[_CONFIG_KEY]
    return config


@pytest.fixture
def dsh_replay_record_mode(request: pytest.FixtureRequest) -> str:
    """The record mode this test runs in (after the configuration layers and CI)."""
    mode = configuration_of(request).record_mode
    assert mode is not None
    return mode.value


@pytest.fixture(autouse=True)
def _dsh_replay_active_config(request: pytest.FixtureRequest) -> Iterator[None]:
    with activated(configuration_of(request)):
        yield
