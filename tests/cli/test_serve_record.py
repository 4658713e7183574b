"""``dsh-replay serve --record`` as a user runs it: a subprocess in front of a loopback emulator.

Signals: SIGTERM or SIGINT with recordings open drops them, as pytest drops a
recording cut short; SIGKILL leaves the cassette that was there as it was. Waits are hang guards.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from dsh_replay.cassette.config import KEYS, RecordingConfig
from dsh_replay.cassette.store import Cassette
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

from .conftest import ROOT, run
from .test_serve import FIRST_LINE, GUARD, Served, _first_line, serving

CHAT = "/v1/chat/completions"
KEY = "sk-test-cliProxyKey0123456789abcdef"
TEXT = ROOT / "cassettes" / "openai" / "text.yaml"


def no_ci() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "CI"}


def recording(folder: Path, *argv: str) -> AbstractContextManager[Served]:
    """``dsh-replay serve --record FOLDER ARGV`` in a subprocess, CI unset."""
    return serving("--record", str(folder), *argv, env=no_ci())


def text_case() -> tuple[bytes, bytes]:
    interaction = Cassette.load(TEXT).interactions[0]
    return bytes(interaction.request.body), interaction.body


def test_records_into_a_new_folder_and_the_first_line_is_serve_s(tmp_path: Path) -> None:
    request, body = text_case()
    folder = tmp_path / "new" / "cassettes"
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body))
        with recording(folder, "--upstream", emu.base_url, "--allow-insecure-upstream", "--route", "openai") as served:
            assert served.count == 0
            answer = httpx.post(f"{served.base_url}{CHAT}", content=request, timeout=GUARD,
                                headers={"authorization": f"Bearer {KEY}", "x-dsh-replay-cassette": "node/hello"})
            code, out, err = served.stop()
    assert (answer.status_code, answer.content) == (200, body)
    lines = err.splitlines()
    assert re.fullmatch(r"recorded node/hello \(200, \d+ fragments, 4,155 B\)", lines[0]), lines
    assert lines[-1] == ("dsh-replay serve: stopped after 1 request(s): 1 recorded, 0 replayed, 0 refused; "
                         "1 cassette(s) written")
    recorded = Cassette.load(folder / "node" / "hello.yaml")
    assert recorded.metadata["route"] == "openai" and recorded.interactions[0].body == body
    assert code == 0 and out == "" and KEY not in (folder / "node" / "hello.yaml").read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_drops_the_recordings_it_cuts_leaving_a_good_cassette_as_it_was(
    tmp_path: Path, signum: int,
) -> None:
    request, body = text_case()
    options = ("--allow-insecure-upstream", "--record-mode", "rewrite")
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body))
        with recording(tmp_path, "--upstream", f"openai={emu.base_url}", *options) as served:
            httpx.post(f"{served.base_url}/_dsh/openai/long/-{CHAT}", content=request, timeout=GUARD)
            served.stop()
    good = tmp_path / "openai" / "long.yaml"
    before = good.read_bytes()
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body, fragment_sizes=64, delay=0.2))
        with recording(tmp_path, "--upstream", f"openai={emu.base_url}", *options) as served, \
                httpx.Client(timeout=GUARD) as client, \
                client.stream("POST", f"{served.base_url}/_dsh/openai/long/-{CHAT}", content=request) as old, \
                client.stream("POST", f"{served.base_url}/_dsh/openai/new/-{CHAT}", content=request) as new:
            streams = [old.iter_raw(), new.iter_raw()]
            for pieces in streams:
                next(pieces)
            code, _, err = served.stop(signum)
            for pieces in streams:
                with pytest.raises(httpx.TransportError):  # reset: never taken for a whole response
                    for _ in pieces:
                        pass
    assert code == 0 and "Traceback" not in err, err
    assert "recorded openai/long (200, " in err and "cut: the server stopped; not written)" in err
    assert err.splitlines()[-1] == ("dsh-replay serve: stopped after 2 request(s): 0 recorded, 0 replayed, 0 refused, "
                                    "2 cut by the stop; 0 cassette(s) written; not written, as the stop cut them: "
                                    "openai/long, openai/new")
    assert good.read_bytes() == before and not (tmp_path / "openai" / "new.yaml").exists()
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []


def test_a_killed_proxy_leaves_the_cassette_it_was_adding_to_as_it_was(tmp_path: Path) -> None:
    request, body = text_case()
    other = request.replace(b"Say hello.", b"Say goodbye.")
    options = ("--allow-insecure-upstream", "--record-mode", "new_episodes")
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body, fragment_sizes=64, delay=0.005))
        with recording(tmp_path, "--upstream", f"openai={emu.base_url}", *options) as served:
            httpx.post(f"{served.base_url}/_dsh/openai/kept/-{CHAT}", content=request, timeout=GUARD)
            served.stop()
    before = (tmp_path / "openai" / "kept.yaml").read_bytes()
    # an emulator of its own: the only answer it has is the slow one, which is still streaming at the kill
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body, fragment_sizes=64, delay=0.3))
        with recording(tmp_path, "--upstream", f"openai={emu.base_url}", *options) as served, \
                httpx.Client(timeout=GUARD) as client, \
                client.stream("POST", f"{served.base_url}/_dsh/openai/kept/-{CHAT}", content=other) as response:
            next(response.iter_raw())
            served.process.kill()
            served.process.communicate(timeout=GUARD)
    assert (tmp_path / "openai" / "kept.yaml").read_bytes() == before


@pytest.mark.parametrize(("argv", "message"), [
    (["--upstream", "http://api.example.test"], "is not https://"),
    (["--upstream", "https://api.example.test", "--host", "0.0.0.0"], "not a loopback address"),
    (["--record-mode", "bogus"], "invalid choice"),
])
def test_bad_recording_options_are_one_line_errors(tmp_path: Path, argv: list[str], message: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    result = run("serve", "--record", str(tmp_path), *argv)
    assert result.code == 2 and message in result.err and "Traceback" not in result.err


def test_recording_options_without_record_and_recording_in_ci_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = run("serve", str(TEXT), "--upstream", "https://api.example.test")
    assert (result.code, result.err.split(": add ")[-1]) == (2, "--record\n")
    monkeypatch.setenv("CI", "true")
    result = run("serve", "--record", str(tmp_path), "--upstream", "https://api.example.test")
    assert result.code == 2 and "refused because CI is set" in result.err


def test_match_on_is_read_from_the_option_then_pyproject_and_the_404_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    request, _ = text_case()
    (tmp_path / "pyproject.toml").write_text('[tool.dsh_replay]\nmatch_on = ["method", "path"]\n')
    command = [sys.executable, "-m", "dsh_replay", "serve", str(TEXT)]
    for extra, status, matchers in (([], 200, ["method", "path"]), (["--match-on", "method,path,body"], 404,
                                                                      ["method", "path", "body"])):
        process = subprocess.Popen([*command, *extra], cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        try:
            found = FIRST_LINE.fullmatch(_first_line(process).strip())
            assert found
            answer = httpx.post(f"http://127.0.0.1:{found[2]}{CHAT}", content=request.replace(b"hello", b"bye"),
                                timeout=GUARD)
            miss = httpx.post(f"http://127.0.0.1:{found[2]}/v1/other", content=request, timeout=GUARD)
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=GUARD)
        assert answer.status_code == status
        assert miss.status_code == 404 and miss.json()["error"]["matchers"] == matchers


def refused(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``dsh-replay serve ARGV`` in a subprocess, CI unset: a server that starts instead is stopped by the guard."""
    return subprocess.run([sys.executable, "-m", "dsh_replay", "serve", *argv], cwd=cwd, env=no_ci(),
                          capture_output=True, text=True, timeout=GUARD)


