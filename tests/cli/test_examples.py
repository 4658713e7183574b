"""The README's story, executable: ``examples/acme_adapter`` is a third-party adapter package with its
own tests, cassettes and goldens. Its suite runs here in a subprocess, replay only (CI set, so
nothing may record), and its cassettes pass the main job with the acme route configured.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_replay.cassette.store import Cassette

from .conftest import ROOT, run

ACME = ROOT / "examples" / "acme_adapter"
CASSETTES = ACME / "tests" / "cassettes"

TABLE = [
    "case                                               route  fragments  chunks  blocks  verdict",
    "-------------------------------------------------  -----  ---------  ------  ------  ---------------------------",
    "test_overloaded_mid_stream                         acme   3          2       1       ok (raised OverloadedError)",
    "test_parallel_tool_calls_become_sequential_blocks  acme   7          13      3       ok",
    "test_plugin_yaml_registers_the_route               acme   3          5       1       ok",
    "test_text_answer                                   acme   6          7       1       ok",
    "test_tool_call                                     acme   5          6       1       ok",
    "test_tool_result_in_history                        acme   4          6       1       ok",
    "",
    "6 case(s), 39 chunks: 6 passed, 0 failed",
]


def snapshot() -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(CASSETTES.rglob("*")) if path.is_file()}


def without_time(output: str) -> list[str]:
    return [re.sub(r"  +(time|-+|\d+ ms)$", "", line) for line in output.splitlines()]


def test_the_example_suite_replays_offline() -> None:
    before = snapshot()
    env = {**os.environ, "CI": "1"}
    for name in ("ACME_BASE_URL", "ACME_API_KEY", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(ACME), "-p", "no:cacheprovider", "-q"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert re.search(r"^6 passed in ", output, re.MULTILINE), output
    summary = output.split(" dsh-replay ", 1)[1].splitlines()[1:6]
    assert summary == [
        "cassettes: 6 replayed, 0 recorded",
        "goldens: 6 matched, 0 written, 0 updated",
        "secrets scrubbed: 0",
        "unused goldens: 0",
        "orphan cassettes: 0",
    ]
    assert snapshot() == before


def test_the_main_job_with_the_plugin_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(ROOT)
    result = run("check", "--plugins", str(ACME / "dsh.yml"), str(CASSETTES))
    assert result.code == 0, result.out
    assert without_time(result.out) == TABLE


def test_the_main_job_with_the_examples_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(ACME)  # [tool.dsh_replay.routes] acme = "acme_adapter:AcmeAdapter"
    result = run("check", "tests/cassettes", "--fragmentation", "bytes")
    assert result.code == 0, result.out
    assert without_time(result.out) == TABLE


def test_the_examples_hold_no_secrets() -> None:
    result = run("scan", str(ACME))
    assert result.code == 0, result.out
    assert result.out == "scanned 13 file(s): 0 secret(s) found\n"


def test_trace_of_a_recorded_body_gives_its_golden(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(ACME)
    cassette = CASSETTES / "test_acme" / "test_parallel_tool_calls_become_sequential_blocks.yaml"
    body = tmp_path / "body.sse"
    body.write_bytes(Cassette.load(cassette).interactions[0].body)
    result = run("trace", "--route", "acme", str(body))
    assert result.code == 0
    assert result.out.encode() == cassette.with_name(cassette.stem + ".chunks.jsonl").read_bytes()
