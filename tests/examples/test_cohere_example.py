"""``examples/cohere``: an adapter for a provider we do not ship, built from the public blocks only.

Its own suite replays offline, its cassettes pass ``dsh-replay check`` byte by byte
with the route its pyproject registers, ``dsh-replay conform`` passes on them, they
hold no secret, and the adapter type-checks under ``mypy --strict`` as a user's would.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from mypy import api as mypy_api

ROOT = Path(__file__).resolve().parents[2]
COHERE = ROOT / "examples" / "cohere"
CASSETTES = COHERE / "cassettes"
ADAPTER = COHERE / "cohere_adapter.py"
CASES = [
    "test_error_mid_stream",
    "test_max_tokens",
    "test_parallel_tool_calls",
    "test_rate_limited",
    "test_text",
    "test_tool_call",
    "test_tool_result_in_history",
]
PUBLIC_MODULES = {"dsh_replay", "dsh_replay.adapters", "dsh_replay.testing"}


def replay_env() -> dict[str, str]:
    # CI set: nothing may record; no key, no base URL: replay must not need them
    env = {**os.environ, "CI": "1"}
    for name in ("COHERE_BASE_URL", "COHERE_API_KEY", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    return env


def dsh_replay_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_replay", *args],
        cwd=COHERE, env=replay_env(), capture_output=True, text=True, check=False, timeout=300,
    )


def snapshot() -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(CASSETTES.rglob("*")) if path.is_file()}


def test_every_case_has_a_cassette_and_a_golden() -> None:
    names = sorted(path.name for path in (CASSETTES / "test_cohere").iterdir())
    assert names == sorted([*(f"{c}.yaml" for c in CASES), *(f"{c}.chunks.jsonl" for c in CASES)])


def test_the_example_suite_replays_offline() -> None:
    before = snapshot()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"],
        cwd=COHERE, env=replay_env(), capture_output=True, text=True, check=False, timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert re.search(rf"^{len(CASES)} passed in ", output, re.MULTILINE), output
    assert f"cassettes: {len(CASES)} replayed, 0 recorded" in output, output
    assert f"goldens: {len(CASES)} matched, 0 written, 0 updated" in output, output
    assert snapshot() == before


def test_check_passes_byte_by_byte_with_the_pyproject_route() -> None:
    done = dsh_replay_cli("check", "cassettes", "--fragmentation", "bytes")
    assert done.returncode == 0, done.stdout + done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("test_")]
    assert names == CASES, done.stdout
    assert "ok (raised RateLimitError)" in done.stdout
    assert "ok (raised ProviderError)" in done.stdout
    assert f"{len(CASES)} case(s)" in done.stdout and f"{len(CASES)} passed, 0 failed" in done.stdout


def test_the_conformance_suite_passes() -> None:
    done = dsh_replay_cli("conform", "cohere_adapter:CohereAdapter", "--route", "cohere", "cassettes")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    rows = dict(line.split(None, 1) for line in done.stdout.splitlines() if line.startswith(("test_", "fault-")))
    faults = [name for name in rows if name.startswith("fault-")]
    # the whole fault matrix ran: truncations, reset, stall, every status, the mid-stream error
    assert len(faults) == 14 and "fault-error-event" in faults and "fault-429" in faults, output
    assert all(verdict.strip().startswith("ok") for verdict in rows.values()), output
    assert re.search(r"^\d+ cases: (\d+) passed, 0 failed, 0 skipped", done.stdout, re.MULTILINE), output


def test_the_example_holds_no_secrets() -> None:
    done = dsh_replay_cli("scan", ".")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith(": 0 secret(s) found\n"), done.stdout


def test_the_adapter_imports_only_public_names() -> None:
    tree = ast.parse(ADAPTER.read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    ours = {module for module in imported if module.split(".")[0] == "dsh_replay"}
    assert ours and ours <= PUBLIC_MODULES, ours - PUBLIC_MODULES


def test_the_adapter_type_checks_strictly(tmp_path: Path) -> None:
    # what a user's CI would run on their own adapter: the public surface must be typed
    out, err, status = mypy_api.run(
        ["--strict", "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary", str(ADAPTER)]
    )
    assert status == 0, out + err
