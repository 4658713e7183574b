"""``dsh-replay check`` of a big body: its peak memory follows the body's size, not its number of chunks.

A 20 MB OpenAI chat body of small content deltas is about 150,000 chunks. Kept
as chunk objects with one ``orjson.dumps`` result each until the golden was
joined, they took ~4.6 KB a chunk: 690 MB of peak RSS for that body (7.5 GB
for 200 MB). Checked as they stream, the peak grows by the body (held by the
loaded cassette), its golden and the adapter's running text: about 2.5x.

Measured in a fresh interpreter, by its resident high-water mark (``VmHWM``)
before and after ``run_check``; a warm-up check of a small case first pays the
imports. RSS, not ``tracemalloc``: the cost was the allocator's (each orjson
result is small, the heap it pinned is not), which ``tracemalloc`` does not see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .big_case import MB, ROOT, write_big_case

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")

PROBE = """
import io, json, sys
from pathlib import Path

from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cli.check import run_check


def peak():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024


routes = RouteTable.load()
assert run_check([sys.argv[2]], io.StringIO(), routes=routes, progress=io.StringIO()) == 0
before = peak()
out = io.StringIO()
code = run_check([sys.argv[1]], out, routes=routes, progress=io.StringIO())
print(json.dumps({"code": code, "grown": peak() - before, "out": out.getvalue()}))
"""

#: peak RSS growth over the body size that check may take; 34x before, ~2.5x now
BOUND = 4.0


def test_check_of_a_20_mb_body_peaks_at_a_few_times_the_body(tmp_path: Path) -> None:
    cassette, body, chunks = write_big_case(tmp_path, 20 * MB)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(cassette), str(ROOT / "cassettes" / "openai" / "text.yaml")],
        capture_output=True, text=True, env=env, check=False, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    # the streamed golden is the right one, byte for byte
    assert figures["code"] == 0, figures["out"][-3000:]
    assert f"1 case(s), {chunks} chunks: 1 passed, 0 failed" in figures["out"]
    assert chunks > 140_000
    grown = figures["grown"] / body
    assert grown < BOUND, f"check of a {body / MB:.0f} MB body grew the peak RSS by {grown:.1f}x the body"
