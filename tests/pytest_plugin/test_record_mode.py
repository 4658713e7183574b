"""``--record-mode`` and its ini twin ``dsh_replay_record_mode``, and the CI guard."""

from __future__ import annotations

import pytest
import yaml

from .helpers import (
    IMPORTS,
    echo_test,
    golden_lines,
    ini,
    ndjson,
    provider,
    read_lines,
    streaming,
    summary,
    summary_line,
)

TWO_CALLS = IMPORTS + """
import os

@pytest.mark.asyncio
async def test_echo(dsh_replay):
    await dsh_replay.stream(make_adapter(), make_options("a"))
    if os.environ.get("SECOND_CALL"):
        await dsh_replay.stream(make_adapter(), make_options("b"))
"""


@pytest.fixture
def echo(project: pytest.Pytester) -> pytest.Pytester:
    project.makepyfile(test_mode=IMPORTS + echo_test("test_echo", "a"))
    return project


def cassette_of(pytester: pytest.Pytester) -> tuple[dict, list[dict]]:
    """(metadata, interactions) of the inner test's cassette."""
    data = yaml.safe_load((pytester.path / "cassettes" / "test_mode" / "test_echo.yaml").read_text())
    return data["dsh_replay"], data["interactions"]


def bodies(interactions: list[dict]) -> list[str]:
    return [i["response"]["body"]["string"] for i in interactions]


def record(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *texts: str, args: tuple[str, ...] = ("--record-mode=once",)) -> pytest.RunResult:
    with provider(monkeypatch, streaming(ndjson(*texts))):
        return pytester.runpytest(*args)


# -- none (the default) ------------------------------------------------------------


def test_none_with_a_missing_cassette_names_the_path_and_the_command(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    with provider(monkeypatch) as emu:
        result = echo.runpytest()  # default: none
        assert emu.requests == []
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*cassette *cassettes/test_mode/test_echo.yaml does not exist and the record mode is 'none'*pytest --record-mode=once*"]
    )
    assert not (echo.path / "cassettes").exists()


