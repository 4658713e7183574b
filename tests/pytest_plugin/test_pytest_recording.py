"""Installed alongside pytest-recording, which defines ``--record-mode`` too."""

from __future__ import annotations

import pytest

from dsh_replay.testing import ScriptedResponse

from .helpers import IMPORTS, echo_test, ndjson, provider, streaming, summary

VCR_TEST = """
import json
import os
import urllib.request

import pytest


@pytest.mark.vcr
def test_vcr():
    with urllib.request.urlopen(os.environ["EMU"] + "/ping") as response:
        assert json.load(response) == {"pong": True}
"""


@pytest.fixture
def both(project: pytest.Pytester) -> pytest.Pytester:
    """One module with a pytest-recording test and a dsh_replay test; a module with ours alone."""
    project.makepyfile(test_both=VCR_TEST + IMPORTS + echo_test(), test_dsh=IMPORTS + echo_test())
    return project


def test_pytest_starts_with_both_plugins_and_both_read_record_mode(both: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    with provider(monkeypatch, streaming(ndjson("hi"))) as emu:
        emu.add("GET", "/ping", ScriptedResponse.json({"pong": True}))
        result = both.runpytest("--record-mode=once", "test_both.py")
        dead = emu.base_url
        assert sorted(r.path for r in emu.requests) == ["/gen", "/ping"]
    result.assert_outcomes(passed=2)
    plugins = next(line for line in result.outlines if line.startswith("plugins:"))
    assert "dsh-replay-" in plugins and "recording-" in plugins
    folder = both.path / "cassettes" / "test_both"
    assert sorted(p.name for p in folder.iterdir()) == ["test_echo.chunks.jsonl", "test_echo.yaml", "test_vcr.yaml"]

    # replay: the provider's port is closed now, so both plugins must replay
    monkeypatch.setenv("EMU", dead)
    result = both.runpytest("--record-mode=none", "test_both.py")
    result.assert_outcomes(passed=2)
    # a run of one file lists no unused files (test_orphans.py: pytest-recording's are never ours)
    assert summary(result) == ["cassettes: 1 replayed, 0 recorded", "goldens: 1 matched, 0 written, 0 updated", "secrets scrubbed: 0"]
    # pytest-recording's "none" is read by us too: a missing cassette is not recorded
    (folder / "test_echo.yaml").unlink()
    result = both.runpytest("--record-mode=none", "test_both.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_echo.yaml does not exist and the record mode is 'none'*"])


def test_the_option_belongs_to_pytest_recording_when_it_is_active(both: pytest.Pytester) -> None:
    result = both.runpytest("--help")
    text = result.stdout.str()
    recording = text.index("\nrecording:")
    assert text.index("--record-mode", recording) < text.index("\n\n", recording)  # listed in its group
    ours = text.index("dsh-replay: record and replay LLM provider streams:")
    assert "--record-mode" not in text[ours : text.index("\n\n", ours)]


def test_with_no_recording_our_own_record_mode_is_used(both: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    help_text = both.runpytest("-p", "no:recording", "--help").stdout.str()
    ours = help_text.index("dsh-replay: record and replay LLM provider streams:")
    assert "--record-mode={none,once,new_episodes,all,rewrite,verify}" in help_text[ours : help_text.index("\n\n", ours)]
    with provider(monkeypatch) as emu:
        result = both.runpytest("-p", "no:recording", "--record-mode=once", "test_dsh.py")
        assert len(emu.requests) == 1
    result.assert_outcomes(passed=1)
    assert "recording-" not in next(line for line in result.outlines if line.startswith("plugins:"))
    assert (both.path / "cassettes" / "test_dsh" / "test_echo.yaml").is_file()
    result = both.runpytest("-p", "no:recording", "--record-mode=bogus", "test_dsh.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--record-mode: invalid choice: 'bogus' (choose from 'none', 'once', 'new_episodes', 'all', 'rewrite', 'verify')"])


@pytest.mark.parametrize("recording", [[], ["-p", "pytest_recording.plugin"]])
def test_with_autoload_disabled_the_plugins_named_decide(
    both: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, recording: list[str]
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    args = [*recording, "-p", "dsh_replay.pytest_plugin.hooks", "-p", "pytest_asyncio.plugin", "--record-mode=once", "test_dsh.py"]
    with provider(monkeypatch) as emu:
        result = both.runpytest(*args)
        assert len(emu.requests) == 1
    result.assert_outcomes(passed=1)
    assert (both.path / "cassettes" / "test_dsh" / "test_echo.yaml").is_file()
