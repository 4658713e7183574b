"""Memory and recording cost of cassettes.

**Replaying a 100 MB body.** One cassette holds one OpenAI chat response of
~100 MB (long generations, non-ASCII text included), recorded in 4 KiB
fragments. A fresh subprocess measures its peak resident set size (the
``ru_maxrss`` high-water mark, read as ``VmHWM``: see :func:`_peak_rss`) three
times: before anything is loaded, after ``use_cassette`` has loaded the
cassette, and after an ``httpx.AsyncClient`` has streamed the whole replayed
body (``aiter_raw``, counting bytes, keeping none). Before the replay the peak
is reset (``/proc/self/clear_refs``), so the replay's own peak is seen apart
from the load's. Each figure is reported as a multiple of the body size: a
replay that streams adds little; one that copies or joins the body adds about
its size again.

The cassette file is written in the library's own layout (a small cassette
dumped by ``Cassette.dumps`` with the big body spliced into its literal block:
dumping 100 MB through PyYAML would take longer than the rest of this
benchmark), and the child checks that what it loaded is byte-identical.

**Checking a 200 MB body.** ``dsh-replay check`` of one OpenAI chat cassette
whose body is ~200 MB of small content deltas (about 1.5 M chunks; 20 MB with
``--quick``) and its golden, written by ``tests/cli/big_case.py``. A fresh
subprocess first checks a small bundled cassette (the imports, the adapters'
first use), resets its peak, then runs ``run_check`` on the big case; the
figure is the peak RSS it adds, as a multiple of the body size. The check must
pass: the golden is compared byte for byte.

**Recording overhead per fragment.** N fragments (one SSE event each, as
providers flush them) stream from an ``httpx.MockTransport`` body and are read
with ``aiter_raw``, once plain and once inside ``use_cassette(path, "all")``,
which notes every fragment's size and arrival time while passing it on. The
difference of the two read times over N is what recording adds per fragment
while the stream flows; the writing of the cassette at the end of the block is
timed apart (per fragment too). Five runs each, interleaved, medians.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # tests.cli.big_case

from _bodies import openai_chat_stream

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5
URL = "http://bench.invalid/v1/chat/completions"
MB = 1_000_000


# -- the 100 MB replay --------------------------------------------------------------


def big_body(target: int) -> bytes:
    """About ``target`` bytes of OpenAI chat SSE: whole generations back to back."""
    one = openai_chat_stream(30_000, seed=11)
    return one * max(1, round(target / len(one)))


def write_cassette(path: Path, body: bytes, piece: int = 4096) -> None:
    """Write ``body`` as a one-interaction cassette, recorded in ``piece``-byte fragments."""
    from vcr.request import Request

    from dsh_replay.cassette.store import Cassette, Interaction

    marker = b"data: BODY-GOES-HERE\n\n"
    sample = Cassette(
        path=path,
        metadata={"format": 1, "route": "openai"},
        interactions=[
            Interaction(
                request=Request(
                    "POST", URL, b'{"model":"bench-model"}', {"content-type": "application/json"}
                ),
                status=200,
                reason="OK",
                headers=[("content-type", "text/event-stream")],
                body=marker,
                fragments=[(0.0, len(marker))],
            )
        ],
    )
    text = sample.dumps().encode()
    literal = _literal_block(marker)
    if literal not in text:
        raise AssertionError(
            "Cassette.dumps no longer writes the body as an indented literal block"
        )
    sizes = [min(piece, len(body) - at) for at in range(0, len(body), piece)]
    flow = b"[" + b", ".join(b"[%.1f, %d]" % (n * 0.2, size) for n, size in enumerate(sizes)) + b"]"
    text = text.replace(literal, _literal_block(body)).replace(b"[[0.0, %d]]" % len(marker), flow)
    path.write_bytes(text)


def _literal_block(body: bytes, indent: bytes = b" " * 8) -> bytes:
    """The lines of ``body`` as ``Cassette.dumps`` writes them in a literal block.

    Every line is indented, except empty ones; ``body`` ends with a blank line
    and has no two blank lines in a row (an SSE body).
    """
    return (indent + body.replace(b"\n", b"\n" + indent))[: -len(indent)].replace(
        b"\n" + indent + b"\n", b"\n\n"
    )


def _peak_rss() -> int:
    """This process's peak resident set size, in bytes.

    ``VmHWM`` from ``/proc/self/status`` where there is one: it is the same
    high-water mark ``getrusage(RUSAGE_SELF).ru_maxrss`` reports, except that
    Linux carries ``ru_maxrss`` over ``execve`` from the process that spawned
    us (the benchmark runner, hundreds of MB), while ``VmHWM`` starts afresh and
    can be reset. Elsewhere, ``ru_maxrss``.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


