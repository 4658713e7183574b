"""The ``dsh_replay`` fixture: paths, ``turn``, sync ``run``, errors, rules, unplayed interactions."""

from __future__ import annotations

import json

import pytest

from .helpers import (
    IMPORTS,
    SCRIPTED_SOURCE,
    echo_test,
    golden_lines,
    ini,
    ndjson,
    provider,
    read_lines,
    streaming,
)

PATHS = IMPORTS + '''
import json
import os


def log(dsh_replay):
    with open(os.environ["PATHS_OUT"], "a") as fh:
        fh.write(json.dumps([str(dsh_replay.cassette_path), str(dsh_replay.golden_path)]) + "\\n")


def test_plain(dsh_replay):
    log(dsh_replay)


@pytest.mark.parametrize("value", ["a/b", "c:d", 'q"<>?%*|\\\\'])
def test_param(dsh_replay, value):
    log(dsh_replay)


class TestGroup:
    def test_method(self, dsh_replay):
        log(dsh_replay)


@pytest.mark.dsh_replay(cassette="chosen")
def test_named(dsh_replay):
    log(dsh_replay)
'''


def logged_paths(pytester: pytest.Pytester, root: str) -> list[list[str]]:
    lines = (pytester.path / "paths.txt").read_text().splitlines()
    base = str(pytester.path / root) + "/"
    return [[path.removeprefix(base) for path in json.loads(line)] for line in lines]


def test_default_paths_are_per_module_and_sanitized_like_pytest_recording(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(test_f=PATHS)
    monkeypatch.setenv("PATHS_OUT", str(project.path / "paths.txt"))
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=6)
    assert logged_paths(project, "cassettes") == [
        ["test_f/test_plain.yaml", "test_f/test_plain.chunks.jsonl"],
        ["test_f/test_param[a-b].yaml", "test_f/test_param[a-b].chunks.jsonl"],
        ["test_f/test_param[c-d].yaml", "test_f/test_param[c-d].chunks.jsonl"],
        ["test_f/test_param[q---------].yaml", "test_f/test_param[q---------].chunks.jsonl"],
        ["test_f/TestGroup.test_method.yaml", "test_f/TestGroup.test_method.chunks.jsonl"],
        ["test_f/chosen.yaml", "test_f/chosen.chunks.jsonl"],
    ]


def test_the_ini_cassette_dir_is_relative_to_the_rootdir(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makeini(ini("dsh_replay_cassette_dir = recorded/here"))
    sub = project.mkpydir("pkg")
    (sub / "test_f.py").write_text(PATHS)
    monkeypatch.setenv("PATHS_OUT", str(project.path / "paths.txt"))
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=6)
    assert logged_paths(project, "recorded/here")[0] == ["test_f/test_plain.yaml", "test_f/test_plain.chunks.jsonl"]


