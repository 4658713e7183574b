"""``dsh-replay serve --record`` as a user runs it: a subprocess in front of a loopback emulator.

Signals: SIGTERM with a recording open finishes it as cut and writes it whole;
SIGKILL leaves the cassette that was there as it was. Waits are hang guards.
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
def test_a_stop_signal_finishes_an_open_recording_as_cut_and_writes_it_whole(tmp_path: Path, signum: int) -> None:
    request, body = text_case()
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body, fragment_sizes=64, delay=0.2))
        with recording(tmp_path, "--upstream", f"openai={emu.base_url}", "--allow-insecure-upstream") as served, \
                httpx.Client(timeout=GUARD) as client, \
                client.stream("POST", f"{served.base_url}/_dsh/openai/long/-{CHAT}", content=request) as response:
            pieces = response.iter_raw()
            seen = next(pieces)
            code, _, err = served.stop(signum)
            with pytest.raises(httpx.TransportError):  # reset: never taken for a whole response
                for piece in pieces:
                    seen += piece
    assert code == 0 and "Traceback" not in err, err
    assert "recorded openai/long (200, " in err and "cut: the server stopped)" in err
    interaction = Cassette.load(tmp_path / "openai" / "long.yaml").interactions[0]
    assert interaction.complete is False and interaction.body.startswith(seen) and len(interaction.body) < len(body)
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
