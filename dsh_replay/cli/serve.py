"""``dsh-replay serve``: answer HTTP requests on loopback from cassettes, for clients in any language."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import math
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigError

__all__ = ["is_loopback", "serve"]

DESCRIPTION = (
    "Serve the cassettes under PATHS over HTTP/1.1, so that a client in any language can be tested\n"
    "against recorded provider streams. Point its base URL at the address printed on the first line:\n"
    "\n"
    "  serving N cassettes on http://127.0.0.1:PORT\n"
    "\n"
    "Each request is matched as replay matches it (method, path, query, JSON body as data; the host\n"
    "never counts) and answered with the recorded status, headers and body, sent in the recorded\n"
    "fragments, paced at the recorded times x --speed, and ended as the recording ended (a cut or\n"
    "failed stream is cut or reset on the wire). Repeated identical requests get a cassette's\n"
    "matching interactions in recorded order; when all were played, the last one plays again.\n"
    "The first cassette (in PATHS order, folders sorted) with a match answers. Cassettes often share\n"
    "a request (the same prompt as a success and as a 429): pick one with a base URL such as\n"
    "http://127.0.0.1:PORT/_dsh/openai/text/-/v1 (the path after '/-' is matched) or the header\n"
    "'x-dsh-replay-cassette: openai/text' (cassettes whose path, without .yaml, ends so).\n"
    "\n"
    "A request nothing matches gets a 404 with a JSON body naming the nearest cassette and the fields\n"
    "that differ. One line per request goes to stderr, credentials in the query (?key=...) replaced.\n"
    "A connection that sends no request for --idle-timeout seconds is closed; beyond --max-connections\n"
    "open connections a new one gets a 503. Stop with Ctrl-C or SIGTERM (exit 0)."
)
EXAMPLE = "dsh-replay serve cassettes/openai --port 8765"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATHS",
                        help="cassette files, or folders searched for cassettes with dsh_replay metadata")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; localhost means 127.0.0.1; a non-loopback "
                             "one needs --allow-remote)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free port)")
    parser.add_argument("--speed", default="0", metavar="F",
                        help="pace: recorded gaps x F (default 0: no waiting; 1: as recorded)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a --host other hosts can reach (the cassettes are then served to them)")
    parser.add_argument("--idle-timeout", default=None, metavar="SECONDS",
                        help="close a connection that has not sent a whole request head SECONDS after it opened "
                             "or after its last response, or that stops sending a request body for SECONDS; a "
                             "half-sent request gets a 408 first (default 10)")
    parser.add_argument("--max-connections", type=int, default=None, metavar="N",
                        help="serve at most N connections at once; a connection over N is answered 503 and closed "
                             "at once, its request unread, and the first one is logged (default 256, well under "
                             "the usual ulimit -n of 1024)")


def is_loopback(host: str) -> bool:
    """Is ``host`` an address only this machine can reach?"""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _cassette_paths(paths: Sequence[str]) -> list[Path]:
    from .check import find_cases

    cassettes, _, skipped = find_cases(paths)
    if not cassettes:
        note = f" ({len(skipped)} YAML file(s) without it were skipped)" if skipped else ""
        raise ConfigError(f"no cassettes with dsh_replay metadata under {', '.join(paths)}{note}; "
                          "give cassette files or the folders that hold them")
    return cassettes


async def serve(
    paths: Sequence[Path], host: str, port: int, speed: float, out: TextIO, err: TextIO,
    stop: asyncio.Event | None = None, idle_timeout: float | None = None, max_connections: int | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM (or ``stop`` is set); return the exit code.

    ``idle_timeout`` and ``max_connections`` are :class:`.HttpServer`'s (None: its defaults).
    """
    from ..cassette.server import CassetteServer
    from ..cassette.server_http import IDLE_TIMEOUT, MAX_CONNECTIONS, HttpServer

    core = CassetteServer.load(paths, speed=speed)

    def log(line: str) -> None:
        err.write(line + "\n")
        err.flush()

    server = HttpServer(core, log=log, idle_timeout=idle_timeout or IDLE_TIMEOUT,
                        max_connections=max_connections or MAX_CONNECTIONS)
    try:
        bound = await server.start(host, port)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                          "choose another --port (0 picks a free one)") from None
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    previous_handler = loop.get_exception_handler()
    loop.set_exception_handler(_out_of_descriptors(log))
    handled = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop.set)
            handled.append(signum)
        except (RuntimeError, ValueError, NotImplementedError):  # not the main thread, or no signals here
            pass
    shown = f"[{host}]" if ":" in host else host
    out.write(f"serving {len(core.cassettes)} cassettes on http://{shown}:{bound}\n")
    out.flush()
    for path, earlier in core.shadowed():
        log(f"note: {path} records the same requests as {earlier}, which answers them; pick it with "
            f"http://{shown}:{bound}/_dsh/{path.with_suffix('').as_posix()}/-/...")
    try:
        await stop.wait()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
        await server.close()
        loop.set_exception_handler(previous_handler)
    busy = f", {server.turned_away} connection(s) turned away (503)" if server.turned_away else ""
    err.write(f"dsh-replay serve: stopped after {core.requests} request(s), {core.unmatched} unmatched{busy}\n")
    err.flush()
    return 0


def _out_of_descriptors(log: Callable[[str], None]) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """An event loop exception handler that says once, in one line, that accept() ran out of descriptors.

    asyncio reports it with a traceback each time it retries accept() (every
    second, for as long as descriptors are short). Anything else goes to the
    loop's default handler.
    """
    said = False

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal said
        if context.get("message") != "socket.accept() out of system resource":
            loop.default_exception_handler(context)
            return
        if not said:
            said = True
            exc = context.get("exception")
            log(f"cannot accept connections: {getattr(exc, 'strerror', None) or exc}; new ones wait until some "
                "close (give --max-connections a number under `ulimit -n`, or raise that limit); logged once")

    return handle


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..cassette.pacing import parse_speed

    if not is_loopback(args.host) and not args.allow_remote:
        raise ConfigError(f"--host {args.host} is not a loopback address: other machines could read the "
                          "cassettes. Use 127.0.0.1 (the default), or add --allow-remote if that is intended")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be from 0 to 65535 (0 picks a free port), got {args.port}")
    speed = parse_speed(args.speed)
    idle_timeout = _idle_timeout(args.idle_timeout)
    if args.max_connections is not None and args.max_connections < 1:
        raise ConfigError(f"--max-connections must be 1 or more, got {args.max_connections}")
    # "localhost" may resolve to ::1 and 127.0.0.1, and --port 0 would bind each to its own free
    # port: one address, so the printed URL is the one every client reaches
    host = "127.0.0.1" if args.host.lower() in ("localhost", "localhost.") else args.host.strip("[]")
    stop = asyncio.Event()
    # a stop asked for while the cassettes load is honoured once serving starts: still exit 0, last line
    previous = _stop_on_signals(stop)
    try:
        paths = _cassette_paths(args.paths)
        return asyncio.run(serve(paths, host, args.port, speed, out, err, stop, idle_timeout, args.max_connections))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _idle_timeout(value: str | None) -> float | None:
    """``--idle-timeout`` in seconds, None when not given."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ConfigError(f"--idle-timeout must be a number of seconds above 0, got {value}")
    return seconds


def _stop_on_signals(stop: asyncio.Event) -> dict[int, Any]:
    """Have SIGINT and SIGTERM set ``stop`` until the event loop takes them over; the handlers replaced."""
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
        except ValueError:  # not the main thread: signals are not ours to take
            break
    return previous
