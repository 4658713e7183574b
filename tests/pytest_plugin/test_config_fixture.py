"""``dsh_replay_config`` (pytest-recording's ``vcr_config``), the layers of settings, and
``use_cassette`` inside a test following them."""

from __future__ import annotations

import json

import pytest
import yaml

from dsh_replay.testing import ProviderEmulator, ScriptedResponse

from .helpers import IMPORTS, ini, ndjson, provider, streaming, summary

#: an inner test calling the emulator with plain httpx inside use_cassette, as SDK-based tests do
RAW = '''
import os

import httpx
import pytest

from dsh_replay import use_cassette

CONFIG = {CONFIG}


@pytest.fixture(scope="module")
def dsh_replay_config():
    return CONFIG


def test_raw():
    with use_cassette("raw.yaml"):
        with httpx.Client() as client:
            base = os.environ.get("EMU", "http://unused.invalid")
            if "EMU" in os.environ:  # ignored by the hook: it goes out live, so only while recording
                client.get(base + "/telemetry")
            response = client.post(
                base + "/v1/chat?token=sk-test-querytoken0000&keep=1",
                headers={"x-stainless-os": "Linux", "X-Stainless-Arch": "x64", "X-Custom": "c", "keep-me": "k"},
                json={"model": "m", "user": "person-42", "msg": "hi acct-12345"},
            )
            assert response.json()["answer"] == "for acct-998877"
'''


def raw_project(project: pytest.Pytester, config: str) -> None:
    project.makepyfile(test_raw=RAW.replace("{CONFIG}", config))


def emulator() -> ProviderEmulator:
    emu = ProviderEmulator()
    emu.add("POST", "/v1/chat", ScriptedResponse.json(
        {"answer": "for acct-998877"}, headers={"x-stainless-resp": "1", "x-request-id": "req_1"},
    ))
    emu.add("GET", "/telemetry", ScriptedResponse.json({"ok": True}))
    return emu


FILTERS = """{
    "filter_headers": ["x-stainless-*", "X-CUSTOM"],
    "filter_query_parameters": ["token"],
    "filter_post_data_parameters": ["user"],
    "redact": [r"acct-[0-9]+"],
    "before_record_request": lambda request: None if request.path == "/telemetry" else request,
}"""


def test_filters_leave_out_what_the_config_names_and_replay_still_matches(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw_project(project, FILTERS)
    with emulator() as emu:
        monkeypatch.setenv("EMU", emu.base_url)
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
        sent = emu.requests
    monkeypatch.delenv("EMU")
    assert [r.path for r in sent] == ["/telemetry", "/v1/chat"]  # what is filtered is the record, not the call
    cassette = yaml.safe_load((project.path / "raw.yaml").read_text())
    [interaction] = cassette["interactions"]  # the telemetry call was ignored by the hook
    request, response = interaction["request"], interaction["response"]
    names = {name.lower() for name in request["headers"]}
    assert "keep-me" in names and not names & {"x-stainless-os", "x-stainless-arch", "x-custom"}
    assert "token=" not in request["uri"] and "keep=1" in request["uri"]
    body = json.loads(request["body"])
    assert "user" not in body and body["msg"] == "hi REDACTED" and body["model"] == "m"
    assert "x-stainless-resp" not in {n.lower() for n in response["headers"]}
    assert "x-request-id" in {n.lower() for n in response["headers"]}
    assert "acct-998877" not in json.dumps(response) and "for REDACTED" in json.dumps(response)
    # replay, provider gone: the live request is filtered the same way before matching
    # (the redacted answer is what replays: the inner assertion now sees REDACTED)
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert 'for REDACTED' == 'for acct-998877'*"])


def test_before_record_response_rewrites_or_drops_what_is_recorded(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = """{
    "before_record_response": lambda response: {**response, "body": {"string": response["body"]["string"].replace(b"998877", b"000000")}},
}"""
    raw_project(project, config)
    with emulator() as emu:
        monkeypatch.setenv("EMU", emu.base_url)
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    text = (project.path / "raw.yaml").read_text()
    assert "acct-000000" in text and "998877" not in text
    assert len(yaml.safe_load(text)["interactions"]) == 2


def test_use_cassette_in_a_test_follows_the_record_mode_of_the_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw_project(project, "{}")
    result = project.runpytest()  # none: nothing recorded, and the missing cassette says so
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*raw.yaml does not exist and the record mode is 'none'*"])
    project.makeini(ini("dsh_replay_record_mode = once"))
    with emulator() as emu:
        monkeypatch.setenv("EMU", emu.base_url)
        project.runpytest().assert_outcomes(passed=1)  # the ini's mode reaches use_cassette
    assert (project.path / "raw.yaml").is_file()


MODES = IMPORTS + '''
import os


@pytest.fixture(scope="module")
def dsh_replay_config():
    return {"record_mode": "new_episodes"}


def test_config(dsh_replay_record_mode, request):
    assert dsh_replay_record_mode == os.environ["EXPECT_CONFIG"]


@pytest.mark.dsh_replay(record_mode="all")
def test_marker(dsh_replay_record_mode):
    assert dsh_replay_record_mode == os.environ["EXPECT_MARKER"]


class TestOverridden:
    @pytest.fixture
    def dsh_replay_config(self):
        return {}

    def test_ini(self, dsh_replay_record_mode):
        assert dsh_replay_record_mode == os.environ["EXPECT_INI"]
'''


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), ("new_episodes", "all", "once")),  # ini < config < marker
        (("--record-mode=rewrite",), ("rewrite", "rewrite", "rewrite")),  # the command line wins
        (("-p", "no:recording", "--record-mode", "none"), ("none", "none", "none")),  # our own option
    ],
)
def test_settings_come_from_the_highest_layer_that_has_them(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], expected: tuple[str, ...],
) -> None:
    project.makeini(ini("dsh_replay_record_mode = once"))
    project.makepyfile(test_modes=MODES)
    for name, value in zip(("EXPECT_CONFIG", "EXPECT_MARKER", "EXPECT_INI"), expected, strict=True):
        monkeypatch.setenv(name, value)
    project.runpytest(*args).assert_outcomes(passed=3)


