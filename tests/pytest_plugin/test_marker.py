"""``@pytest.mark.dsh_replay(...)``: every argument has an effect; bad arguments are usage errors."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from .helpers import (
    IMPORTS,
    SCRIPTED_SOURCE,
    echo_test,
    ini,
    ndjson,
    provider,
    read_lines,
    streaming,
)
from .paced import recorded_gaps, requested_sleeps, use_recording_clock

SCRIPTED_IMPORTS = IMPORTS + "from scripted_adapter import BAD_JSON_CALL, INTERLEAVED, scripted\n"

VALID = "valid: cassette, route, record_mode, fragmentation, speed, allow_interleaving, json_arguments, golden, allow_unplayed, expect_error"


def marked(marker: str, name: str = "test_echo", text: str = "hi", body: str = "") -> str:
    return echo_test(name, text, marker=f"@pytest.mark.dsh_replay({marker})", body=body)


def record(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *responses, passed: int = 1) -> pytest.RunResult:
    with provider(monkeypatch, *responses):
        result = pytester.runpytest("--record-mode=once")
    result.assert_outcomes(passed=passed)
    return result


def folder(pytester: pytest.Pytester) -> os.PathLike[str]:
    return pytester.path / "cassettes" / "test_m"


def test_cassette_names_the_file_and_tests_can_share_one(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(
        test_m=IMPORTS
        + marked("cassette='shared'", "test_one")
        + marked("cassette='shared'", "test_two")
        + marked("cassette='sub/named.yaml'", "test_three")
    )
    with provider(monkeypatch, streaming(ndjson("x"))) as emu:
        project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=3)
        assert len(emu.requests) == 2  # test_two replayed what test_one recorded
    assert sorted(p.name for p in folder(project).iterdir()) == ["shared.chunks.jsonl", "shared.yaml", "sub"]
    assert sorted(p.name for p in (folder(project) / "sub").iterdir()) == ["named.chunks.jsonl", "named.yaml"]
    project.runpytest().assert_outcomes(passed=3)


def test_an_absolute_cassette_path_is_taken_as_it_is(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "abs"
    project.makepyfile(test_m=IMPORTS + marked(f"cassette={str(elsewhere)!r}"))
    record(project, monkeypatch)
    assert sorted(p.name for p in elsewhere.parent.iterdir()) == ["abs.chunks.jsonl", "abs.yaml"]
    assert not (project.path / "cassettes").exists()
    project.runpytest().assert_outcomes(passed=1)


def test_route_is_stored_in_the_cassette(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_m=IMPORTS + marked("route='echo-v2'"))
    record(project, monkeypatch)
    data = yaml.safe_load((folder(project) / "test_echo.yaml").read_text())
    assert data["dsh_replay"]["route"] == "echo-v2"


def test_fragmentation_cuts_the_replayed_body(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # an httpx hook cannot see the pieces; the decoder can: log what it is fed
    spy = """
class Spy:
    def __init__(self, inner):
        self.inner = inner
    def feed(self, data):
        SIZES.append(len(data))
        return self.inner.feed(data)
    def flush(self):
        return self.inner.flush()

SIZES = []
import echo_adapter
_decoder = echo_adapter.EchoAdapter.decoder
echo_adapter.EchoAdapter.decoder = lambda self: Spy(_decoder(self))

def teardown_module():
    import json, os
    with open(os.environ["SIZES_OUT"], "w") as fh:
        json.dump(SIZES, fh)
