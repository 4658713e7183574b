"""``dsh_replay_collect = true``: cassettes with ``dsh_replay:`` metadata become test items,
replayed through the adapter of their route (pyproject routes or a plugin YAML)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.cassette.files import has_metadata

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

PYPROJECT = '[tool.dsh_replay.routes]\n"echo" = "echo_adapter:EchoAdapter"\n'

PLUGIN = '''
from dataclasses import dataclass

from echo_adapter import EchoAdapter

name = "echo-plugin"
inject = ["llm"]


@dataclass
class Config:
    api_key: str
    providers: list[str]


def apply(ctx, config):
    ctx.llm.register_adapter(config.providers, EchoAdapter(config.api_key, base_url="http://plugin.invalid"))
'''

PLUGINS_YAML = """\
plugins:
  echo_plugin:
    apiKey: ${ECHO_PLUGIN_KEY:-placeholder}
    providers: [echo-plugged]
"""


def record_cases(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *texts: str) -> Path:
    """Record one case per text through fixture tests, then leave only the cassettes behind."""
    with provider(monkeypatch, *(streaming(ndjson(t)) for t in texts)):
        pytester.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=len(texts))
    (pytester.path / "test_rec.py").unlink()
    pytester.makeini(ini("dsh_replay_collect = true"))
    return pytester.path / "cassettes" / "test_rec"


@pytest.fixture
def cases(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two recorded cases of route ``echo``, collection on, routes from pyproject."""
    project.makepyfile(test_rec=IMPORTS + echo_test("test_one", "1") + echo_test("test_two", "2"))
    folder = record_cases(project, monkeypatch, "one", "two")
    project.makefile(".toml", pyproject=PYPROJECT)
    return folder


def test_cassettes_become_items_replayed_through_the_pyproject_route(project: pytest.Pytester, cases: Path) -> None:
    result = project.runpytest("-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["cassettes/test_rec/test_one.yaml::test_one PASSED*", "cassettes/test_rec/test_two.yaml::test_two PASSED*"]
    )
    assert summary_line(result, "cassettes:") == "cassettes: 2 replayed, 0 recorded"
    assert summary_line(result, "goldens:") == "goldens: 2 matched, 0 written, 0 updated"
    assert "orphan cassettes: 0" in summary(result)


def test_collection_is_off_by_default(project: pytest.Pytester, cases: Path) -> None:
    project.makeini(ini())
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.mark.parametrize(("value", "collected"), [("true", 2), ("Yes", 2), ("1", 2), ("off", 0), ("FALSE", 0)])
def test_the_collect_flag_takes_the_usual_spellings(project: pytest.Pytester, cases: Path, value: str, collected: int) -> None:
    project.makeini(ini(f"dsh_replay_collect = {value}"))
    result = project.runpytest()
    if collected:
        result.assert_outcomes(passed=collected)
    else:
        assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_bad_collect_flag_is_a_usage_error_naming_the_key(project: pytest.Pytester, cases: Path) -> None:
    project.makeini(ini("dsh_replay_collect = maybe"))
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*dsh-replay: ini dsh_replay_collect: expected true or false (also yes/no, on/off, 1/0); got 'maybe'"]
    )


def test_only_cassettes_with_metadata_in_a_cassette_folder_are_collected(project: pytest.Pytester, cases: Path) -> None:
    (cases / "plain_vcr.yaml").write_text("interactions: []\nversion: 1\n")
    elsewhere = project.path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "copy.yaml").write_bytes((cases / "test_one.yaml").read_bytes())
    project.runpytest().assert_outcomes(passed=2)
    # the ini names another folder: what is under it, besides the default cassettes/ folders
    project.makeini(ini("dsh_replay_collect = true", "dsh_replay_cassette_dir = elsewhere"))
    (elsewhere / "copy.chunks.jsonl").write_bytes((cases / "test_one.chunks.jsonl").read_bytes())
    result = project.runpytest("-v", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "cassettes/test_rec/test_one.yaml::test_one PASSED*",
            "cassettes/test_rec/test_two.yaml::test_two PASSED*",
            "elsewhere/copy.yaml::copy PASSED*",
        ]
    )


