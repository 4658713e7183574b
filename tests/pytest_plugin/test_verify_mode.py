"""``--record-mode=verify``: replay, then re-send each request live and fail on a change of shape.

The provider is a loopback emulator scripted to answer the recording first and
the verification after: unchanged, with a new kind, or with a tool call where
there was text. The recorded cassette is never written.
"""

# ruff: noqa: RUF001 - the multiplication sign between a kind and its count is what the summary prints

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.testing import ProviderEmulator, ScriptedResponse

from .helpers import ini, summary
from .test_strict_coverage import DONE, IMAGE, INNER, TEXT, emulator, ndjson, response

__all__ = ["emulator"]  # the fixture, shared

CALL = {"message": {"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        "done": False}
CASSETTE = Path("cassettes") / "test_cov" / "test_chat.yaml"


#: pytest-recording, when installed, owns --record-mode and knows no "verify": ours is used here;
#: with it, the ini twin says verify (test_the_ini_twin_verifies_beside_pytest_recording)
OURS = ("-p", "no:recording")


def _verify(project: pytest.Pytester, emulator: ProviderEmulator, fresh: bytes,
            *args: str) -> pytest.RunResult:
    """Record ``test_cov.py`` once, then run it in verify mode while the provider answers ``fresh``."""
    project.makepyfile(test_cov=INNER)
    emulator.add("POST", "/api/chat", response(ndjson(TEXT, DONE)), response(fresh))  # in order, the last stays
    project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    recorded = (project.path / CASSETTE).read_bytes()
    result = project.runpytest(*(args or (*OURS, "--record-mode=verify")))
    assert (project.path / CASSETTE).read_bytes() == recorded  # never written
    return result


def _drift_lines(result: pytest.RunResult) -> list[str]:
    """The summary's ``drift:`` line and the indented lines under it."""
    lines = summary(result)
    start = next(i for i, line in enumerate(lines) if line.startswith("drift: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


def test_an_unchanged_answer_passes_and_says_so(project: pytest.Pytester, emulator: ProviderEmulator) -> None:
    result = _verify(project, emulator, ndjson(TEXT, DONE))
    result.assert_outcomes(passed=1)
    assert len(emulator.requests) == 2  # the recording's, then the verification's
    lines = _drift_lines(result)
    assert lines[0].startswith("drift: 1 cassette(s) re-recorded into ")
    assert lines[0].endswith("dsh-replay-verify; 0 with a breaking change")
    assert lines[1:] == ["  cassettes/test_cov/test_chat.yaml: unchanged"]
    folder = Path(lines[0].split(" into ")[1].split(";")[0])
    assert (folder / CASSETTE).is_file()  # the fresh recording, under pytest's temporary folder


def test_a_new_unmapped_kind_fails_the_test(project: pytest.Pytester, emulator: ProviderEmulator) -> None:
    result = _verify(project, emulator, ndjson(TEXT, IMAGE, DONE))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the live answer changed shape (--record-mode=verify; recorded into *",
                                 "*  new kind: message.images ×1 (first at body line 2), unmapped"])
    assert _drift_lines(result)[1] == "  cassettes/test_cov/test_chat.yaml: BREAKING"


def test_a_provider_that_answers_an_error_status_is_not_checked_rather_than_changed(
    project: pytest.Pytester, emulator: ProviderEmulator,
) -> None:
    project.makepyfile(test_cov=INNER)
    emulator.add("POST", "/api/chat", response(ndjson(TEXT, DONE)),
                 ScriptedResponse.json({"error": "unauthorized"}, status=401))
    project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    result = project.runpytest(*OURS, "--record-mode=verify")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not checked against the live provider (--record-mode=verify): http://127.0.0.1:*"
                                 " answered status 401 (route 'ollama'), so no stream was compared*"])
    assert "changed shape" not in result.stdout.str()
    assert "vanished kind" not in result.stdout.str()


def test_a_tool_call_where_there_was_text_fails_the_test(project: pytest.Pytester, emulator: ProviderEmulator) -> None:
    result = _verify(project, emulator, ndjson(CALL, DONE))
    result.assert_outcomes(failed=1)
    lines = _drift_lines(result)
    assert "    vanished kind: message.content" in lines
    assert "    new kind: message.tool_calls ×1 (first at body line 1), mapped" in lines
    assert ("    chunk shape changed: text; finish stop; usage inputTokens, outputTokens -> tool-call get_weather; "
            "finish tool-calls; usage inputTokens, outputTokens") in lines


def test_a_renamed_field_is_reported_but_does_not_fail(project: pytest.Pytester, emulator: ProviderEmulator) -> None:
    renamed = {**DONE, "eval_duration_ns": 12}
    result = _verify(project, emulator, ndjson(TEXT, renamed))
    result.assert_outcomes(passed=1)
    assert "    new field in done: eval_duration_ns" in _drift_lines(result)


def test_the_ini_twin_verifies_beside_pytest_recording(project: pytest.Pytester, emulator: ProviderEmulator) -> None:
    result = _verify(project, emulator, ndjson(CALL, DONE), "-o", "dsh_replay_record_mode=verify")
    result.assert_outcomes(failed=1)
    assert _drift_lines(result)[1] == "  cassettes/test_cov/test_chat.yaml: BREAKING"


def test_verify_is_refused_under_ci(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_cov=INNER)
    monkeypatch.setenv("CI", "true")
    result = project.runpytest(*OURS, "--record-mode=verify")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--record-mode=verify is refused because CI is set*"])


def test_a_collected_cassette_is_verified_through_its_route(project: pytest.Pytester,
                                                           emulator: ProviderEmulator) -> None:
    project.makepyfile(test_cov=INNER)
    emulator.add("POST", "/api/chat", response(ndjson(TEXT, DONE)), response(ndjson(CALL, DONE)))
    project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    (project.path / "test_cov.py").unlink()
    project.makeini(ini("dsh_replay_collect = true"))
    result = project.runpytest(*OURS, "--record-mode=verify")  # the cassette's base URL is the emulator's
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*chunk shape changed: text; finish stop*-> tool-call get_weather*"])