"""
    project.makepyfile(test_m=IMPORTS + spy + marked("fragmentation='bytes'"))
    monkeypatch.setenv("SIZES_OUT", str(project.path / "sizes.json"))
    body = ndjson("a", "b")
    record(project, monkeypatch, streaming(body))
    project.makeini(ini("dsh_replay_fragmentation = single"))
    project.runpytest().assert_outcomes(passed=1)  # the marker wins over the ini
    assert json.loads((project.path / "sizes.json").read_text()) == [1] * len(body)
    project.runpytest("--replay-fragmentation=single").assert_outcomes(passed=1)  # the command line over both
    assert json.loads((project.path / "sizes.json").read_text()) == [len(body)]


def test_speed_replays_at_the_recorded_pace(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_m=IMPORTS + marked("speed=1"))
    use_recording_clock(project, monkeypatch)
    record(project, monkeypatch, streaming(ndjson("a", "b", "c"), delay=0.1))  # 3 pauses of 100 ms
    gaps = recorded_gaps(folder(project) / "test_echo.yaml")
    assert sum(gaps) >= 0.1  # at least part of them on record, however loaded the machine
    # the marker wins over the ini: the replay sleeps through every recorded pause
    project.makeini(ini("dsh_replay_speed = 0"))
    assert requested_sleeps(project) == pytest.approx(gaps)
    assert requested_sleeps(project, "--replay-speed=0") == []  # the command line wins over the marker


def test_allow_interleaving_relaxes_p3(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(scripted_adapter=SCRIPTED_SOURCE)
    test = """
@pytest.mark.asyncio
{marker}
async def test_echo(dsh_replay):
    await dsh_replay.stream(scripted(*INTERLEAVED), make_options())
"""
    project.makepyfile(test_m=SCRIPTED_IMPORTS + test.format(marker="@pytest.mark.dsh_replay(allow_interleaving=True)"))
    record(project, monkeypatch)
    project.makepyfile(test_m=SCRIPTED_IMPORTS + test.format(marker=""))
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the adapter's chunks break the StreamChunk rules:", "*P3 at chunk 1: *"])


def test_json_arguments_false_relaxes_p7j(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(scripted_adapter=SCRIPTED_SOURCE)
    test = """
@pytest.mark.asyncio
{marker}
async def test_echo(dsh_replay):
    await dsh_replay.stream(scripted(*BAD_JSON_CALL), make_options())
    assert dsh_replay.turn is not None
"""
    project.makepyfile(test_m=SCRIPTED_IMPORTS + test.format(marker="@pytest.mark.dsh_replay(json_arguments=False)"))
    record(project, monkeypatch)
    assert '"argumentsDelta":"{oops"' in (folder(project) / "test_echo.chunks.jsonl").read_text()
    project.makepyfile(test_m=SCRIPTED_IMPORTS + test.format(marker=""))
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*P7j at chunk 2: *"])


def test_golden_false_neither_writes_nor_compares(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_m=IMPORTS + marked("golden=False"))
    result = record(project, monkeypatch)
    assert sorted(p.name for p in folder(project).iterdir()) == ["test_echo.yaml"]
    assert [line for line in result.outlines if line.startswith("goldens:")] == ["goldens: 0 matched, 0 written, 0 updated"]
    (folder(project) / "test_echo.chunks.jsonl").write_text("not even JSON\n")
    project.runpytest().assert_outcomes(passed=1)
    project.makepyfile(test_m=IMPORTS + marked(""))  # with the golden on, that file fails
    project.runpytest().assert_outcomes(failed=1)


def test_allow_unplayed_tolerates_calls_no_longer_made(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    two = IMPORTS + """
import os

@pytest.mark.asyncio
{marker}
async def test_echo(dsh_replay):
    await dsh_replay.stream(make_adapter(), make_options("a"))
    if os.environ.get("TWICE"):
        await dsh_replay.stream(make_adapter(), make_options("b"))