def test_a_route_from_a_plugin_yaml(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_rec=IMPORTS + echo_test("test_plugged", marker="@pytest.mark.dsh_replay(route='echo-plugged')"))
    record_cases(project, monkeypatch, "plugged")
    project.makepyfile(echo_plugin=PLUGIN)
    project.makefile(".yml", plugins=PLUGINS_YAML)
    result = project.runpytest()
    result.assert_outcomes(failed=1)  # no plugin YAML configured yet
    result.stdout.fnmatch_lines(["*unknown route 'echo-plugged'*Known routes: *"])
    project.makeini(ini("dsh_replay_collect = true", "dsh_replay_plugins = plugins.yml"))
    project.runpytest().assert_outcomes(passed=1)


def test_an_unknown_route_fails_listing_the_known_ones(project: pytest.Pytester, cases: Path) -> None:
    (project.path / "pyproject.toml").unlink()
    result = project.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*unknown route 'echo'.*Known routes: anthropic, deepseek, gemini, ollama, openai, openai-compatible, openai-responses"]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_golden_mismatch_fails_with_the_diff_and_update_golden_fixes_it(project: pytest.Pytester, cases: Path) -> None:
    golden = cases / "test_two.chunks.jsonl"
    golden.write_text(golden.read_text().replace('"two"', '"TWO"'))
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "echo case *test_two.yaml:",
            "golden *test_two.chunks.jsonl differs from the adapter's chunks; first difference at chunk 1 (line 2)",
            '- {"type":"text-delta","index":0,"text":"TWO"}',
            '+ {"type":"text-delta","index":0,"text":"two"}',
        ]
    )
    assert summary_line(result, "goldens:") == "goldens: 1 matched, 0 written, 0 updated, 1 differing"
    result = project.runpytest("--update-golden")
    result.assert_outcomes(passed=2)
    assert summary_line(result, "goldens:") == "goldens: 1 matched, 0 written, 1 updated"
    assert read_lines(golden) == golden_lines("two")


def test_a_corrupt_cassette_fails_naming_the_file(project: pytest.Pytester, cases: Path) -> None:
    (cases / "test_one.yaml").write_text("dsh_replay:\n  route: echo\ninteractions: [oops\n")
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*cassette *cassettes/test_rec/test_one.yaml is not valid YAML (line *)*"])
    assert "Traceback" not in result.stdout.str()


def test_a_case_whose_adapter_now_asks_differently_fails_with_the_request_diff(project: pytest.Pytester, cases: Path) -> None:
    adapter = project.path / "echo_adapter.py"
    adapter.write_text(adapter.read_text().replace('json={"m": options.model,', 'json={"model": options.model,'))
    result = project.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*no recorded interaction matches POST */gen*", "*changed JSON fields: m, model*"])