def test_an_upstream_for_a_route_nobody_knows_is_refused_with_the_nearest_known_one(tmp_path: Path) -> None:
    result = refused("--record", str(tmp_path), "--upstream", "opena=https://api.example.test")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "dsh-replay: error: --upstream opena=https://api.example.test: unknown route 'opena'. Did you mean "
        "'openai'? Known routes: anthropic, deepseek, gemini, ollama, openai, openai-compatible, openai-responses"
    ]


def test_a_key_of_tool_dsh_replay_nothing_reads_is_refused_with_the_nearest_valid_one(tmp_path: Path) -> None:
    # a misspelt filter would let the header it names into the recordings
    (tmp_path / "pyproject.toml").write_text('[tool.dsh_replay]\nfilter_header = ["x-org-id"]\n')
    for argv in (["--record", "recorded", "--upstream", "https://api.example.test"], [str(TEXT)]):
        result = refused(*argv, cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        message = result.stderr.strip()
        assert "\n" not in message and message.startswith(
            "dsh-replay: error: pyproject.toml [tool.dsh_replay] has an unknown field 'filter_header' "
            "(did you mean filter_headers?); known: "), message


FILTERED = '["x-org-id"]'


def _documented_tool_dsh_replay() -> str:
    """A ``[tool.dsh_replay]`` holding every key and sub-table the docs, the README and the examples use."""
    keys: set[str] = set()
    tables: set[str] = set()
    texts = [path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                                           *sorted((ROOT / "examples").rglob("pyproject.toml"))]]
    for text in texts:
        tables.update(re.findall(r"\[tool\.dsh_replay\.([A-Za-z_]+)\]", text))
        for block in re.split(r"\n\s*\n", text):  # the keys a paragraph or a TOML table gives [tool.dsh_replay]
            if "[tool.dsh_replay]" in block:
                found = re.findall(r"`([a-z_]+)`|^\s*([a-z_]+)\s*=", block, re.MULTILINE)
                keys.update(name for pair in found for name in pair if name in KEYS)
    assert {"routes", "hosts"} <= tables and {"match_on", "filter_headers", "redact"} <= keys, (tables, keys)
    values = {"match_on": '["method", "path"]', "redact": '["secret-[0-9]+"]'}
    lines = ["[tool.dsh_replay]", *(f"{key} = {values.get(key, FILTERED)}" for key in sorted(keys))]
    for table in sorted(tables):
        lines.append(f"[tool.dsh_replay.{table}]")
    return "\n".join(lines) + "\n"


def test_every_key_the_docs_give_tool_dsh_replay_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("pyproject.toml").write_text(_documented_tool_dsh_replay())
    config = RecordingConfig.from_pyproject(Path("pyproject.toml"))
    assert config.match_on == ("method", "path") and config.filters.headers
