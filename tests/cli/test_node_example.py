"""``examples/node/stream.mjs`` against ``dsh-replay serve``: a client in another language gets the recorded
stream, and the chunks it emits match our golden; it records through ``serve --record``, its chunks are held
to a golden by ``golden check``, and it passes ``conform --command``. Skipped where ``node`` is not installed."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import EXAMPLES, ROOT, run
from .test_serve import GUARD, serving

NODE = shutil.which("node")
SCRIPT = EXAMPLES / "node" / "stream.mjs"
GOLDEN = ROOT / "cassettes" / "openai" / "text.chunks.jsonl"

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH")


def node(*argv: str) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run([NODE, str(SCRIPT), *argv], capture_output=True, text=True, timeout=GUARD, check=False)


def test_the_node_client_prints_the_recorded_text() -> None:
    with serving("cassettes/openai/text.yaml", "--port", "0") as served:
        done = node(served.base_url)
        code, _, err = served.stop()
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello! How can I help you today?\n", "")
    assert code == 0 and "-> 200 cassettes/openai/text.yaml #0 (complete)" in err


def test_its_chunks_pass_the_rules_and_match_the_golden(tmp_path: Path) -> None:
    # the whole folder, the cassette picked by the base URL: rate-limited.yaml records the same request
    with serving("cassettes/openai") as served:
        done = node(f"{served.base_url}/_dsh/openai/text/-", "--jsonl")
        served.stop()
    assert done.returncode == 0, done.stderr
    chunks = tmp_path / "node.chunks.jsonl"
    chunks.write_text(done.stdout, encoding="utf-8")
    assert run("validate", str(chunks)).code == 0
    diff = run("diff", str(GOLDEN), str(chunks))
    assert (diff.code, diff.out) == (0, "identical\n")


def test_a_request_nothing_matches_reaches_the_client_as_a_404() -> None:
    with serving("cassettes/openai/length-stop.yaml") as served:
        done = node(served.base_url)
        served.stop()
    assert done.returncode == 1
    assert done.stderr.startswith("HTTP 404: ") and '"type":"dsh_replay_no_match"' in done.stderr


# -- the whole loop: record through the proxy, replay, golden, conformance ----------------------------

NODE_KEY = "sk-test-nodeLoopKey0123456789abcdef"


def node_jsonl(base_url: str, *argv: str) -> str:
    assert NODE is not None
    done = subprocess.run([NODE, str(SCRIPT), base_url, "--jsonl", *argv], capture_output=True, text=True,
                          timeout=GUARD, check=False, env={**os.environ, "OPENAI_API_KEY": NODE_KEY})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_node_records_through_the_proxy_and_every_replay_gives_its_chunks(tmp_path: Path) -> None:
    from dsh_replay import GenerateOptions, dump_jsonl, use_cassette
    from dsh_replay.adapters import OpenAIChatAdapter
    from dsh_replay.cassette.store import Cassette
    from dsh_replay.testing import ProviderEmulator, ScriptedResponse, split_by_sizes

    from .test_serve_record import recording

    text = Cassette.load(ROOT / "cassettes" / "openai" / "text.yaml")
    body = text.interactions[0].body
    folder = tmp_path / "cassettes"
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(body, fragment_sizes=[90, 7], delay=0.002))
        with recording(folder, "--upstream", f"openai={emu.base_url}", "--allow-insecure-upstream") as served:
            live = node_jsonl(f"{served.base_url}/_dsh/openai/node-text/-")
            _, _, err = served.stop()
        assert emu.requests[0].headers["authorization"] == f"Bearer {NODE_KEY}"
    cassette = folder / "openai" / "node-text.yaml"
    assert "recorded openai/node-text (200, " in err and NODE_KEY not in cassette.read_text()
    assert Cassette.load(cassette).interactions[0].fragment_sizes() == [len(p) for p in split_by_sizes(body, [90, 7])]
    assert live == GOLDEN.read_text()
    with serving(str(folder)) as served:
        assert node_jsonl(f"{served.base_url}/_dsh/openai/node-text/-") == live
        served.stop()

    async def python_replay() -> bytes:
        async with use_cassette(cassette, "none"):
            adapter = OpenAIChatAdapter(NODE_KEY)
            return dump_jsonl([c async for c in adapter.stream(GenerateOptions.from_json(text.metadata["options"]))])

    assert asyncio.run(python_replay()).decode() == live


def test_golden_check_writes_then_holds_the_node_chunks_to_their_golden(tmp_path: Path) -> None:
    with serving("cassettes/openai") as served:
        out = tmp_path / "text.out.jsonl"
        out.write_text(node_jsonl(f"{served.base_url}/_dsh/openai/text/-"))
        served.stop()
    golden = tmp_path / "node" / "text.chunks.jsonl"
    environment = {key: value for key, value in os.environ.items() if key != "CI"}
    written = subprocess.run([sys.executable, "-m", "dsh_replay", "golden", "check", str(out), "--golden",
                              str(golden), "--update"], capture_output=True, text=True, timeout=GUARD, env=environment,
                             check=False)
    assert (written.returncode, written.stdout) == (0, f"{golden}: written (13 chunks)\n"), written.stderr
    assert golden.read_bytes() == GOLDEN.read_bytes()
    assert run("golden", "check", str(out), "--golden", str(golden)).out == f"{golden}: matched (13 chunks)\n"


def node_conform(*only: str) -> subprocess.CompletedProcess[str]:
    """``dsh-replay conform --route openai --command <the Node client>``: one node process per case."""
    command = f"{NODE} {SCRIPT} {{base_url}} --jsonl --options {{options}} --read-timeout 2"
    done = subprocess.run([sys.executable, "-m", "dsh_replay", "conform", "--route", "openai", "--command", command,
                           *only], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    return done


def test_the_node_adapter_passes_the_recorded_case_of_every_openai_cassette() -> None:
    # the quick share of the suite below, for `make test`: each cassette as it was recorded
    cases = len(list((ROOT / "cassettes" / "openai").glob("*.yaml")))
    done = node_conform("-k", "[recorded]")
    assert f"{cases} cases: {cases} passed, 0 failed, 0 skipped (route openai, adapter command" in done.stdout


@pytest.mark.exhaustive  # 62 node runs, the faults with their real retry waits and read timeout: make test-exhaustive
def test_the_node_adapter_passes_the_conformance_suite_for_openai() -> None:
    done = node_conform()
    cases = len(list((ROOT / "cassettes" / "openai").glob("*.yaml"))) * 4 + 14
    assert f"{cases} cases: {cases} passed, 0 failed, 0 skipped (route openai, adapter command" in done.stdout
