"""``dsh-replay serve``: answer HTTP requests on loopback from cassettes, for clients in any language;
with ``--record``, record them from the real provider (:mod:`dsh_replay.server.record`)."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import math
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigError, DshReplayError
from .common import inference, route_table

if TYPE_CHECKING:
    from ..adapters.route_table import RouteTable
    from ..cassette.config import RecordingConfig
    from ..cassette.inferred import Inference
    from ..cassette.store import Cassette
    from ..server.record import RecordingProxy

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
    "open connections a new one gets a 503. Stop with Ctrl-C or SIGTERM (exit 0).\n"
    "\n"
    "With --record, the server stands in front of the real provider: a request names its cassette\n"
    "(/_dsh/NAME/-/... or the header), goes to the --upstream of its route with the client's own\n"
    "credential, and streams back fragment by fragment while it is recorded in PATHS[0]/NAME.yaml,\n"
    "scrubbed and scanned as pytest records (a cassette with a credential left is not written).\n"
    "--record-mode once (the default) replays a NAME whose file exists. One line per request:\n"
    "'recorded openai/text (200, 14 fragments, 2,341 B)'."
)
EXAMPLE = ("dsh-replay serve cassettes/openai --port 8765\n"
           "  dsh-replay serve --record cassettes/node --upstream openai=https://api.openai.com")


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
                        help="serve at most N connections at once; a connection over N is answered 503 and closed, "
                             "its request read and dropped, not parsed, and the first one is logged (default 256, "
                             "well under the usual ulimit -n of 1024)")
    parser.add_argument("--match-on", default=None, metavar="NAMES",
                        help="the matchers a request is compared with, comma-separated (vcrpy's names, as "
                             "dsh_replay_config's match_on: method, scheme, host, port, path, query, uri, headers, "
                             "body, raw_body); default: match_on of [tool.dsh_replay] in ./pyproject.toml, else "
                             "method,path,query,body")
    parser.add_argument("--route", default=None, metavar="ROUTE",
                        help="serve plain vcrpy cassettes (no dsh_replay metadata) as cases of ROUTE, read as import "
                             "reads them ([tool.dsh_replay.hosts] in pyproject.toml does it by host); with --record, "
                             "the route written in the new cassettes' metadata (default: the request's route, or "
                             "the one its URL shows)")
    record = parser.add_argument_group("recording (--record)")
    record.add_argument("--record", action="store_true",
                        help="stand in front of the provider and record: a request that names a cassette (NAME) "
                             "goes upstream and is recorded in PATHS[0]/NAME.yaml (PATHS[0] is a folder, made "
                             "when missing)")
    record.add_argument("--record-mode", default=None, choices=("once", "new_episodes", "all", "rewrite"),
                        help="as in pytest: once (default) replays a NAME whose file exists and records a new one; "
                             "new_episodes replays what matches and records the rest; all records everything, "
                             "replacing what it re-records; rewrite replaces each file")
    record.add_argument("--upstream", action="append", default=[], metavar="[ROUTE=]URL",
                        help="where requests go: one URL for all, or one per route (repeat the option); a request "
                             "picks its route with the header x-dsh-replay-route or the first part of its "
                             "cassette name; a shipped route without one goes to its provider's public URL")
    record.add_argument("--allow-insecure-upstream", action="store_true",
                        help="allow http:// upstreams (a loopback emulator, a local server); the client's "
                             "credential then crosses the network in clear")
    record.add_argument("--upstream-timeout", default=None, metavar="SECONDS",
                        help="how long the upstream may stay silent before its answer or between two reads; then "
                             "it is recorded as timed out and the client's stream stalls (default 300)")


def is_loopback(host: str) -> bool:
    """Is ``host`` an address only this machine can reach?"""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _cassette_paths(paths: Sequence[str], routes: RouteTable, inference: Inference | None) -> tuple[list[Path], dict[Path, Cassette]]:
    """The cassettes under ``paths``, and the plain vcrpy ones ``inference`` reads as cases (each read now)."""
    from .check_cases import find_cases, read_plain_cases, sorted_paths

    cassettes, _, skipped = find_cases(paths)
    plain: dict[Path, Cassette] = {}
    for path, case in read_plain_cases(skipped, routes, inference).cases.items():
        if isinstance(case, DshReplayError):  # a case that cannot be served is refused, as a broken cassette is
            raise ConfigError(str(case))
        plain[path] = case
    skipped = [path for path in skipped if path not in plain]
    cassettes = sorted_paths([*cassettes, *plain])
    if not cassettes:
        note = f" ({len(skipped)} YAML file(s) without it were skipped)" if skipped else ""
        raise ConfigError(f"no cassettes with dsh_replay metadata under {', '.join(paths)}{note}; "
                          "give cassette files or the folders that hold them (plain vcrpy cassettes are read "
                          "with --route ROUTE)")
    return cassettes, plain


def _served_while_recording(paths: Sequence[str]) -> list[Path]:
    """The cassettes under ``paths`` that exist: the folder recordings go to may be new, or hold nothing yet."""
    from .check import find_cases

    existing = [p for p in paths if Path(p).exists()]
    return find_cases(existing)[0] if existing else []


async def serve(
    paths: Sequence[Path], host: str, port: int, speed: float, out: TextIO, err: TextIO,
    stop: asyncio.Event | None = None, idle_timeout: float | None = None, max_connections: int | None = None,
    *, matchers: Sequence[Any] | None = None, proxy: Callable[..., RecordingProxy] | None = None,
    plain: Mapping[Path, Cassette] | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM (or ``stop`` is set); return the exit code.

    ``idle_timeout`` and ``max_connections`` are :class:`.HttpServer`'s (None: its defaults);
    ``proxy`` builds the recording proxy (``--record``), given the log and the served cassettes' server;
    ``plain``: the cases among ``paths`` read in place from plain vcrpy cassettes.
    """
    from ..server.http import IDLE_TIMEOUT, MAX_CONNECTIONS, HttpServer, ReplayResponder, Responder
    from ..server.replay import CassetteServer

    core = CassetteServer.load(paths, speed=speed, matchers=matchers, preloaded=plain) if paths else None

    def log(line: str) -> None:
        err.write(line + "\n")
        err.flush()

    recording = proxy(log=log, replay=core) if proxy is not None else None
    responder: Responder
    if recording is not None:
        responder = recording
    else:
        assert core is not None  # without --record there is a cassette (or _cassette_paths refused)
        responder = ReplayResponder(core, log)
    server = HttpServer(responder, log=log, idle_timeout=idle_timeout or IDLE_TIMEOUT,
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
    out.write(f"serving {len(core.cassettes) if core else 0} cassettes on http://{shown}:{bound}\n")
    out.flush()
    for path, earlier in core.shadowed() if core else ():
        log(f"note: {path} records the same requests as {earlier}, which answers them; pick it with "
            f"http://{shown}:{bound}/_dsh/{path.with_suffix('').as_posix()}/-/...")
    try:
        await stop.wait()
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
        if recording is not None:
            recording.stopping()  # the cassettes are written once, below; the recordings this cuts are dropped
        await server.close()
        if recording is not None:
            await recording.close()
        loop.set_exception_handler(previous_handler)
    busy = f", {server.turned_away} connection(s) turned away (503)" if server.turned_away else ""
    if recording is not None:
        count = recording.recorded + recording.replayed + recording.refused + recording.cut
        cut = f", {recording.cut} cut by the stop" if recording.cut else ""
        dropped = (f"; not written, as the stop cut them: {', '.join(sorted(recording.dropped))}"
                   if recording.dropped else "")
        err.write(f"dsh-replay serve: stopped after {count} request(s): {recording.recorded} recorded, "
                  f"{recording.replayed} replayed, {recording.refused} refused{cut}; {len(recording.written)} "
                  f"cassette(s) written{dropped}{busy}\n")
    else:
        assert core is not None
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
    idle_timeout = _seconds(args.idle_timeout, "--idle-timeout")
    if args.max_connections is not None and args.max_connections < 1:
        raise ConfigError(f"--max-connections must be 1 or more, got {args.max_connections}")
    from ..cassette.config import RecordingConfig

    config = RecordingConfig.from_pyproject(Path("pyproject.toml"))  # [tool.dsh_replay]: matchers and filters
    matchers = _matchers(args.match_on, config)
    proxy = _proxy(args, speed, matchers, config) if args.record else None
    if proxy is None and (args.record_mode or args.upstream or args.allow_insecure_upstream or args.upstream_timeout):
        raise ConfigError("--record-mode, --upstream, --allow-insecure-upstream and --upstream-timeout "
                          "are options of recording: add --record")
    # "localhost" may resolve to ::1 and 127.0.0.1, and --port 0 would bind each to its own free
    # port: one address, so the printed URL is the one every client reaches
    host = "127.0.0.1" if args.host.lower() in ("localhost", "localhost.") else args.host.strip("[]")
    stop = asyncio.Event()
    # a stop asked for while the cassettes load is honoured once serving starts: still exit 0, last line
    previous = _stop_on_signals(stop)
    try:
        plain: dict[Path, Cassette] = {}
        if args.record:
            paths = _served_while_recording(args.paths)
        else:
            routes = route_table(args)
            paths, plain = _cassette_paths(args.paths, routes, inference(args, routes))
        return asyncio.run(serve(paths, host, args.port, speed, out, err, stop, idle_timeout, args.max_connections,
                                 matchers=matchers, proxy=proxy, plain=plain))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _matchers(names: str | None, config: RecordingConfig) -> list[Any] | None:
    """``--match-on``, else ``match_on`` of ``[tool.dsh_replay]`` in ./pyproject.toml; None: the default ones."""
    from ..cassette.config import matchers_named, parse_match_on

    if names is not None:
        parsed = parse_match_on([name.strip() for name in names.split(",") if name.strip()], "--match-on")
        return matchers_named(parsed or ())
    return config.matchers()


def _proxy(args: argparse.Namespace, speed: float, matchers: Sequence[Any] | None,
           config: RecordingConfig) -> Callable[..., RecordingProxy]:
    """What builds the recording proxy of ``--record``, its settings checked now."""
    import functools

    from ..cassette.files import remove_stale_temp_files
    from ..protocol.adapter import unknown_route_message
    from ..server.record import UPSTREAM_TIMEOUT, RecordingProxy
    from ..server.upstream import Upstreams

    if os.environ.get("CI"):
        raise ConfigError("serve --record is refused because CI is set: CI only replays. Record locally and commit.")
    folder = Path(args.paths[0])
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder}: with --record the first PATH is the folder cassettes are recorded in, "
                          "and this is a file")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot make the folder {folder}: {exc.strerror or exc}") from None
    remove_stale_temp_files(folder, older_than=time.time())  # what a killed recording left
    upstreams = Upstreams.parse(args.upstream, insecure=args.allow_insecure_upstream)
    routes = route_table(args)
    known = routes.routes()
    for route in upstreams.by_route:
        if route not in known:  # a request could never pick it: a typo would send its route elsewhere
            raise ConfigError(f"--upstream {route}={upstreams.by_route[route]}: {unknown_route_message(route, known)}")
    timeout = _seconds(args.upstream_timeout, "--upstream-timeout") or UPSTREAM_TIMEOUT
    return functools.partial(RecordingProxy, folder=folder, upstreams=upstreams, mode=args.record_mode or "once",
                             route=args.route, matchers=matchers, filters=config.filters, routes=routes,
                             speed=speed, timeout=timeout)


def _seconds(value: str | None, option: str) -> float | None:
    """``option``'s value in seconds, None when not given."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ConfigError(f"{option} must be a number of seconds above 0, got {value}")
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
