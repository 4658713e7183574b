"""``dsh_replay_emulator``: a test records against a scripted provider it sets up itself, no subprocess."""

from __future__ import annotations

import pytest
import yaml

from .helpers import golden_lines, ndjson, read_lines

INNER = '''
import json

import pytest
from echo_adapter import EchoAdapter, make_options
from dsh_replay.testing import ScriptedResponse

BODY = {body!r}


@pytest.mark.asyncio
async def test_emulated(dsh_replay, dsh_replay_emulator, dsh_replay_record_mode):
    dsh_replay_emulator.add("POST", "/gen", ScriptedResponse.streaming(BODY, delay=0.002,
                                                                       content_type="application/x-ndjson"))
    adapter = EchoAdapter(api_key="sk-test-emulated-0123456789", base_url=dsh_replay_emulator.base_url)
    await dsh_replay.stream(adapter, make_options("hi"))
    asked = len(dsh_replay_emulator.requests)
    print("EMULATOR-REQUESTS", dsh_replay_record_mode, asked)
'''


def test_a_recording_through_the_emulator_fixture_is_marked_emulated_and_replays_without_it(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_emu=INNER.format(body=ndjson("Hel", "lo")))
    recorded = project.runpytest("--record-mode=once", "-s")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(["*EMULATOR-REQUESTS once 1*"])
    folder = project.path / "cassettes" / "test_emu"
    metadata = yaml.safe_load((folder / "test_emulated.yaml").read_text())["dsh_replay"]
    assert metadata["emulated"] is True
    assert read_lines(folder / "test_emulated.chunks.jsonl") == golden_lines("Hel", "lo")

    replayed = project.runpytest("-s")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*EMULATOR-REQUESTS none 0*"])  # the cassette answered


def test_a_recording_that_never_asks_the_emulator_is_not_marked(project: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from .helpers import IMPORTS, echo_test, provider, streaming

    project.makepyfile(test_real=IMPORTS + echo_test("test_real", "a", body="assert dsh_replay_emulator.requests == []")
                       .replace("(dsh_replay)", "(dsh_replay, dsh_replay_emulator)"))
    with provider(monkeypatch, streaming(ndjson("A"))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    metadata = yaml.safe_load((project.path / "cassettes" / "test_real" / "test_real.yaml").read_text())["dsh_replay"]
    assert "emulated" not in metadata