def test_turn_is_the_assembled_result(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(
        test_f=IMPORTS
        + """
@pytest.mark.asyncio
async def test_echo(dsh_replay):
    assert dsh_replay.turn is None
    chunks = await dsh_replay.stream(make_adapter(), make_options())
    assert len(chunks) == 6
    assert dsh_replay.turn.text == "Hello"
    assert (dsh_replay.turn.usage.input_tokens, dsh_replay.turn.usage.output_tokens) == (7, 5)
    assert dsh_replay.turn.finish_reason.kind == "stop"
"""
    )
    with provider(monkeypatch, streaming(ndjson("Hel", "lo", tokens=(7, 5)))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    project.runpytest().assert_outcomes(passed=1)


def test_run_is_the_sync_twin_for_tests_that_are_not_async(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(
        test_f=IMPORTS
        + """
def test_sync(dsh_replay):
    chunks = dsh_replay.run(make_adapter(), make_options())
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta", "TextDelta", "BlockEnd", "UsageChunk", "Finish"]

@pytest.mark.asyncio
async def test_run_inside_a_loop(dsh_replay):
    with pytest.raises(RuntimeError, match="use `await dsh_replay.stream"):
        dsh_replay.run(make_adapter(), make_options())
"""
    )
    with provider(monkeypatch):
        project.runpytest("--record-mode=once").assert_outcomes(passed=2)
    assert read_lines(project.path / "cassettes" / "test_f" / "test_sync.chunks.jsonl") == golden_lines("Hel", "lo")
    result = project.runpytest()
    result.assert_outcomes(passed=2)


def test_expect_error_writes_the_raised_line(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(
        test_f=IMPORTS
        + """
@pytest.mark.asyncio
async def test_cut(dsh_replay):
    chunks = await dsh_replay.stream(make_adapter(), make_options(), expect_error=True)
    assert len(chunks) == 2
"""
    )
    with provider(monkeypatch, streaming(ndjson("par", done=False))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    assert read_lines(project.path / "cassettes" / "test_f" / "test_cut.chunks.jsonl") == [
        '{"type":"block-start","index":0,"blockType":"text"}',
        '{"type":"text-delta","index":0,"text":"par"}',
        '{"type":"raised","error":"StreamInterruptedError","message":"the stream ended before the done line; '
        'the response is incomplete (route=echo)"}',
    ]
    project.runpytest().assert_outcomes(passed=1)


def test_an_adapter_error_without_expect_error_propagates(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(
        test_f=IMPORTS
        + """
from dsh_replay import StreamInterruptedError

@pytest.mark.asyncio
async def test_cut(dsh_replay):
    with pytest.raises(StreamInterruptedError) as info:
        await dsh_replay.stream(make_adapter(), make_options())
    assert info.value.route == "echo"
"""
    )
    with provider(monkeypatch, streaming(ndjson("par", done=False))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    folder = project.path / "cassettes" / "test_f"
    assert sorted(p.name for p in folder.iterdir()) == ["test_cut.yaml"]  # no golden for a run that raised
    project.runpytest().assert_outcomes(passed=1)


def test_a_protocol_violation_fails_with_rule_and_position(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(scripted_adapter=SCRIPTED_SOURCE)
    project.makepyfile(
        test_f=IMPORTS
        + """
from scripted_adapter import BROKEN, scripted

@pytest.mark.asyncio
async def test_broken(dsh_replay):
    await dsh_replay.stream(scripted(*BROKEN), make_options())
"""
    )
    with provider(monkeypatch):
        result = project.runpytest("--record-mode=once")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the adapter's chunks break the StreamChunk rules:",
            "  P4 at chunk 0: *",
            "  P6 at chunk 3: *",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert not (project.path / "cassettes" / "test_f" / "test_broken.chunks.jsonl").exists()


TWO_CALLS = IMPORTS + """
import os

@pytest.mark.asyncio
{marker}
async def test_calls(dsh_replay):
    await dsh_replay.stream(make_adapter(), make_options("first"))
    if os.environ.get("TWICE"):
        await dsh_replay.stream(make_adapter(), make_options("second"))
"""


def test_unplayed_interactions_fail_unless_allowed(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_f=TWO_CALLS.format(marker=""))
    monkeypatch.setenv("TWICE", "1")
    with provider(monkeypatch, streaming(ndjson("one")), streaming(ndjson("two"))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    folder = project.path / "cassettes" / "test_f"
    assert read_lines(folder / "test_calls.2.chunks.jsonl") == golden_lines("two")
    project.runpytest().assert_outcomes(passed=1)

    monkeypatch.delenv("TWICE")
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*cassette *test_calls.yaml: 1 recorded interaction(s) were not played — the adapter made fewer calls "
            "than were recorded. Re-record, or mark the test @pytest.mark.dsh_replay(allow_unplayed=True).",
        ]
    )
    project.makepyfile(test_f=TWO_CALLS.format(marker="@pytest.mark.dsh_replay(allow_unplayed=True)"))
    project.runpytest().assert_outcomes(passed=1)


def test_a_corrupt_cassette_fails_naming_the_file(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_f=TWO_CALLS.format(marker=""))
    with provider(monkeypatch):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    cassette = project.path / "cassettes" / "test_f" / "test_calls.yaml"
    cassette.write_text("interactions: [unbalanced\n" + cassette.read_text())
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cassette *test_f/test_calls.yaml is not valid YAML (line *)*"])
    assert "Traceback" not in result.stdout.str()
    assert "During handling" not in result.stdout.str()


OVERLAP = IMPORTS + """
import asyncio

@pytest.mark.asyncio
async def test_overlap(dsh_replay):
    first, second = await asyncio.gather(
        dsh_replay.stream(make_adapter(), make_options("a")),
        dsh_replay.stream(make_adapter(), make_options("b")),
        return_exceptions=True,
    )
    assert [type(c).__name__ for c in first][:2] == ["BlockStart", "TextDelta"]
    assert isinstance(second, RuntimeError)
    assert str(second) == (
        "calls to dsh_replay.stream in one test must not overlap; await one before starting the next"
    )
    assert dsh_replay.turn.text == "one"
"""


def test_overlapping_calls_are_refused_and_the_first_is_recorded_alone(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(test_f=OVERLAP)
    with provider(monkeypatch, streaming(ndjson("one")), streaming(ndjson("two"))) as emu:
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
        assert len(emu.requests) == 1
    folder = project.path / "cassettes" / "test_f"
    assert sorted(p.name for p in folder.iterdir()) == ["test_overlap.chunks.jsonl", "test_overlap.yaml"]
    assert read_lines(folder / "test_overlap.chunks.jsonl") == golden_lines("one")
    assert "follow_ups" not in (folder / "test_overlap.yaml").read_text()
    # (no replay here: a replay does not wait on the network, so the two calls no
    # longer overlap and the second finds nothing recorded for it)


def test_an_unguarded_gather_fails_with_the_overlap_message(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(
        test_f=IMPORTS
        + """
import asyncio

@pytest.mark.asyncio
async def test_overlap(dsh_replay):
    await asyncio.gather(dsh_replay.stream(make_adapter(), make_options("a")), dsh_replay.stream(make_adapter(), make_options("b")))
"""
    )
    with provider(monkeypatch):
        result = project.runpytest("--record-mode=once")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E *RuntimeError: calls to dsh_replay.stream in one test must not overlap; await one before starting the next"]
    )
    assert not (project.path / "cassettes").exists()  # nothing half-recorded is kept


BAD_CALL = IMPORTS + """
from dsh_replay import GenerateOptions, Message
from echo_adapter import EchoAdapter

@pytest.mark.asyncio
@pytest.mark.parametrize("expect", [True, None])
@pytest.mark.parametrize(
    ("args", "kwargs", "error", "says"),
    [
        ((object(), make_options()), {}, TypeError, "adapter must be an LlmAdapter instance, got object"),
        ((EchoAdapter, make_options()), {}, TypeError, "adapter must be an LlmAdapter instance, got ABCMeta (pass an instance, not the class)"),
        ((make_adapter(), None), {}, TypeError, "options must be a GenerateOptions, got NoneType"),
        ((make_adapter(), {"model": "m", "messages": []}), {}, TypeError, "options must be a GenerateOptions, got dict"),
        ((make_adapter(), make_options()), {"route": 3}, TypeError, "route must be a string or None, got int"),
        ((make_adapter(), make_options()), {"route": ""}, ValueError, "route must be a non-empty string or None"),
    ],
)
async def test_bad(dsh_replay, expect, args, kwargs, error, says):
    with pytest.raises(error) as info:
        await dsh_replay.stream(*args, expect_error=expect, **kwargs)
    assert str(info.value) == "dsh_replay.stream(): " + says

@pytest.mark.asyncio
@pytest.mark.parametrize("flag", ["no", 1, 0])
async def test_bad_flag(dsh_replay, flag):
    with pytest.raises(TypeError) as info:
        await dsh_replay.stream(make_adapter(), make_options(), expect_error=flag)
    assert str(info.value) == (
        f"dsh_replay.stream(): expect_error must be True, False or None (the marker decides), got {flag!r}"
    )
"""


def test_wrong_arguments_are_refused_before_anything_runs(project: pytest.Pytester) -> None:
    project.makepyfile(test_f=BAD_CALL)
    with_marker = BAD_CALL.replace("@pytest.mark.asyncio\n", "@pytest.mark.asyncio\n@pytest.mark.dsh_replay(expect_error=True)\n")
    project.makepyfile(test_g=with_marker)
    result = project.runpytest("--record-mode=once", "-p", "no:randomly")
    result.assert_outcomes(passed=30)
    assert not (project.path / "cassettes").exists()  # no cassette, no golden with an AttributeError in it


def test_two_tests_whose_names_map_to_one_cassette_are_refused(project: pytest.Pytester) -> None:
    # "a/b" and "a:b" both become "a-b" in a file name: one would overwrite the other's recording
    source = IMPORTS + '''
@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["a/b", "a:b"])
async def test_x(dsh_replay, case):
    await dsh_replay.stream(make_adapter(), make_options(case))
'''
    project.makepyfile(test_clash=source)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*dsh-replay: test_clash.py::test_x[[]a/b[]] and test_clash.py::test_x[[]a:b[]] would both record into *test_x[[]a-b[]].yaml;*"]
    )


def test_a_cassette_named_in_the_marker_may_be_shared(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = '@pytest.mark.dsh_replay(cassette="shared")'
    project.makepyfile(test_share=IMPORTS + echo_test("test_one", marker=shared) + echo_test("test_two", marker=shared))
    with provider(monkeypatch):
        result = project.runpytest("--record-mode=once", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
