"""``dsh-replay serve``: the command's checks in-process, the server itself as a subprocess on loopback."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_replay.cassette.store import Cassette
from dsh_replay.cli import serve as serve_command
from dsh_replay.cli.serve import is_loopback

from .conftest import ROOT, run

TEXT = ROOT / "cassettes" / "openai" / "text.yaml"
GUARD = 20.0  # seconds: a hang guard for start-up and shutdown, never a timing assertion
FIRST_LINE = re.compile(r"serving (\d+) cassettes on http://127\.0\.0\.1:(\d+)")


@dataclass
class Served:
    process: subprocess.Popen[str]
    count: int
    base_url: str

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str, str]:
        self.process.send_signal(signum)
        out, err = self.process.communicate(timeout=GUARD)
        return self.process.returncode, out, err


def _first_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=GUARD):
            raise AssertionError("dsh-replay serve printed nothing")
    return process.stdout.readline()


@contextmanager
def serving(*argv: str, descriptors: int | None = None, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``dsh-replay serve ARGV`` in a subprocess; with ``descriptors``, under ``ulimit -n DESCRIPTORS``."""
    command = [sys.executable, "-m", "dsh_replay", "serve", *argv]
    if descriptors is not None:
        command = ["sh", "-c", f'ulimit -n {descriptors} && exec "$@"', "sh", *command]
    process = subprocess.Popen(command, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        line = _first_line(process)
        found = FIRST_LINE.fullmatch(line.strip())
        assert found, (line, process.stderr.read() if process.poll() is not None and process.stderr else "")
        yield Served(process, int(found[1]), f"http://127.0.0.1:{found[2]}")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=GUARD)


def recorded_request(path: Path = TEXT, position: int = 0) -> tuple[str, bytes]:
    request = Cassette.load(path).interactions[position].request
    return httpx.URL(request.uri).path, request.body


def test_serves_a_recorded_stream_and_stops_cleanly_on_sigterm() -> None:
    interaction = Cassette.load(TEXT).interactions[0]
    path, body = recorded_request()
    with serving(str(TEXT), "--port", "0") as served:
        assert served.count == 1
        with httpx.Client(base_url=served.base_url, timeout=GUARD) as client, \
                client.stream("POST", path, content=body, headers={"content-type": "application/json"}) as response:
            pieces = list(response.iter_raw())
        code, out, err = served.stop()
    assert response.status_code == 200
    assert response.headers["content-type"] == interaction.headers[0][1]
    assert b"".join(pieces) == interaction.body
    assert code == 0 and out == ""
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "dsh-replay serve: stopped after 1 request(s), 0 unmatched"


def test_a_folder_serves_every_cassette_and_a_miss_is_a_json_404() -> None:
    with serving("cassettes/openai") as served:
        assert served.count == len(list((ROOT / "cassettes" / "openai").glob("*.yaml")))
        missing = httpx.post(f"{served.base_url}/v1/chat/completions", json={"model": "gpt-4.1-mini"}, timeout=GUARD)
        path, body = recorded_request()
        picked = httpx.post(f"{served.base_url}/_dsh/openai/text/-{path}", content=body, timeout=GUARD)
        code, _, err = served.stop(signal.SIGINT)
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["type"] == "dsh_replay_no_match" and error["nearest"].startswith("cassettes/openai/")
    assert "body.messages" in error["diff"]
    assert picked.status_code == 200 and picked.content == Cassette.load(TEXT).interactions[0].body
    assert code == 0 and "Traceback" not in err
    assert "note: cassettes/openai/text.yaml records the same requests as cassettes/openai/rate-limited.yaml" in err


