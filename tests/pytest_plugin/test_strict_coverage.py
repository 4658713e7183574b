"""Wire coverage in the plugin: unmapped kinds in the summary; ``--dsh-strict-coverage`` (ini twin) fails on them.

The inner tests stream the shipped Ollama adapter against a loopback emulator
(recording once), then replay with the emulator gone.
"""

# ruff: noqa: RUF001 - the multiplication sign between a kind and its count is what the summary prints

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from dsh_replay.testing import ProviderEmulator, ScriptedResponse

from .helpers import ini, summary, summary_line

INNER = """
import os

import pytest

from dsh_replay import GenerateOptions, Message
from dsh_replay.adapters import OllamaAdapter


@pytest.mark.asyncio
async def test_chat(dsh_replay):
    adapter = OllamaAdapter(api_key="", base_url=os.environ.get("EMU", "http://unused.invalid"))
    chunks = await dsh_replay.stream(adapter, GenerateOptions(model="m", messages=[Message(role="user", content="hi")]))
    assert chunks[-1].reason.kind == "stop"
"""


def ndjson(*lines: dict[str, object]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


TEXT = {"message": {"role": "assistant", "content": "Hi"}, "done": False}
IMAGE = {"message": {"role": "assistant", "content": "", "images": ["iVBORw0KGgo="]}, "done": False}
DONE = {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
        "prompt_eval_count": 3, "eval_count": 2}


def response(body: bytes) -> ScriptedResponse:
    return ScriptedResponse.streaming(body, content_type="application/x-ndjson", delay=0.001)


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emu:
        monkeypatch.setenv("EMU", emu.base_url)
        yield emu


def _recorded(project: pytest.Pytester, emulator: ProviderEmulator, body: bytes) -> None:
    """``test_cov.py`` recorded once against the emulator; afterwards the emulator is unreachable."""
    project.makepyfile(test_cov=INNER)
    emulator.add("POST", "/api/chat", response(body))
    project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    emulator.stop()


def test_the_summary_names_the_cassette_and_its_unmapped_kinds(project: pytest.Pytester,
                                                                  emulator: ProviderEmulator) -> None:
    _recorded(project, emulator, ndjson(TEXT, IMAGE, DONE))
    result = project.runpytest()
    result.assert_outcomes(passed=1)  # not strict: reported, not failed
    lines = summary(result)
    start = lines.index("wire coverage: 1 stream(s), unmapped kinds in 1 cassette(s):")
    assert lines[start + 1] == "  cassettes/test_cov/test_chat.yaml: message.images ×1 (first at body line 2)"


@pytest.mark.parametrize("how", ["option", "ini"])
def test_strict_coverage_fails_the_test_naming_the_kinds(project: pytest.Pytester, emulator: ProviderEmulator,
                                                         how: str) -> None:
    _recorded(project, emulator, ndjson(TEXT, IMAGE, DONE))
    if how == "ini":
        project.makeini(ini("dsh_replay_strict_coverage = true"))
    result = project.runpytest(*(["--dsh-strict-coverage"] if how == "option" else []))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*cassettes/test_cov/test_chat.yaml: the provider sent event kinds the adapter neither maps nor ignores "
        "on purpose (--dsh-strict-coverage):",
        "*  unmapped: message.images ×1 (first at body line 2)",
    ])


def test_strict_coverage_passes_a_stream_whose_kinds_are_all_known(project: pytest.Pytester,
                                                                   emulator: ProviderEmulator) -> None:
    _recorded(project, emulator, ndjson(TEXT, DONE))
    result = project.runpytest("--dsh-strict-coverage")
    result.assert_outcomes(passed=1)
    assert summary_line(result, "wire coverage:") == "wire coverage: 1 stream(s), every kind mapped or ignored on purpose"


def test_a_collected_cassette_with_unmapped_kinds_fails_under_strict_coverage(project: pytest.Pytester,
                                                                             emulator: ProviderEmulator) -> None:
    _recorded(project, emulator, ndjson(TEXT, IMAGE, DONE))
    (project.path / "test_cov.py").unlink()  # the cassette alone, collected
    project.makeini(ini("dsh_replay_collect = true"))
    project.runpytest().assert_outcomes(passed=1)
    result = project.runpytest("--dsh-strict-coverage")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*unmapped: message.images ×1 (first at body line 2)"])


def test_a_bad_ini_value_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makeini(ini("dsh_replay_strict_coverage = sometimes"))
    project.makepyfile(test_x="def test_x():\n    pass\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*dsh-replay: ini dsh_replay_strict_coverage: expected true or false*"])
