"""``examples/node/stream.mjs`` against ``dsh-replay serve``: a client in another language gets the recorded
stream, and the chunks it emits match our golden. Skipped where ``node`` is not installed."""

from __future__ import annotations

import shutil
import subprocess
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