async def _replay(path: Path, expected: str) -> dict[str, Any]:
    import gc

    import httpx

    from dsh_replay import use_cassette

    before = _peak_rss()
    async with use_cassette(path, "none") as session:
        body = session.cassette.interactions[0].body
        if hashlib.sha256(body).hexdigest() != expected:
            raise AssertionError("the loaded body differs from the one written")
        size = len(body)
        del body
        gc.collect()
        loaded = _peak_rss()
        reset = _reset_peak()
        floor = _peak_rss()
        read = 0
        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", URL, json={"model": "bench-model"}) as response,
        ):
            async for piece in response.aiter_raw():
                read += len(piece)
        replayed = _peak_rss()
    if read != size:
        raise AssertionError(f"replayed {read} bytes of {size}")
    return {
        "body": size,
        "before": before,
        "loaded": loaded,
        "floor": floor,
        "replayed": replayed,
        "reset": reset,
    }


def replay_memory(target: int) -> dict[str, Any]:
    """Write the cassette, measure it in a fresh interpreter, return the figures."""
    with tempfile.TemporaryDirectory(prefix="dsh-bench-memory-") as tmp:
        path = Path(tmp) / "big.yaml"
        body = big_body(target)
        digest = hashlib.sha256(body).hexdigest()
        write_cassette(path, body)
        del body
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(path), digest],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"memory child failed:\n{done.stdout}{done.stderr}")
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        figures["file"] = path.stat().st_size
        return figures


# -- check of a big body ------------------------------------------------------------------


def _check(folder: Path) -> dict[str, Any]:
    """In the child: the peak RSS of ``run_check`` over ``folder``, after a small warm-up check.

    Without ``clear_refs`` (no reset), the floor is the warm-up's peak, a little above the true floor.
    """
    import io

    from dsh_replay.adapters.route_table import RouteTable
    from dsh_replay.cli.check import run_check

    routes = RouteTable.load(pyproject=ROOT / "pyproject.toml")
    small = ROOT / "cassettes" / "openai" / "text.yaml"
    if run_check([str(small)], io.StringIO(), routes=routes, progress=io.StringIO()) != 0:
        raise AssertionError(f"check of {small} failed")
    before = _peak_rss()
    reset = _reset_peak()
    floor = _peak_rss()
    out = io.StringIO()
    start = time.perf_counter()
    code = run_check([str(folder)], out, routes=routes, progress=io.StringIO())
    seconds = time.perf_counter() - start
    if code != 0:
        raise AssertionError(f"check of the big case failed:\n{out.getvalue()[-2000:]}")
    return {"before": before, "floor": floor, "peak": _peak_rss(), "reset": reset, "seconds": seconds,
            "summary": out.getvalue().splitlines()[-1]}


def check_memory(target: int) -> dict[str, Any]:
    """Write the big case, check it in a fresh interpreter, return the figures."""
    from tests.cli.big_case import write_big_case

    with tempfile.TemporaryDirectory(prefix="dsh-bench-check-memory-") as tmp:
        _, body, chunks = write_big_case(Path(tmp), target)
        done = subprocess.run(
            [sys.executable, __file__, "--check-child", tmp],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"check memory child failed:\n{done.stdout}{done.stderr}")
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"body": body, "chunks": chunks, **figures}


# -- recording overhead ------------------------------------------------------------------


async def _read(pieces: list[bytes]) -> tuple[float, int]:
    import httpx

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            for piece in pieces:
                yield piece

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    count = 0
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        start = time.perf_counter()
        async with client.stream("POST", URL, json={"model": "bench-model"}) as response:
            async for _ in response.aiter_raw():
                count += 1
        seconds = time.perf_counter() - start
    return seconds, count


def recording_pieces(count: int) -> tuple[bytes, list[bytes]]:
    """The body of the recording rows and its fragments: one SSE event each, as providers flush them."""
    body = openai_chat_stream(count, seed=12)
    return body, [event + b"\n\n" for event in body.split(b"\n\n") if event]