def test_shutdown_closes_a_connection_mid_stream() -> None:
    path, body = recorded_request()
    # at 100x the recorded pace the stream takes seconds: it is still open when the server stops
    with serving(str(TEXT), "--speed", "100") as served, httpx.Client(timeout=GUARD) as client, \
            client.stream("POST", served.base_url + path, content=body) as response:
        stream = response.iter_raw()
        first = next(stream)
        code, _, err = served.stop()
        with pytest.raises(httpx.TransportError):
            for _ in stream:
                pass
    assert first and code == 0 and "Traceback" not in err


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com"])
def test_a_non_loopback_host_is_refused_without_allow_remote(host: str) -> None:
    result = run("serve", str(TEXT), "--host", host)
    assert result.code == 2
    assert result.err == (f"dsh-replay: error: --host {host} is not a loopback address: other machines could read "
                          "the cassettes. Use 127.0.0.1 (the default), or add --allow-remote if that is intended\n")


def test_loopback_hosts() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost")] == [True] * 5
    assert [is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "localhost.example")] == [False] * 4


@pytest.mark.parametrize(("argv", "message"), [
    (["--speed", "-1"], "replay speed must be a number from 0 to 100"),
    (["--speed", "fast"], "replay speed must be a number from 0 to 100"),
    (["--port", "70000"], "--port must be from 0 to 65535"),
])
def test_bad_options_are_one_line_errors(argv: list[str], message: str) -> None:
    result = run("serve", str(TEXT), *argv)
    assert result.code == 2 and message in result.err and result.err.count("\n") == 1


def test_paths_without_cassettes_are_refused(tmp_path: Path) -> None:
    (tmp_path / "plain.yaml").write_text("interactions: []\nversion: 1\n", encoding="utf-8")
    result = run("serve", str(tmp_path))
    assert result.code == 2
    assert f"no cassettes with dsh_replay metadata under {tmp_path} (1 YAML file(s) without it" in result.err
    missing = run("serve", str(tmp_path / "nope"))
    assert (missing.code, missing.err) == (2, f"dsh-replay: error: {tmp_path / 'nope'}: no such file or folder\n")


def test_a_corrupt_cassette_is_named_before_serving(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("dsh_replay: {format: 1}\ninteractions: [{request: 3}]\n", encoding="utf-8")
    result = run("serve", str(bad))
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"dsh-replay: error: cassette {bad}: interactions[0]")


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", str(TEXT), "--port", str(port))
    assert result.code == 2
    assert result.err.startswith(f"dsh-replay: error: cannot listen on 127.0.0.1:{port}: ")
    assert "choose another --port (0 picks a free one)" in result.err


class Terminated(Exception):
    """SIGTERM reached the handler that was in place before ``serve`` ran."""


def _terminated(*_: object) -> None:
    raise Terminated


