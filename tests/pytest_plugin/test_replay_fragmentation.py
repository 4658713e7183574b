"""``--replay-fragmentation`` and its ini twin ``dsh_replay_fragmentation``.

The inner adapter wraps its decoder to log the size of every piece it is fed,
so each test sees how the replayed body was cut — and that the chunks, hence
the golden recorded under ``recorded``, stay the same whatever the cut.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import INI, golden_lines, ini, ndjson, provider, read_lines, streaming

TEXTS = ("Hé", "llo ✓", "!")  # multi-byte characters: a byte-wise cut splits them
BODY = ndjson(*TEXTS)

SPY = '''
import json
import os

import pytest
from echo_adapter import EchoAdapter, make_adapter, make_options

SIZES = []


class Spy:
    """Logs the size of each piece of body the adapter is fed."""

    def __init__(self, inner):
        self.inner = inner

    def feed(self, data):
        SIZES.append(len(data))
        return self.inner.feed(data)

    def flush(self):
        return self.inner.flush()


class SpyAdapter(EchoAdapter):
    def decoder(self):
        return Spy(super().decoder())


@pytest.mark.asyncio
async def test_echo(dsh_replay):
    adapter = SpyAdapter(api_key="sk-test-0123456789abcdef", base_url=make_adapter().base_url)
    chunks = await dsh_replay.stream(adapter, make_options())
    assert dsh_replay.turn.text == "Héllo ✓!"
    with open(os.environ["SIZES_OUT"], "w") as fh:
        json.dump(SIZES, fh)
'''


@pytest.fixture
def recorded(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The spy test recorded (one fragment per line); returns its golden."""
    project.makepyfile(test_frag=SPY)
    monkeypatch.setenv("SIZES_OUT", str(project.path / "sizes.json"))
    with provider(monkeypatch, streaming(BODY)):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    golden = project.path / "cassettes" / "test_frag" / "test_echo.chunks.jsonl"
    assert read_lines(golden) == golden_lines(*TEXTS)
    return golden


def sizes(pytester: pytest.Pytester) -> list[int]:
    return json.loads((pytester.path / "sizes.json").read_text())


LINES = [len(line) for line in BODY.splitlines(keepends=True)]


def test_recorded_is_the_default_and_replays_the_recorded_fragments(project: pytest.Pytester, recorded: Path) -> None:
    assert sizes(project) == LINES  # what the adapter saw while recording: one line per fragment
    golden = recorded.read_bytes()
    project.runpytest().assert_outcomes(passed=1)
    assert sizes(project) == LINES
    project.runpytest("--replay-fragmentation=recorded").assert_outcomes(passed=1)
    assert sizes(project) == LINES
    assert recorded.read_bytes() == golden


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("bytes", lambda: [1] * len(BODY)),
        ("single", lambda: [len(BODY)]),
    ],
)
def test_bytes_and_single_give_the_same_golden(project: pytest.Pytester, recorded: Path, how: str, expected) -> None:
    golden = recorded.read_bytes()
    result = project.runpytest(f"--replay-fragmentation={how}")
    result.assert_outcomes(passed=1)
    assert sizes(project) == expected()
    assert recorded.read_bytes() == golden


def test_random_with_a_seed_cuts_reproducibly_and_gives_the_same_golden(project: pytest.Pytester, recorded: Path) -> None:
    golden = recorded.read_bytes()
    project.runpytest("--replay-fragmentation=random:3").assert_outcomes(passed=1)
    first = sizes(project)
    assert sum(first) == len(BODY) and first not in (LINES, [len(BODY)], [1] * len(BODY))
    project.runpytest("--replay-fragmentation=random:3").assert_outcomes(passed=1)
    assert sizes(project) == first
    project.runpytest("--replay-fragmentation=random:4").assert_outcomes(passed=1)
    assert sizes(project) != first
    assert recorded.read_bytes() == golden


def test_the_ini_twin_is_used_and_the_command_line_wins(project: pytest.Pytester, recorded: Path) -> None:
    project.makeini(ini("dsh_replay_fragmentation = bytes"))
    project.runpytest().assert_outcomes(passed=1)
    assert sizes(project) == [1] * len(BODY)
    project.runpytest("--replay-fragmentation=single").assert_outcomes(passed=1)
    assert sizes(project) == [len(BODY)]


def test_the_command_line_wins_over_the_marker(project: pytest.Pytester, recorded: Path) -> None:
    source = (project.path / "test_frag.py").read_text()
    (project.path / "test_frag.py").write_text(
        source.replace("@pytest.mark.asyncio", "@pytest.mark.asyncio\n@pytest.mark.dsh_replay(fragmentation='single')")
    )
    project.runpytest().assert_outcomes(passed=1)
    assert sizes(project) == [len(BODY)]
    project.runpytest("--replay-fragmentation=bytes").assert_outcomes(passed=1)
    assert sizes(project) == [1] * len(BODY)


@pytest.mark.parametrize("bad", ["lines", "random:x", "bytes:2", ""])
def test_a_bad_value_is_a_usage_error_listing_the_valid_ones(project: pytest.Pytester, bad: str) -> None:
    result = project.runpytest(f"--replay-fragmentation={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*dsh-replay: --replay-fragmentation: unknown fragmentation {bad!r}; valid: recorded, single, bytes, random, random:SEED*"]
    )


def test_a_bad_ini_value_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makeini(INI + "dsh_replay_fragmentation = halves\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*dsh-replay: ini dsh_replay_fragmentation: unknown fragmentation 'halves'; valid: *"])