def record_once(pieces: list[bytes], path: Path) -> tuple[float, float, float, Any]:
    """One read of ``pieces`` plain and one recorded into ``path``: (plain s, recorded s, write s, session).

    The write is the block's end: ``use_cassette``'s exit, which writes the cassette.
    """
    from dsh_replay import use_cassette

    seconds, seen = asyncio.run(_read(pieces))
    context = use_cassette(path, "all")
    session = context.__enter__()
    try:
        inside, seen_recorded = asyncio.run(_read(pieces))
    finally:
        start = time.perf_counter()
        context.__exit__(None, None, None)
        written = time.perf_counter() - start
    if seen != len(pieces) or seen_recorded != len(pieces) or not session.wrote:
        raise AssertionError("the recorded read lost fragments or wrote no cassette")
    fragments_kept = len(session.cassette.interactions[0].fragments or [])
    if fragments_kept != len(pieces):
        raise AssertionError(f"recorded {fragments_kept} fragments of {len(pieces)}")
    return seconds, inside, written, session


def recording_overhead(count: int) -> dict[str, Any]:
    """µs per fragment that recording adds to the read, and that writing the cassette costs."""
    body, pieces = recording_pieces(count)
    plain: list[float] = []
    recorded: list[float] = []
    writes: list[float] = []
    with tempfile.TemporaryDirectory(prefix="dsh-bench-record-") as tmp:
        for run in range(RUNS + 1):  # the first round is a warm-up
            seconds, inside, written, _ = record_once(pieces, Path(tmp) / f"run{run}.yaml")
            if run:
                plain.append(seconds)
                recorded.append(inside)
                writes.append(written)
    n = len(pieces)
    return {
        "fragments": n,
        "bytes": len(body),
        "plain_us": statistics.median(plain) / n * 1e6,
        "recorded_us": statistics.median(recorded) / n * 1e6,
        "overhead_us": (statistics.median(recorded) - statistics.median(plain)) / n * 1e6,
        "write_us": statistics.median(writes) / n * 1e6,
        "samples": {"plain_s": plain, "recorded_s": recorded, "write_s": writes},
    }


def run(quick: bool = False) -> list[dict[str, object]]:
    memory = replay_memory(10 * MB if quick else 100 * MB)
    body = memory["body"]
    check = check_memory(20 * MB if quick else 200 * MB)
    record = recording_overhead(5_000 if quick else 20_000)
    return [
        {
            "benchmark": "memory",
            "name": "replay: peak RSS after load",
            "body_bytes": body,
            "file_bytes": memory["file"],
            "rss_bytes": memory["loaded"] - memory["before"],
            "x_body": (memory["loaded"] - memory["before"]) / body,
            "raw": memory,
        },
        {
            "benchmark": "memory",
            "name": "replay: peak RSS of the replay itself",
            "body_bytes": body,
            "rss_bytes": memory["replayed"] - memory["floor"],
            "x_body": (memory["replayed"] - memory["floor"]) / body,
            "peak_reset": memory["reset"],
        },
        {
            "benchmark": "memory",
            "name": "check: peak RSS added",
            "body_bytes": check["body"],
            "chunks": check["chunks"],
            "rss_bytes": check["peak"] - check["floor"],
            "x_body": (check["peak"] - check["floor"]) / check["body"],
            "seconds": check["seconds"],
            "raw": check,
        },
        {
            "benchmark": "record",
            "name": "recording, in stream",
            **record,
            "value_us": record["overhead_us"],
        },
        {
            "benchmark": "record",
            "name": "recording, cassette write",
            **record,
            "value_us": record["write_us"],
        },
    ]


def render(rows: list[dict[str, object]]) -> str:
    lines = []
    for row in rows:
        if row["benchmark"] == "memory":
            lines.append(
                f"{row['name']!s:<40}{row['rss_bytes'] / MB:>9.1f} MB{row['x_body']:>8.2f}x body"
            )  # type: ignore[operator]
        else:
            lines.append(f"{row['name']!s:<40}{row['value_us']:>9.2f} µs/fragment")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(asyncio.run(_replay(Path(sys.argv[2]), sys.argv[3]))))
    elif sys.argv[1:2] == ["--check-child"]:
        print(json.dumps(_check(Path(sys.argv[2]))))
    elif sys.argv[1:2] == ["--check"]:  # only the check figure: --check [MB], 200 unless given
        figures = check_memory(round(float(sys.argv[2] if sys.argv[2:] else 200) * MB))
        added = figures["peak"] - figures["floor"]
        print(f"check of a {figures['body'] / MB:.0f} MB body ({figures['chunks']:,} chunks): peak RSS "
              f"+{added / MB:.1f} MB = {added / figures['body']:.2f}x body, {figures['seconds']:.1f} s")
    else:
        print(render(run(quick="--quick" in sys.argv[1:])))