def test_a_case_with_two_calls_replays_both_against_their_goldens(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "second = await dsh_replay.stream(make_adapter(), make_options('again'))\n    assert second"
    project.makepyfile(test_rec=IMPORTS + echo_test("test_twice", "first", body=body))
    with provider(monkeypatch, streaming(ndjson("one")), streaming(ndjson("two"))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    (project.path / "test_rec.py").unlink()
    project.makeini(ini("dsh_replay_collect = true"))
    folder = project.path / "cassettes" / "test_rec"
    # recorded as one test: a cassette with two interactions and a golden per call
    assert sorted(p.name for p in folder.iterdir()) == [
        "test_twice.2.chunks.jsonl", "test_twice.chunks.jsonl", "test_twice.yaml",
    ]
    assert read_lines(folder / "test_twice.2.chunks.jsonl") == golden_lines("two")
    project.makefile(".toml", pyproject=PYPROJECT)
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    assert summary_line(result, "unused goldens") == "unused goldens: 0"
    # the second call's golden is compared too
    (folder / "test_twice.2.chunks.jsonl").write_text("\n".join(golden_lines("TWO")) + "\n", encoding="utf-8")
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_twice.2.chunks.jsonl differs*"])


@pytest.mark.parametrize(
    "text",
    [
        "dsh_replay:\n  route: echo\ninteractions: []\n",
        "interactions: []\ndsh_replay:\n  route: echo\n",
        "\ufeffdsh_replay: {route: echo}\n",
        '"dsh_replay": {route: echo}\n',
        "interactions: []\ndsh_replay :\n  route: echo\n",
    ],
)
def test_metadata_is_found_wherever_the_top_level_key_is(tmp_path: Path, text: str) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(text, encoding="utf-8")
    assert has_metadata(path)


@pytest.mark.parametrize(
    "text",
    [
        "interactions: []\n",
        "interactions:\n- dsh_replay:\n    route: echo\n",  # nested, not top level
        "note: my_dsh_replay: x\n",
        "",
    ],
)
def test_files_without_the_top_level_key_have_no_metadata(tmp_path: Path, text: str) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(text, encoding="utf-8")
    assert not has_metadata(path)


@pytest.mark.parametrize("offset", [0, 1, 30, 60, 63, 64, 65])
def test_a_key_cut_by_a_block_edge_is_found(tmp_path: Path, offset: int) -> None:
    # The file is read 64 KiB at a time: put the key across that edge.
    filler = "#" * (64 * 1024 - offset - 1) + "\n"
    path = tmp_path / "case.yaml"
    path.write_text(filler + "dsh_replay:\n  route: echo\n", encoding="utf-8")
    assert has_metadata(path)


def test_a_file_that_cannot_be_read_counts_as_a_case(tmp_path: Path) -> None:
    # Loading it then says why, instead of the file being skipped in silence.
    assert has_metadata(tmp_path)  # a folder: open() fails


def test_the_default_layout_beside_the_test_modules_is_collected(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # cassettes/ beside each test module, as the fixture (and pytest-recording) lays them out
    project.makeini(ini("pythonpath = ."))
    project.mkdir("tests")
    project.makepyfile(**{"tests/test_rec": IMPORTS + echo_test("test_one", "1") + echo_test("test_two", "2")})
    with provider(monkeypatch, streaming(ndjson("one")), streaming(ndjson("two"))):
        project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=2)
    folder = project.path / "tests" / "cassettes" / "test_rec"
    assert sorted(p.name for p in folder.glob("*.yaml")) == ["test_one.yaml", "test_two.yaml"]
    (folder / "plain_vcr.yaml").write_text("interactions: []\nversion: 1\n")  # not ours: never an item
    project.makefile(".toml", pyproject=PYPROJECT)
    project.makeini(ini("pythonpath = .", "dsh_replay_collect = true"))
    items = [
        "tests/cassettes/test_rec/test_one.yaml::test_one PASSED*",
        "tests/cassettes/test_rec/test_two.yaml::test_two PASSED*",
    ]
    # beside the test module that recorded them: its two tests and the two cases
    result = project.runpytest("-v", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(items)
    # the module gone, the cassettes are the tests
    (project.path / "tests" / "test_rec.py").unlink()
    result = project.runpytest("-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(items)
    assert summary_line(result, "cassettes:") == "cassettes: 2 replayed, 0 recorded"
    assert summary_line(result, "goldens:") == "goldens: 2 matched, 0 written, 0 updated"


@pytest.mark.parametrize("cassette_dir", ["tests/cassettes", "tests", "tests/cassettes/test_rec", "linked"])
def test_a_cassette_dir_overlapping_the_default_layout_collects_each_cassette_once(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cassette_dir: str
) -> None:
    # "linked" is a symlink to tests/cassettes: pytest reaches each cassette by two paths
    project.makeini(ini("pythonpath = ."))
    project.mkdir("tests")
    project.makepyfile(**{"tests/test_rec": IMPORTS + echo_test("test_one", "1")})
    with provider(monkeypatch, streaming(ndjson("one"))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    (project.path / "tests" / "test_rec.py").unlink()
    (project.path / "linked").symlink_to(project.path / "tests" / "cassettes", target_is_directory=True)
    project.makefile(".toml", pyproject=PYPROJECT)
    project.makeini(ini("pythonpath = .", "dsh_replay_collect = true", f"dsh_replay_cassette_dir = {cassette_dir}"))
    for args in ([], ["tests", "tests/cassettes", "tests/cassettes/test_rec/test_one.yaml", "linked"]):
        result = project.runpytest("-v", "-p", "no:randomly", *args)
        result.assert_outcomes(passed=1)
        assert [line.split()[0] for line in result.outlines if "::test_one " in line] == [
            "linked/test_rec/test_one.yaml::test_one" if cassette_dir == "linked" and not args
            else "tests/cassettes/test_rec/test_one.yaml::test_one"
        ]