def test_none_replays_without_the_network(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    record(echo, monkeypatch, "x").assert_outcomes(passed=1)
    with provider(monkeypatch) as emu:
        echo.runpytest("--record-mode=none").assert_outcomes(passed=1)
        assert emu.requests == []


# -- once ----------------------------------------------------------------------------


def test_once_records_a_missing_cassette_then_only_replays(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    with provider(monkeypatch, streaming(ndjson("one"))) as emu:
        result = echo.runpytest("--record-mode=once")
        result.assert_outcomes(passed=1)
        assert len(emu.requests) == 1
        # the cassette exists now: once replays it, even with the provider up
        result = echo.runpytest("--record-mode=once")
        result.assert_outcomes(passed=1)
        assert len(emu.requests) == 1
    assert summary_line(result, "cassettes:") == "cassettes: 1 replayed, 0 recorded"
    metadata, interactions = cassette_of(echo)
    assert metadata["route"] == "echo"
    assert metadata["options"]["messages"] == [{"role": "user", "content": "a"}]
    assert bodies(interactions) == [ndjson("one").decode()]


def test_once_refuses_a_new_request_when_the_cassette_exists(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_mode=TWO_CALLS)
    record(project, monkeypatch, "x").assert_outcomes(passed=1)
    monkeypatch.setenv("SECOND_CALL", "1")
    with provider(monkeypatch) as emu:
        result = project.runpytest("--record-mode=once")
        assert emu.requests == []
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no recorded interaction matches POST */gen*", "*changed JSON fields: msgs*"])


# -- new_episodes ---------------------------------------------------------------------


def test_new_episodes_replays_what_matches_and_records_the_rest(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_mode=TWO_CALLS)
    record(project, monkeypatch, "first").assert_outcomes(passed=1)
    monkeypatch.setenv("SECOND_CALL", "1")
    with provider(monkeypatch, streaming(ndjson("second"))) as emu:
        result = project.runpytest("--record-mode=new_episodes")
        result.assert_outcomes(passed=1)
        assert [r.json()["msgs"] for r in emu.requests] == [["b"]]  # only the new call went out
    _, interactions = cassette_of(project)
    assert bodies(interactions) == [ndjson("first").decode(), ndjson("second").decode()]
    folder = project.path / "cassettes" / "test_mode"
    assert read_lines(folder / "test_echo.chunks.jsonl") == golden_lines("first")
    assert read_lines(folder / "test_echo.2.chunks.jsonl") == golden_lines("second")
    assert summary_line(result, "goldens:") == "goldens: 1 matched, 1 written, 0 updated"
    project.runpytest().assert_outcomes(passed=1)


# -- all and rewrite ---------------------------------------------------------------------


def test_all_records_even_when_the_cassette_exists(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    record(echo, monkeypatch, "old").assert_outcomes(passed=1)
    with provider(monkeypatch, streaming(ndjson("new"))) as emu:
        result = echo.runpytest("--record-mode=all")
        result.assert_outcomes(passed=1)
        assert len(emu.requests) == 1
    assert summary_line(result, "cassettes:") == "cassettes: 0 replayed, 1 recorded"
    assert ndjson("new").decode() in bodies(cassette_of(echo)[1])
    golden = echo.path / "cassettes" / "test_mode" / "test_echo.chunks.jsonl"
    assert read_lines(golden) == golden_lines("new")


def test_a_cassette_recorded_with_all_replays(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    record(echo, monkeypatch, "old").assert_outcomes(passed=1)
    record(echo, monkeypatch, "new", args=("--record-mode=all",)).assert_outcomes(passed=1)
    assert bodies(cassette_of(echo)[1]) == [ndjson("new").decode()]  # re-recorded, not piled up
    echo.runpytest().assert_outcomes(passed=1)


def test_all_after_the_request_changed_keeps_only_what_the_test_asks_now(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the prompt changed, and the test makes one call instead of two
    project.makepyfile(test_mode=TWO_CALLS)
    monkeypatch.setenv("SECOND_CALL", "1")
    record(project, monkeypatch, "old").assert_outcomes(passed=1)
    assert len(cassette_of(project)[1]) == 2
    monkeypatch.delenv("SECOND_CALL")
    project.makepyfile(test_mode=TWO_CALLS.replace('make_options("a")', 'make_options("changed")'))
    record(project, monkeypatch, "new", args=("--record-mode=all",)).assert_outcomes(passed=1)
    metadata, interactions = cassette_of(project)
    assert bodies(interactions) == [ndjson("new").decode()]
    assert metadata["options"]["messages"][0]["content"] == "changed" and "follow_ups" not in metadata
    project.runpytest().assert_outcomes(passed=1)  # the next replay has nothing left unplayed


def test_rewrite_replaces_the_cassette(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_mode=TWO_CALLS)
    monkeypatch.setenv("SECOND_CALL", "1")
    record(project, monkeypatch, "old").assert_outcomes(passed=1)
    assert len(cassette_of(project)[1]) == 2
    monkeypatch.delenv("SECOND_CALL")
    with provider(monkeypatch, streaming(ndjson("new"))) as emu:
        result = project.runpytest("--record-mode=rewrite")
        result.assert_outcomes(passed=1)
        assert len(emu.requests) == 1
    assert bodies(cassette_of(project)[1]) == [ndjson("new").decode()]
    assert read_lines(project.path / "cassettes" / "test_mode" / "test_echo.chunks.jsonl") == golden_lines("new")
    assert summary_line(result, "goldens:") == "goldens: 0 matched, 0 written, 1 updated"
    project.runpytest().assert_outcomes(passed=1)  # no stale second interaction left unplayed


def test_rewrite_keeps_the_old_cassette_when_the_test_fails(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    record(echo, monkeypatch, "old").assert_outcomes(passed=1)
    before = (echo.path / "cassettes" / "test_mode" / "test_echo.yaml").read_bytes()
    with provider(monkeypatch) as emu:
        dead = emu.base_url
    monkeypatch.setenv("EMU", dead)  # the provider is down: nothing answers, nothing is recorded
    result = echo.runpytest("--record-mode=rewrite")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ProviderError: could not connect to http://127.0.0.1:*"])
    assert (echo.path / "cassettes" / "test_mode" / "test_echo.yaml").read_bytes() == before


# -- the ini twin ---------------------------------------------------------------------------


def test_ini_record_mode_is_used_and_the_command_line_wins(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    echo.makeini(ini("dsh_replay_record_mode = once"))
    # the command line wins: none with no cassette fails without recording
    with provider(monkeypatch) as emu:
        result = echo.runpytest("--record-mode=none")
        assert emu.requests == []
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*does not exist and the record mode is 'none'*"])
    # the ini alone: once records
    with provider(monkeypatch) as emu:
        echo.runpytest().assert_outcomes(passed=1)
        assert len(emu.requests) == 1
    assert (echo.path / "cassettes" / "test_mode" / "test_echo.yaml").is_file()


# -- bad values ---------------------------------------------------------------------------------


def test_a_bad_command_line_mode_is_a_usage_error_listing_the_valid_ones(echo: pytest.Pytester) -> None:
    result = echo.runpytest("--record-mode=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--record-mode*invalid choice: 'sometimes'*"])
    for mode in ("none", "once", "new_episodes", "all", "rewrite"):
        assert f"'{mode}'" in result.stderr.str()


def test_a_bad_ini_mode_is_a_usage_error_listing_the_valid_ones(echo: pytest.Pytester) -> None:
    echo.makeini(ini("dsh_replay_record_mode = sometimes"))
    result = echo.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*dsh-replay: ini dsh_replay_record_mode: unknown record mode 'sometimes'; valid modes: none, once, new_episodes, all, rewrite, verify"]
    )


# -- CI only replays ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--record-mode=all"], ["--record-mode=rewrite"], ["--record-mode=new_episodes"], ["--update-golden"]])
def test_ci_refuses_recording_and_updating(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.setenv("CI", "1")
    result = echo.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*dsh-replay: {args[0]} is refused because CI is set: CI only replays*"])
    assert not (echo.path / "cassettes").exists()


def test_ci_refuses_a_recording_mode_from_the_ini_too(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    echo.makeini(ini("dsh_replay_record_mode = all"))
    result = echo.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*refused because CI is set*"])


def test_ci_once_with_a_missing_cassette_fails_without_recording(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    with provider(monkeypatch) as emu:
        result = echo.runpytest("--record-mode=once")
        assert emu.requests == []
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_echo.yaml does not exist*", "*--record-mode=once does not record because CI is set*"])
    assert not (echo.path / "cassettes").exists()


def test_ci_set_to_false_does_not_count(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    with provider(monkeypatch):
        echo.runpytest("--record-mode=once").assert_outcomes(passed=1)


@pytest.mark.parametrize("recording", [[], ["-p", "no:recording"]], ids=["pytest-recording", "ours"])
def test_ci_says_in_the_summary_that_once_only_replayed(
    echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, recording: list[str]
) -> None:
    refused = "dsh-replay: recording refused: CI is set (--record-mode=once ignored; CI only replays)"
    with provider(monkeypatch) as emu:
        result = echo.runpytest(*recording, "--record-mode=once")  # no CI: records, and says nothing of CI
        result.assert_outcomes(passed=1)
        assert len(emu.requests) == 1
        assert [line for line in summary(result) if "refused" in line] == []
        assert summary(result)[0] == "cassettes: 0 replayed, 1 recorded"

        monkeypatch.setenv("CI", "1")
        (echo.path / "cassettes" / "test_mode" / "test_echo.chunks.jsonl").unlink()
        result = echo.runpytest(*recording, "--record-mode=once")
        assert len(emu.requests) == 1  # nothing went to the provider
    result.assert_outcomes(failed=1)  # the golden is missing, and once does not write it under CI
    assert summary(result)[:3] == [
        refused,
        "cassettes: 1 replayed, 0 recorded",
        "goldens: 0 matched, 0 written, 0 updated, 1 missing",
    ]
    assert not (echo.path / "cassettes" / "test_mode" / "test_echo.chunks.jsonl").exists()
    # the line is there even when no test of ours ran, and only when the mode was ignored
    result = echo.runpytest(*recording, "--record-mode=once", "-k", "no_such_test")
    assert summary(result) == [refused]
    result = echo.runpytest(*recording, "--record-mode=none")
    assert [line for line in summary(result) if "refused" in line] == []


def test_ci_names_the_ini_when_its_record_mode_was_ignored(echo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    echo.makeini(ini("dsh_replay_record_mode = once"))
    monkeypatch.setenv("CI", "true")
    result = echo.runpytest("-p", "no:recording")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_echo.yaml does not exist*"])
    assert summary(result)[0] == (
        "dsh-replay: recording refused: CI is set (ini dsh_replay_record_mode = once ignored; CI only replays)"
    )
    assert not (echo.path / "cassettes").exists()