"""
    project.makepyfile(test_m=two.format(marker=""))
    monkeypatch.setenv("TWICE", "1")
    record(project, monkeypatch)
    monkeypatch.delenv("TWICE")
    project.runpytest().assert_outcomes(passed=1, errors=1)
    project.makepyfile(test_m=two.format(marker="@pytest.mark.dsh_replay(allow_unplayed=True)"))
    project.runpytest().assert_outcomes(passed=1)


def test_expect_error_keeps_the_raised_line(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_m=IMPORTS + marked("expect_error=True"))
    record(project, monkeypatch, streaming(ndjson("par", "tial", done=False)))
    lines = read_lines(folder(project) / "test_echo.chunks.jsonl")
    assert lines[-1] == (
        '{"type":"raised","error":"StreamInterruptedError",'
        '"message":"the stream ended before the done line; the response is incomplete (route=echo)"}'
    )
    assert lines[:3] == ['{"type":"block-start","index":0,"blockType":"text"}', '{"type":"text-delta","index":0,"text":"par"}', '{"type":"text-delta","index":0,"text":"tial"}']
    project.runpytest().assert_outcomes(passed=1)
    project.makepyfile(test_m=IMPORTS + marked(""))  # without it, the error reaches the test
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*StreamInterruptedError: *the stream ended before the done line*"])


def test_expect_error_fails_a_run_that_does_not_raise(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_m=IMPORTS + marked("expect_error=True"))
    with provider(monkeypatch):
        result = project.runpytest("--record-mode=once")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the test expects the adapter to raise, but it finished normally*"])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("casette='x'", "unknown @pytest.mark.dsh_replay argument(s) casette (did you mean cassette?); " + VALID),
        ("'x'", "@pytest.mark.dsh_replay takes keyword arguments only (cassette, route, *); got positional ('x',)"),
        ("golden='no'", "dsh_replay marker argument golden must be True or False"),
        ("allow_unplayed=1", "dsh_replay marker argument allow_unplayed must be True or False"),
        ("speed='fast'", "dsh_replay marker argument speed must be a number, got 'fast'"),
        ("speed=-1", "dsh_replay marker argument replay speed must be a number from 0 to 100 *; got -1"),
        ("speed=True", "dsh_replay marker argument replay speed must be a number from 0 to 100 *; got True"),
        ("speed=float('inf')", "dsh_replay marker argument replay speed must be a number from 0 to 100 *; got inf"),
        ("speed=float('nan')", "dsh_replay marker argument replay speed must be a number from 0 to 100 *; got nan"),
        ("speed=1e308", "dsh_replay marker argument replay speed must be a number from 0 to 100 *; got 1e+308"),
        ("cassette=3", "dsh_replay marker argument cassette must be a non-empty string"),
        ("route=''", "dsh_replay marker argument route must be a non-empty string"),
        ("cassette='../../../escape'", "dsh_replay marker argument cassette='../../../escape' leaves the cassette folder; "
         "a name or relative path stays inside it (no '..'), an absolute path may point anywhere"),
        ("cassette='sub/../../x'", "dsh_replay marker argument cassette='sub/../../x' leaves the cassette folder; *"),
        ("cassette='sub/dir/'", "dsh_replay marker argument cassette='sub/dir/' names a folder, not a file; "
         "end it with the cassette's name, e.g. 'sub/name'"),
        ("cassette='.'", "dsh_replay marker argument cassette='.' names a folder, not a file; *"),
        ("cassette='sub/.'", "dsh_replay marker argument cassette='sub/.' names a folder, not a file; *"),
        ("fragmentation='zigzag'", "dsh_replay marker: unknown fragmentation 'zigzag'; valid: recorded, single, bytes, random, random:SEED*"),
        ("fragmentation=8", "dsh_replay marker argument fragmentation must be a string*"),
    ],
)
def test_bad_arguments_are_usage_errors(project: pytest.Pytester, marker: str, message: str) -> None:
    project.makepyfile(test_m=IMPORTS + marked(marker) + echo_test("test_fine"))
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_m.py::test_echo: {message}"])
    result.stdout.no_fnmatch_line("*passed*")


def test_a_bad_marker_on_a_class_is_reported_for_its_tests(project: pytest.Pytester) -> None:
    project.makepyfile(test_m=IMPORTS + "@pytest.mark.dsh_replay(speeed=1)\nclass TestIt:\n    def test_x(self):\n        pass\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_m.py::TestIt::test_x: unknown @pytest.mark.dsh_replay argument(s) speeed (did you mean speed?)*"])
