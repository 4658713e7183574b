"""The plugin's options, resolved once per run into typed values.

Every option has an ini twin; the command line wins. A bad value is a
``pytest.UsageError`` that lists the valid ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from ..cassette.pacing import Fragmentation, parse_speed
from ..cassette.shard import Shard
from ..cassette.store import RecordMode
from ..errors import CassetteError

__all__ = ["Settings", "add_options"]

T = TypeVar("T")

#: what CI refuses: modes that record (verify records the live answers to compare them)
RECORDING_MODES = (RecordMode.NEW_EPISODES, RecordMode.ALL, RecordMode.REWRITE, RecordMode.VERIFY)


def add_options(parser: pytest.Parser, *, with_record_mode: bool) -> None:
    group = parser.getgroup("dsh_replay", "dsh-replay: record and replay LLM provider streams")
    if with_record_mode:
        # pytest-recording defines the same option; when it is active we read its value
        group.addoption(
            "--record-mode",
            action="store",
            default=None,
            choices=[mode.value for mode in RecordMode],
            help="record mode for cassettes: none (default: replay only), once, new_episodes, all, rewrite; "
            "verify replays, then re-records each request live elsewhere and fails on a change of shape",
        )
    group.addoption(
        "--update-golden", action="store_true", default=False,
        help="write missing and differing golden chunk files; report unused ones",
    )
    group.addoption(
        "--prune-unused", action="store_true", default=False,
        help="delete the unused goldens and orphan cassettes the summary lists (only when every test ran)",
    )
    group.addoption(
        "--replay-fragmentation", action="store", default=None, metavar="HOW",
        help="how replayed bodies are cut: recorded (default), single, bytes, random[:SEED]",
    )
    group.addoption(
        "--replay-speed", action="store", default=None, metavar="FACTOR",
        help="0 (default) replays instantly, 1 at the recorded pace, 2 twice as slow",
    )
    group.addoption(
        "--dsh-shard", action="store", default=None, metavar="K/N",
        help="run only the K-th of N shards of the collected cassette cases (a CI matrix of N jobs runs each once)",
    )
    group.addoption(
        "--dsh-strict-coverage", action="store_true", default=None,
        help="fail a test whose provider stream has event kinds its adapter neither maps nor ignores on purpose",
    )
    parser.addini("dsh_replay_strict_coverage", "fail on unmapped event kinds, as --dsh-strict-coverage (true/false)",
                  default="false")
    parser.addini("dsh_replay_record_mode", "default record mode (none, once, new_episodes, all, rewrite, verify)",
                  default="none")
    parser.addini("dsh_replay_fragmentation", "default replay fragmentation", default="recorded")
    parser.addini("dsh_replay_speed", "default replay speed factor", default="0")
    parser.addini(
        "dsh_replay_cassette_dir",
        "folder of cassettes, relative to the rootdir (default: a cassettes/ folder next to each test module; "
        "for collection: cassettes)",
        default="",
    )
    parser.addini("dsh_replay_collect", "turn every cassette with dsh_replay metadata into a test (true/false)", default="false")
    parser.addini("dsh_replay_plugins", "a plugin YAML (cordis.yml shape) registering extra routes", default="")
    parser.addini("dsh_replay_shard", "run only this shard K/N of the collected cassette cases (e.g. -o dsh_replay_shard=2/4)",
                  default="")


def ci_is_set() -> bool:
    """``CI`` set to anything but an empty/false-like value (CI services set ``CI=true``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off")


def _truth(text: str) -> bool:
    """An ini flag, spelt as pytest spells its own boolean ini values."""
    value = text.lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0", ""):
        return False
    raise ValueError(f"expected true or false (also yes/no, on/off, 1/0); got {text!r}")


def _parse(parse: Callable[[str], T], value: str, where: str) -> T:
    """``parse(value)``; a bad value is a usage error naming where it came from and the valid ones."""
    try:
        return parse(value)
    except (CassetteError, ValueError) as exc:
        raise pytest.UsageError(f"dsh-replay: {where}: {exc}") from None


#: where the controller leaves whether --record-mode was given; xdist hands the options to its workers
GIVEN_MODE_OPTION = "dsh_replay_given_record_mode"


def command_line_record_mode(config: pytest.Config) -> str | None:
    """``--record-mode`` as given on the command line (or in addopts), None when it was not given.

    Both plugins that define the option default it to None; once the run's mode
    is filled in (see ``pytest_configure``), the flag saved beside it tells.
    """
    if hasattr(config.option, GIVEN_MODE_OPTION):
        given: str | None = getattr(config.option, GIVEN_MODE_OPTION)
        return given
    value = config.getoption("record_mode", default=None)
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Settings:
    record_mode: RecordMode
    update_golden: bool
    prune_unused: bool
    fragmentation: Fragmentation
    speed: float
    cassette_dir: Path | None
    collect: bool
    plugins: Path | None
    ci: bool
    #: where ``record_mode`` came from: ``--record-mode`` or ``ini dsh_replay_record_mode``
    record_mode_from: str = "--record-mode"
    #: the replay settings the command line gave (they win over every per-test layer)
    given: frozenset[str] = frozenset()
    #: unmapped event kinds fail the test (``--dsh-strict-coverage``, ini ``dsh_replay_strict_coverage``)
    strict_coverage: bool = False
    #: the shard of the collected cassette cases this run keeps (``--dsh-shard``); None: all of them
    shard: Shard | None = None

    @property
    def record_mode_given(self) -> bool:
        """Was it the command line's? Then it wins over every per-test setting."""
        return self.record_mode_from.startswith("--")

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        def pick(option: str, ini: str) -> tuple[str, str]:
            """(value, where it came from): the command line wins over the ini file."""
            value = config.getoption(option, default=None)
            if value is not None:
                return str(value), "--" + option.replace("_", "-")
            return str(config.getini(ini)).strip(), f"ini {ini}"

        given = command_line_record_mode(config)
        if given is not None:
            mode_text, mode_from = given, "--record-mode"
        else:
            mode_text, mode_from = str(config.getini("dsh_replay_record_mode")).strip(), "ini dsh_replay_record_mode"
        record_mode = _parse(RecordMode.parse, mode_text, mode_from)
        fragmentation_text, fragmentation_from = pick("replay_fragmentation", "dsh_replay_fragmentation")
        fragmentation = _parse(Fragmentation.parse, fragmentation_text, fragmentation_from)
        speed_text, speed_from = pick("replay_speed", "dsh_replay_speed")
        speed = _parse(parse_speed, speed_text, speed_from)
        root = config.rootpath
        cassette_dir = str(config.getini("dsh_replay_cassette_dir")).strip()
        plugins = str(config.getini("dsh_replay_plugins")).strip()
        shard_text, shard_from = pick("dsh_shard", "dsh_replay_shard")
        settings = cls(
            record_mode=record_mode,
            update_golden=bool(config.getoption("update_golden", default=False)),
            prune_unused=bool(config.getoption("prune_unused", default=False)),
            fragmentation=fragmentation,
            speed=speed,
            cassette_dir=Path(os.path.normpath(root / cassette_dir)) if cassette_dir else None,
            collect=_parse(_truth, str(config.getini("dsh_replay_collect")).strip(), "ini dsh_replay_collect"),
            plugins=(root / plugins) if plugins else None,
            ci=ci_is_set(),
            record_mode_from=mode_from,
            given=frozenset(name for name, source in (("fragmentation", fragmentation_from), ("speed", speed_from))
                            if source.startswith("--")),
            strict_coverage=_parse(_truth, *pick("dsh_strict_coverage", "dsh_replay_strict_coverage")),
            shard=_parse(Shard.parse, shard_text, shard_from) if shard_text else None,
        )
        settings.refuse_in_ci()
        return settings

    def refuse_in_ci(self) -> None:
        """Stop the run when CI is set and it was asked to write (record, update or prune).

        ``once`` is the exception: it only records what is missing, so under CI
        it replays, a missing cassette fails as in ``none``, and the summary
        says so in one line (:meth:`ci_refusal`).
        """
        if not self.ci:
            return
        if self.record_mode in RECORDING_MODES or self.update_golden or self.prune_unused:
            what = (
                "--update-golden" if self.update_golden
                else "--prune-unused" if self.prune_unused
                else f"--record-mode={self.record_mode.value}"
            )
            raise pytest.UsageError(
                f"dsh-replay: {what} is refused because CI is set: CI only replays committed cassettes "
                "and goldens. Record and update locally, review the diff, and commit."
            )

    def ci_refusal(self) -> str | None:
        """The summary line saying that CI turned a recording mode into replay, or None."""
        if self.effective_mode is self.record_mode:
            return None
        asked = (
            f"--record-mode={self.record_mode.value}" if self.record_mode_from.startswith("--")
            else f"{self.record_mode_from} = {self.record_mode.value}"
        )
        return f"dsh-replay: recording refused: CI is set ({asked} ignored; CI only replays)"

    @property
    def effective_mode(self) -> RecordMode:
        """In CI, ``once`` never records: a missing cassette fails as in ``none``."""
        if self.ci and self.record_mode is RecordMode.ONCE:
            return RecordMode.NONE
        return self.record_mode