@pytest.mark.parametrize(("plugin", "expected"), [("no:recording", "once"), ("recording", None)])
def test_getoption_record_mode_works_with_and_without_pytest_recording(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, plugin: str, expected: str,
) -> None:
    # without pytest-recording it answers the run's mode; with it, pytest-recording's own value,
    # untouched (its vcr cassettes must not start recording because of our ini)
    project.makeini(ini("dsh_replay_record_mode = once"))
    project.makepyfile(test_opt='''
import os

def test_opt(request):
    assert request.config.getoption("--record-mode") == (os.environ["EXPECT"] or None)
''')
    monkeypatch.setenv("EXPECT", expected or "")
    project.runpytest("-p", plugin).assert_outcomes(passed=1)
    monkeypatch.setenv("EXPECT", "all")
    project.runpytest("-p", plugin, "--record-mode=all").assert_outcomes(passed=1)


def test_a_recording_mode_from_the_config_is_refused_in_ci(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_modes=MODES)
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("EXPECT_CONFIG", "x")
    result = project.runpytest("-k", "test_config")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*dsh_replay_config record_mode = new_episodes is refused because CI is set*"])


def test_a_bad_config_names_the_key(project: pytest.Pytester) -> None:
    project.makepyfile(test_bad='''
import pytest

@pytest.fixture(scope="module")
def dsh_replay_config():
    return {"filter_header": ["x"]}

def test_it():
    pass
''')
    result = project.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        ["*dsh_replay_config: unknown key(s) filter_header (did you mean filter_headers?); valid: *"]
    )


def test_the_config_cassette_dir_is_used_and_never_pruned(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.makepyfile(test_dir=IMPORTS + '''

@pytest.fixture(scope="module")
def dsh_replay_config():
    return {"cassette_dir": "elsewhere"}


def test_echo(dsh_replay):
    dsh_replay.run(make_adapter(), make_options())
''')
    with provider(monkeypatch, streaming(ndjson("Hel", "lo"))):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    folder = project.path / "elsewhere" / "test_dir"
    assert sorted(p.name for p in folder.iterdir()) == ["test_echo.chunks.jsonl", "test_echo.yaml"]
    # a cassette there that no test of this run opened may be a skipped test's: it stays
    (folder / "test_gone.yaml").write_bytes((folder / "test_echo.yaml").read_bytes())
    result = project.runpytest("--prune-unused")
    result.assert_outcomes(passed=1)
    assert (folder / "test_gone.yaml").is_file()
    assert not any("test_gone" in line for line in summary(result))