@pytest.fixture
def stopped_while_loading(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """SIGTERM arrives while the cassettes are being found, before the server listens.

    A signal ``serve`` did not take reaches :func:`_terminated`, never the test run's own handler.
    """
    previous = signal.signal(signal.SIGTERM, _terminated)
    find = serve_command._cassette_paths

    def find_then_signal(paths: list[str], *more: Any) -> tuple[list[Path], dict[Path, Any]]:
        os.kill(os.getpid(), signal.SIGTERM)
        return find(paths, *more)

    monkeypatch.setattr(serve_command, "_cassette_paths", find_then_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("stopped_while_loading")
def test_a_stop_while_loading_still_ends_cleanly() -> None:
    result = run("serve", str(TEXT))
    assert result.code == 0
    assert FIRST_LINE.fullmatch(result.out.strip())
    assert result.err.splitlines()[-1] == "dsh-replay serve: stopped after 0 request(s), 0 unmatched"
    assert signal.getsignal(signal.SIGTERM) is _terminated  # handed back as it was


@pytest.mark.usefixtures("stopped_while_loading")
def test_localhost_binds_one_address_the_one_printed() -> None:
    # "localhost" may resolve to ::1 and 127.0.0.1; with --port 0 each would get its own port
    result = run("serve", str(TEXT), "--host", "localhost")
    assert result.code == 0
    assert FIRST_LINE.fullmatch(result.out.strip()), result.out


# test keys shaped like real ones (the secret scan finds them)
OPENAI_KEY = "sk-test-" + "Vb7Qx2Lm9Rt4Kp8Zs3Wd6Hj1Nc5Gf0Ea"
GOOGLE_KEY = "AIza" + "SyD3f8Kq1Lm2Np3Or4St5Uv6Wx7Yz8Ab9Cd"


def test_the_log_shows_paths_but_never_a_key_from_the_query() -> None:
    path, body = recorded_request()
    with serving(str(TEXT)) as served, httpx.Client(base_url=served.base_url, timeout=GUARD) as client:
        statuses = [client.post(f"{path}?key={OPENAI_KEY}", content=body).status_code,
                    client.get(f"/v1beta/models?alt=sse&key={GOOGLE_KEY}").status_code]
        code, _, err = served.stop()
    assert statuses == [404, 404] and code == 0
    assert f"POST {path}?key=REDACTED -> 404 no match" in err
    assert "GET /v1beta/models?alt=sse&key=REDACTED -> 404 no match" in err
    assert OPENAI_KEY not in err and GOOGLE_KEY not in err


def _read_all(socks: list[socket.socket]) -> list[bytes]:
    """What the server sent on each connection, up to its close; GUARD seconds for them all."""
    deadline = time.monotonic() + GUARD
    got = []
    for sock in socks:
        data = b""
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        while piece := sock.recv(65536):
            data += piece
        got.append(data)
        sock.close()
    return got


def test_idle_connections_over_the_limit_get_a_503_logged_once_and_serving_goes_on() -> None:
    path, body = recorded_request()
    with serving(str(TEXT), "--max-connections", "5", "--idle-timeout", "0.2") as served:
        host, port = served.base_url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port)), timeout=GUARD) for _ in range(8)]
        # the first five are served and closed when idle; the last three are turned away at once
        answers = _read_all(idle)
        answer = httpx.post(served.base_url + path, content=body, timeout=GUARD)
        code, _, err = served.stop()
    assert [raw[:12] for raw in answers] == [b""] * 5 + [b"HTTP/1.1 503"] * 3
    assert answer.status_code == 200 and answer.content == Cassette.load(TEXT).interactions[0].body
    assert code == 0 and "Traceback" not in err
    lines = err.splitlines()
    assert [line for line in lines if "connections open" in line] == [
        "5 connections open, the most served at once: further ones are answered 503 until one closes (logged once)"
    ]
    assert lines[-1] == "dsh-replay serve: stopped after 1 request(s), 0 unmatched, 3 connection(s) turned away (503)"


def test_running_out_of_descriptors_is_logged_once_and_serving_goes_on() -> None:
    path, body = recorded_request()
    # more connections than descriptors (a limit over the limit): accept() itself fails for a while
    with serving(str(TEXT), "--max-connections", "500", "--idle-timeout", "0.2", descriptors=40) as served:
        host, port = served.base_url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port)), timeout=GUARD) for _ in range(60)]
        answers = _read_all(idle)
        answer = httpx.post(served.base_url + path, content=body, timeout=GUARD)
        code, _, err = served.stop()
    assert answers == [b""] * 60
    assert answer.status_code == 200
    assert code == 0 and "Traceback" not in err and "out of system resource" not in err
    assert len([line for line in err.splitlines() if line.startswith("cannot accept connections: ")]) == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["--idle-timeout", "0"], "--idle-timeout must be a number of seconds above 0, got 0"),
    (["--idle-timeout", "soon"], "--idle-timeout must be a number of seconds above 0, got soon"),
    (["--max-connections", "0"], "--max-connections must be 1 or more, got 0"),
])
def test_bad_limits_are_one_line_errors(argv: list[str], message: str) -> None:
    result = run("serve", str(TEXT), *argv)
    assert (result.code, result.err) == (2, f"dsh-replay: error: {message}\n")


def test_the_limits_default_to_the_servers() -> None:
    from dsh_replay.cli.main import command_parser
    from dsh_replay.server.http import IDLE_TIMEOUT, MAX_CONNECTIONS

    help_text = " ".join(command_parser("serve").format_help().split())
    assert f"(default {IDLE_TIMEOUT:g})" in help_text and f"(default {MAX_CONNECTIONS}," in help_text
