"""``dsh-replay record``: one live call into a cassette + golden (never in CI, never a key on disk)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_replay.testing import ProviderEmulator, ScriptedResponse

from .conftest import CASES, run, streaming

KEY = "sk-test-record0123456789abcdef"
OPTIONS = {"model": "m1", "messages": [{"role": "user", "content": "say hello"}]}


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        emulator.add("POST", "/v1/generate", streaming(CASES["greeting"][1]))
        yield emulator


@pytest.fixture
def options_file(project: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (project / "options.json").write_text(json.dumps(OPTIONS), encoding="utf-8")
    monkeypatch.setenv("MY_PROVIDER_API_KEY", KEY)
    return "options.json"


def record(base_url: str, out: str = "new/hello.yaml", route: str = "my-provider", options: str = "options.json",
           *, force: bool = False) -> list[str]:
    return ["record", "--route", route, "--options", options, "--out", out, "--base-url", base_url,
            *(["--force"] if force else [])]


def test_records_a_cassette_and_its_golden_that_check_then_replays(
    project: Path, options_file: str, emu: ProviderEmulator
) -> None:
    result = run(*record(emu.base_url))
    assert result.code == 0, result.err
    assert result.out == (
        "recorded new/hello.yaml (6 chunks); golden new/hello.chunks.jsonl written\n"
        "ok: 6 chunks, 1 block(s); rules P1-P12 hold\n"
    )
    # the key went to the provider, in the header, and nowhere else
    assert emu.requests[0].headers["authorization"] == f"Bearer {KEY}"
    text = (project / "new" / "hello.yaml").read_text(encoding="utf-8")
    assert KEY not in text
    assert text.startswith("dsh_replay:\n  format: 1\n  route: my-provider\n")
    golden = (project / "new" / "hello.chunks.jsonl").read_bytes()
    assert golden == (project / "cassettes" / "my-provider" / "greeting.chunks.jsonl").read_bytes()
    # offline, with the emulator gone, the new case is part of the main job
    emu.stop()
    checked = run("check", "new")
    assert checked.code == 0, checked.out
    assert "hello  my-provider  3          6       1       ok" in checked.out


def test_refused_in_ci(project: Path, options_file: str, emu: ProviderEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    result = run(*record(emu.base_url))
    assert result.code == 2
    assert result.err == ("dsh-replay: error: record is refused because CI is set: CI only replays. "
                          "Record locally and commit.\n")
    assert emu.requests == []
    assert not (project / "new").exists()


def test_the_key_comes_from_the_routes_variable(project: Path, options_file: str, emu: ProviderEmulator,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_PROVIDER_API_KEY")
    result = run(*record(emu.base_url))
    assert result.code == 2
    assert result.err == ("dsh-replay: error: route 'my-provider' needs its key in the environment variable "
                          "MY_PROVIDER_API_KEY\n")
    assert emu.requests == []


def test_a_provider_that_is_down_records_nothing_and_keeps_the_old_cassette(project: Path, options_file: str) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    old = project / "cassettes" / "my-provider" / "greeting.yaml"
    before = old.read_bytes()
    golden = old.with_name("greeting.chunks.jsonl").read_bytes()
    result = run(*record(closed, out=str(old), force=True))
    assert result.code == 2
    assert result.err.startswith(f"dsh-replay: error: nothing was recorded into {old}: the call failed before any response (ConnectError")
    assert "Check --base-url and the network" in result.err
    assert old.read_bytes() == before
    assert old.with_name("greeting.chunks.jsonl").read_bytes() == golden


def test_an_error_response_is_recorded_with_its_raised_golden(project: Path, options_file: str) -> None:
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/generate", ScriptedResponse.json({"error": "bad key"}, status=401))
        result = run(*record(emu.base_url))
    assert result.code == 1
    assert "recorded new/hello.yaml (0 chunks)" in result.out
    assert "raised HTTPStatusError: Client error '401 Unauthorized'" in result.out
    assert (project / "new" / "hello.chunks.jsonl").read_text(encoding="utf-8").startswith(
        '{"type":"raised","error":"HTTPStatusError"'
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "options.json: cannot read (No such file or directory)"),
        ("{not json", "options.json: not valid JSON ("),
        ('{"messages": []}', "options.json: options.messages must hold at least one message"),
        ('{"model": 5, "messages": "hi"}', "options.json: options.messages must be a list, got 'hi'"),
        ("[1]", "options.json: options must be a JSON object, got [1]"),
    ],
)
def test_bad_options_files_are_named(project: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, message: str) -> None:
    monkeypatch.setenv("MY_PROVIDER_API_KEY", KEY)
    if content is not None:
        (project / "options.json").write_text(content, encoding="utf-8")
    result = run(*record("http://127.0.0.1:9"))
    assert result.code == 2
    assert result.err.startswith("dsh-replay: error: ")
    assert message in result.err


def test_unknown_route(project: Path, options_file: str) -> None:
    result = run(*record("http://127.0.0.1:9", route="nobody"))
    assert result.code == 2
    assert result.err.startswith("dsh-replay: error: unknown route 'nobody'. Known routes: anthropic, ")


def test_end_to_end_through_the_console(project: Path, options_file: str, emu: ProviderEmulator) -> None:
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    done = subprocess.run([sys.executable, "-m", "dsh_replay", *record(emu.base_url)],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("recorded new/hello.yaml (6 chunks)")
    done = subprocess.run([sys.executable, "-m", "dsh_replay", *record(emu.base_url)],
                          capture_output=True, text=True, env={**env, "CI": "1"}, check=False)
    assert done.returncode == 2
    assert "refused because CI is set" in done.stderr and "Traceback" not in done.stderr


ACME = Path(__file__).resolve().parents[2] / "examples" / "acme_adapter"
ACME_BODY = b'event: delta\ndata: {"text": "Hi"}\n\nevent: done\ndata: {"stop": "end_turn", "usage": {"input": 2, "output": 1}}\n\n'


def test_a_plugin_route_records_with_the_key_and_url_of_its_yaml(
    project: Path, options_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/respond", ScriptedResponse.streaming(ACME_BODY))
        monkeypatch.setenv("ACME_BASE_URL", emu.base_url)
        monkeypatch.setenv("ACME_API_KEY", "acme-key-from-the-environment")
        result = run("record", "--route", "acme", "--plugins", str(ACME / "dsh.yml"), "--options", options_file,
                     "--out", "acme/hi.yaml")
        assert result.code == 0, result.err
        assert emu.requests[0].headers["authorization"] == "Bearer acme-key-from-the-environment"
        # the plugin built the adapter: --base-url cannot reach it, and says where to set it instead
        result = run("record", "--route", "acme", "--plugins", str(ACME / "dsh.yml"), "--options", options_file,
                     "--out", "acme/hi.yaml", "--force", "--base-url", emu.base_url)
        assert result.code == 2
        assert "set its base URL in the plugin YAML" in result.err
    assert (project / "acme" / "hi.chunks.jsonl").read_text(encoding="utf-8").splitlines()[1] == (
        '{"type":"text-delta","index":0,"text":"Hi"}'
    )
    assert run("check", "--plugins", str(ACME / "dsh.yml"), "acme").code == 0


@pytest.mark.parametrize(
    ("out", "prepare", "message"),
    [
        ("new/hello", None, "--out new/hello: name a .yaml file"),
        ("taken.yaml", "dir:taken.yaml", "--out taken.yaml: taken.yaml is a folder; remove it or choose another name"),
        ("x.yaml", "dir:x.chunks.jsonl", "--out x.yaml: x.chunks.jsonl is a folder; remove it or choose another name"),
        ("afile/x.yaml", "file:afile", "afile is a file, so the folder for x.yaml cannot be made"),
    ],
)
def test_an_unusable_out_path_is_refused_before_the_call(
    project: Path, options_file: str, emu: ProviderEmulator, out: str, prepare: str | None, message: str
) -> None:
    if prepare:
        kind, name = prepare.split(":")
        if kind == "dir":
            (project / name).mkdir()
        else:
            (project / name).write_text("x", encoding="utf-8")
    result = run(*record(emu.base_url, out=out))
    assert result.code == 2
    assert result.err.startswith("dsh-replay: error: ") and message in result.err
    assert emu.requests == []  # nothing was paid for


def test_an_existing_cassette_and_golden_are_kept_unless_force(
    project: Path, options_file: str, emu: ProviderEmulator
) -> None:
    cassette = Path("cassettes/my-provider/greeting.yaml")
    golden = cassette.with_name("greeting.chunks.jsonl")
    before = {path: path.read_bytes() for path in (cassette, golden)}
    result = run(*record(emu.base_url, out=str(cassette)))
    assert (result.code, result.out) == (2, "")
    assert result.err == (f"dsh-replay: error: --out {cassette}: {cassette} and {golden} already exist; "
                          "pass --force to overwrite, or choose another name\n")
    assert emu.requests == []  # refused before the call was paid for
    assert {path: path.read_bytes() for path in before} == before

    result = run(*record(emu.base_url, out=str(cassette), force=True))
    assert result.code == 0, result.err
    assert result.out.startswith(f"recorded {cassette} (6 chunks); golden {golden} matched\n")
    assert len(emu.requests) == 1
    assert cassette.read_bytes() != before[cassette]  # recorded afresh: new timings


def test_a_golden_without_its_cassette_is_kept_unless_force(
    project: Path, options_file: str, emu: ProviderEmulator
) -> None:
    golden = project / "new" / "hello.chunks.jsonl"
    golden.parent.mkdir()
    golden.write_text('{"type":"finish","reason":{"kind":"stop"}}\n', encoding="utf-8")
    result = run(*record(emu.base_url))
    assert result.code == 2
    assert result.err == (f"dsh-replay: error: --out new/hello.yaml: {Path('new/hello.chunks.jsonl')} already exists; "
                          "pass --force to overwrite, or choose another name\n")
    assert emu.requests == []
    assert not (project / "new" / "hello.yaml").exists()
    assert run(*record(emu.base_url, force=True)).code == 0
    assert golden.read_bytes() == (project / "cassettes" / "my-provider" / "greeting.chunks.jsonl").read_bytes()


def test_the_options_file_is_never_replaced_even_with_force(
    project: Path, monkeypatch: pytest.MonkeyPatch, emu: ProviderEmulator
) -> None:
    monkeypatch.setenv("MY_PROVIDER_API_KEY", KEY)
    options = project / "case.yaml"  # JSON is YAML: an options file may well be named so
    options.write_text(json.dumps(OPTIONS), encoding="utf-8")
    for force in (False, True):
        result = run(*record(emu.base_url, out="case.yaml", options="case.yaml", force=force))
        assert (result.code, result.out) == (2, "")
        assert result.err == ("dsh-replay: error: refusing to write the cassette to case.yaml: it is the --options "
                              "file; choose another --out\n")
    golden_named = project / "opts.chunks.jsonl"
    golden_named.write_text(json.dumps(OPTIONS), encoding="utf-8")
    result = run(*record(emu.base_url, out="opts.yaml", options="opts.chunks.jsonl", force=True))
    assert result.err == ("dsh-replay: error: refusing to write the golden to opts.chunks.jsonl: it is the --options "
                          "file; choose another --out\n")
    assert emu.requests == []
    assert json.loads(options.read_text(encoding="utf-8")) == OPTIONS
    assert json.loads(golden_named.read_text(encoding="utf-8")) == OPTIONS


def test_a_temp_file_a_killed_record_left_is_removed(project: Path, options_file: str, emu: ProviderEmulator) -> None:
    folder = project / "new"
    folder.mkdir()
    stale, other = folder / ".dsh-replay-0123456789abcdef.tmp", folder / ".dsh-replay-notours.tmp"
    for path in (stale, other):
        path.write_bytes(b"half a cassette")
        os.utime(path, (1_000_000_000, 1_000_000_000))
    result = run(*record(emu.base_url))
    assert result.code == 0, result.err
    assert sorted(p.name for p in folder.iterdir()) == [".dsh-replay-notours.tmp", "hello.chunks.jsonl", "hello.yaml"]
