"""The recording proxy (``dsh-replay serve --record``) against talking to the provider directly.

The provider is a :class:`ProviderEmulator` on loopback, in a process of its
own as a provider is; the proxy is a ``python -m dsh_replay serve --record``
subprocess in front of it, as a user runs it, recording every request into a
cassette of its own (one name per request, as one test per cassette). The
client is httpx, in this process.

**Time to first byte.** 200 requests each way, interleaved (direct, proxy,
direct, ...), after 20 of each to warm up: the time from sending the request
to holding the first byte of the streamed body. The figure is the median; the
proxy's added latency is its median minus the direct one (target: at most
1 ms).

The emulator closes every connection after its answer, so each direct
request opens one, and the proxy opens one upstream for each of its own: the
difference is what the proxy itself adds.

**Throughput.** A 10 MB body streamed in 64 KiB fragments, read raw by the
client, each way, seven times interleaved (three with ``--quick``, over 2 MB),
after one run each to warm up: bytes per second, medians; the ratio is the
proxy's over the direct one (target: at least 0.5). A third contender is a
bare asyncio TCP relay (read 64 KiB, write it, no HTTP, no recording) in a
process of its own, on the same bytes: what a relay costs before any HTTP.

What makes the comparison fair: every way is read by the same client (one
``httpx.Client``, ``iter_raw()``, the same read size), from the same emulator
and its same fragments, in the same round, one right after the other. The
emulator does not share the client's interpreter: in one process its sending
thread and the reading client would take turns at one lock (the GIL), a cost
a direct stream pays at every fragment and a proxied one much less, as the
proxy reads ahead of the client. The cassette of a proxied run is written
after its response ended, outside the time measured, as a client sees it;
nothing is measured until it is on disk (its YAML takes a core for a while,
which would slow whatever ran then).

On a shared machine the ratio moves with the load of the other processes, so
the proxy's own cost is given too: the CPU time of its event loop's thread
per stream, relay and recording (Linux; the YAML is written by another
thread), which that load moves far less.

``python benchmarks/bench_proxy.py`` prints the rows, each against its target.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dsh_replay.testing import ProviderEmulator, ScriptedResponse  # noqa: E402

CHAT = "/v1/chat/completions"
REQUEST = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'
SSE = b'data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}\n\n'
FIRST_LINE = re.compile(r"serving \d+ cassettes on (http://127\.0\.0\.1:\d+)")
MB = 1_000_000
FRAGMENT = 65536


def _first_byte(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    with client.stream("POST", url, content=REQUEST) as response:
        pieces = response.iter_raw()
        next(pieces)
        elapsed = time.perf_counter() - started
        for _ in pieces:
            pass
    return elapsed


def _relay(host: str, port: int) -> None:
    """A bare asyncio TCP relay to ``host:port``; prints its URL, runs until killed."""
    import asyncio

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True)

    async def main() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", 0)
        print(f"serving 0 cassettes on http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def _emulator(size: int) -> None:
    """The provider: the emulator with a short stream and a ``size`` one; prints its URL, runs until killed."""
    big = (bytes(range(256)) * (size // 256 + 1))[:size]
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(SSE * 2))
        emu.add("POST", f"/big{CHAT}", ScriptedResponse(fragments=[big[at:at + FRAGMENT]
                                                                   for at in range(0, size, FRAGMENT)]))
        print(f"serving 0 cassettes on {emu.base_url}", flush=True)
        sys.stdin.read()  # until the benchmark closes the pipe, or kills this process


def _started(argv: list[str]) -> tuple[subprocess.Popen[str], str]:
    environment = {key: value for key, value in os.environ.items() if key != "CI"}
    process = subprocess.Popen(argv, cwd=ROOT, env=environment, text=True, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    found = FIRST_LINE.fullmatch(process.stdout.readline().strip())
    if found is None:
        process.kill()
        raise RuntimeError(f"{argv[1:4]} did not start")
    return process, found[1]


def _throughput(client: httpx.Client, url: str, size: int) -> float:
    started = time.perf_counter()
    got = 0
    with client.stream("POST", url, content=REQUEST) as response:
        for piece in response.iter_raw():
            got += len(piece)
    assert got == size, (got, size)
    return size / (time.perf_counter() - started)


def _loop_cpu(pid: int) -> float | None:
    """Seconds of CPU the process's main thread (the proxy's event loop) has used; None off Linux."""
    try:
        return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _written(cassette: Path, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not cassette.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{cassette} was not written within {timeout:g} s")
        time.sleep(0.05)


def run(quick: bool = False) -> list[dict[str, Any]]:
    requests, warm = (60, 10) if quick else (200, 20)
    runs, size = (3, 2 * MB) if quick else (7, 10 * MB)
    with tempfile.TemporaryDirectory(prefix="dsh-bench-proxy-") as tmp:
        emulator, upstream = _started([sys.executable, __file__, "--emulator", str(size)])
        process, proxy = _started([sys.executable, "-m", "dsh_replay", "serve", "--record", tmp, "--upstream",
                                   upstream, "--allow-insecure-upstream", "--route", "openai"])
        host, port = upstream.removeprefix("http://").split(":")
        relay_process, relay = _started([sys.executable, __file__, "--relay", host, port])
        try:
            with httpx.Client(timeout=60) as client:
                direct: list[float] = []
                proxied: list[float] = []
                for n in range(warm + requests):
                    first = _first_byte(client, upstream + CHAT)
                    through = _first_byte(client, f"{proxy}/_dsh/ttfb/r{n}/-{CHAT}")
                    if n >= warm:
                        direct.append(first)
                        proxied.append(through)
                rates: dict[str, list[float]] = {"direct": [], "proxy": [], "relay": []}
                cpu: list[float] = []
                for n in range(-1, runs):
                    measured = {"direct": _throughput(client, f"{upstream}/big{CHAT}", size),
                                "relay": _throughput(client, f"{relay}/big{CHAT}", size)}
                    before = _loop_cpu(process.pid)
                    measured["proxy"] = _throughput(client, f"{proxy}/_dsh/big/r{n + 1}/-/big{CHAT}", size)
                    _written(Path(tmp) / "big" / f"r{n + 1}.yaml")
                    after = _loop_cpu(process.pid)  # the stream's relay and recording; its YAML is another thread's
                    if n < 0:
                        continue
                    for name, rate in measured.items():
                        rates[name].append(rate)
                    if before is not None and after is not None:
                        cpu.append(after - before)
        finally:
            relay_process.kill()
            relay_process.communicate(timeout=120)
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=120)
            emulator.communicate(timeout=120)  # its stdin closes: it stops
    ttfb_direct, ttfb_proxy = statistics.median(direct), statistics.median(proxied)
    rate_direct, rate_proxy = statistics.median(rates["direct"]), statistics.median(rates["proxy"])
    rate_relay = statistics.median(rates["relay"])
    return [
        {"name": "time to first byte", "requests": requests, "direct_ms": ttfb_direct * 1000,
         "proxy_ms": ttfb_proxy * 1000, "added_ms": (ttfb_proxy - ttfb_direct) * 1000,
         "samples_direct_ms": [s * 1000 for s in direct], "samples_proxy_ms": [s * 1000 for s in proxied]},
        {"name": "throughput", "bytes": size, "direct_bps": rate_direct, "proxy_bps": rate_proxy,
         "ratio": rate_proxy / rate_direct, "relay_bps": rate_relay, "relay_ratio": rate_relay / rate_direct,
         "proxy_cpu_ms": statistics.median(cpu) * 1000 if cpu else None, "samples": rates,
         "samples_ratio": [p / d for p, d in zip(rates["proxy"], rates["direct"], strict=True)]},
    ]


def rows(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table rows (``benchmarks/run.py``'s shape)."""
    first, flow = raw
    section = f"serve --record ({first['requests']} requests; {flow['bytes'] / MB:.0f} MB stream)"

    def row(contender: str, figure: str, ratio: str = "", target: str = "", met: bool | None = None) -> dict[str, Any]:
        return {"section": section, "contender": contender, "figure": figure, "ratio": ratio, "target": target,
                "met": met}

    mb = f"{flow['bytes'] / MB:.0f} MB"
    table = [
        row("first byte, direct (median)", f"{first['direct_ms']:.2f} ms"),
        row("first byte, through the proxy", f"{first['proxy_ms']:.2f} ms", f"{first['added_ms']:+.2f} ms",
            "<= +1 ms", first["added_ms"] <= 1.0),
        row(f"{mb} stream, direct", f"{flow['direct_bps'] / MB:,.0f} MB/s"),
        row(f"{mb} stream, through the proxy", f"{flow['proxy_bps'] / MB:,.0f} MB/s", f"{flow['ratio']:.2f}x direct",
            ">= 0.5x direct", flow["ratio"] >= 0.5),
        row(f"{mb} stream, bare asyncio TCP relay", f"{flow['relay_bps'] / MB:,.0f} MB/s",
            f"{flow['relay_ratio']:.2f}x direct"),
    ]
    if flow["proxy_cpu_ms"] is not None:
        table.append(row(f"{mb} stream, the proxy's event loop CPU", f"{flow['proxy_cpu_ms']:.1f} ms"))
    return table


if __name__ == "__main__":
    if sys.argv[1:2] == ["--relay"]:
        _relay(sys.argv[2], int(sys.argv[3]))
    if sys.argv[1:2] == ["--emulator"]:
        _emulator(int(sys.argv[2]))
        sys.exit()
    for line in rows(run(quick="--quick" in sys.argv)):
        met = {True: "met", False: "MISSED", None: ""}[line["met"]]
        target = f"  (target {line['target']}: {met})" if line["target"] else ""
        print(f"{line['contender']}: {line['figure']}" + (f", {line['ratio']}" if line["ratio"] else "") + target)
