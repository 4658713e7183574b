"""Run one conformance case against an adapter in any language: a command, the case served on loopback.

Theory of operation, for one case:

1. **Serve it alone.** The case's interactions are served by
   :class:`~dsh_replay.server.replay.CassetteServer` on ``127.0.0.1``,
   matched on method and path as for a Python adapter, re-cut as the case's
   fragmentation asks, and with its fault injected by the server: a
   truncation ends the body early but cleanly, a reset is a TCP reset, a
   stall is silence, a status fault answers every retry with the provider's
   own error body. Nothing is paced.
2. **Run the command** once per recorded call, from ``shlex.split`` of the
   template with ``{base_url}`` (the server, with the path the route's
   adapter puts in its base URL: ``http://127.0.0.1:PORT/v1`` for openai),
   ``{origin}`` (without that path), ``{options}`` (a JSON file holding the
   call's :class:`GenerateOptions`, as a cassette's metadata writes them),
   ``{route}`` and ``{case}`` put in. The same values are in its environment:
   ``DSH_REPLAY_BASE_URL``, ``DSH_REPLAY_ORIGIN``, ``DSH_REPLAY_OPTIONS``,
   ``DSH_REPLAY_ROUTE``, ``DSH_REPLAY_CASE``. A call that raised ends the case.
3. **Read its stdout** as chunk JSONL (:mod:`dsh_replay.protocol.jsonl`): one
   chunk per line, and an error it raised as a last line
   ``{"type":"raised","error":"StreamInterruptedError","message":...}``. A
   line that is not a chunk is a P1 failure; an exit status other than 0
   without a ``raised`` line is a failure that quotes its stderr. Output that
   breaks a chunk file's limits (:class:`~dsh_replay.protocol.bounds.BoundedJsonl`)
   gets the command killed at once and the case failed naming the limit.
4. **Judge it as a Python adapter is judged** (:func:`.runner.judge_runs`):
   the rules, the golden, no forged finish, and the typed error a fault must
   give, by class name: a name of :mod:`dsh_replay.errors` stands for that
   class (so ``RateLimitError`` is a ``ProviderError``), any other name for
   none of them. The whole case has ``time_limit`` seconds; a command still
   running then is killed and the case fails as a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from .. import errors
from ..cassette.matching import vcr_matchers
from ..cassette.store import Cassette
from ..errors import ConfigError
from ..protocol.bounds import BoundedJsonl
from ..protocol.chunks import StreamChunk
from ..protocol.jsonl import BadLine, Raised, chunk_from_json, parse_golden_lines
from ..server.http import HttpServer
from ..server.replay import CassetteServer, Playback, Unmatched
from .cases import ConformanceCase
from .runner import CASE_TIMEOUT, CaseVerdict, Seen, judge_requests, judge_runs

__all__ = ["PLACEHOLDERS", "foreign_error", "run_command_case"]

#: what a command template may hold, filled in for each call
PLACEHOLDERS = ("{base_url}", "{origin}", "{options}", "{route}", "{case}")
_QUOTED_STDERR = 600  # characters of a failing command's stderr a verdict quotes
_KEPT_STDERR = 64 << 10  # bytes of its end kept: enough for the quote whatever the encoding


def foreign_error(name: str, message: str) -> BaseException:
    """The error an adapter in another language reported, as an exception the judge can test.

    A name of :mod:`dsh_replay.errors` gives an instance of a stand-in
    subclass of that class, of the same name, that holds the message only (the
    attributes ours carry are not on the wire); any other name a class of its
    own, an instance of none of ours.
    """
    found = getattr(errors, name, None)
    base = found if isinstance(found, type) and issubclass(found, errors.DshReplayError) else Exception
    cls = type(name, (base,), {"__init__": Exception.__init__, "__str__": Exception.__str__,
                               "__module__": __name__})
    error: BaseException = cls(message)
    return error


class _CaseServer(CassetteServer):
    """The case's interactions, matched on method and path; every request noted for the judge."""

    def __init__(self, case: ConformanceCase) -> None:
        # vcrpy's matchers where they are used: vcr imported at start-up would defeat pytest-recording's
        # assertion rewriting
        matchers = vcr_matchers()
        fault = dataclasses.replace(case.fault, interaction=case.fault_interaction) if case.fault else None
        cassette = Cassette(path=case.cassette, interactions=list(case.interactions))
        super().__init__([cassette], matchers=[matchers.method, matchers.path], fragmentation=case.fragmentation,
                         fault=fault)
        self.case = case
        self.seen: list[Seen] = []
        self.problem = ""

    def find(self, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes) -> Playback | Unmatched:
        found = super().find(method, target, headers, body)
        path = urlsplit(target).path
        position = found.position if isinstance(found, Playback) else None
        if isinstance(found, Playback) and found.repeated and not self.case.repeat_last and not self.problem:
            self.problem = (f"the adapter sent {method} {path} once more after every recorded answer to it was "
                            "played (recorded requests are matched on method and path)")
        # a stalled case is bounded by the case's time limit: the command's read timeout is not seen from here
        self.seen.append(Seen(method, path, body, 0.0, position))
        return found


def _base_path(case: ConformanceCase) -> str:
    """The path the route's adapter has in its base URL (``/v1`` for openai), served from the origin."""
    base = case.base_url
    if base is None:
        from ..adapters import BUILTIN_ROUTES, adapter_class

        if case.route in BUILTIN_ROUTES:
            base = adapter_class(case.route).default_base_url
    return urlsplit(base or "").path.rstrip("/")


def _argv(command: str, values: dict[str, str]) -> list[str]:
    words = shlex.split(command)
    if not words:
        raise ConfigError("--command is empty; give the command that runs your adapter, e.g. "
                          "\"node my-adapter.mjs {base_url} {options}\"")
    for placeholder, value in values.items():
        words = [word.replace("{" + placeholder + "}", value) for word in words]
    return words


async def _run(argv: list[str], env: dict[str, str], limit: float) -> tuple[bytes, bytes, int | None]:
    """(stdout, stderr's end, exit status); the status is None when the command ran past ``limit`` and was killed.

    Its stdout is gathered as :class:`~dsh_replay.protocol.bounds.BoundedJsonl` bounds a chunk file: the
    command is killed as soon as it breaks a limit, and the ``CassetteError`` saying which is raised.
    """
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env)
    except OSError as exc:
        raise ConfigError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    stdout, stderr = BoundedJsonl("stdout"), bytearray()
    broken: list[errors.CassetteError] = []
    killed = False

    def kill() -> None:
        nonlocal killed
        killed = True
        with contextlib.suppress(ProcessLookupError):
            process.kill()

    def keep_stdout(piece: bytes) -> None:
        if killed:
            return  # what is left in the pipe is read and dropped, so that the pipe reaches its end
        try:
            stdout.add(piece)
        except errors.CassetteError as exc:
            broken.append(exc)
            kill()

    def keep_stderr_end(piece: bytes) -> None:  # only its end is quoted: a chatty command must not fill memory
        stderr.extend(piece)
        del stderr[:-_KEPT_STDERR]

    async def read(pipe: asyncio.StreamReader | None, into: Callable[[bytes], None]) -> None:
        while pipe is not None and (piece := await pipe.read(1 << 16)):
            into(piece)

    # the process is only seen to end once both pipes have: they are read to their end even after a kill
    ended = asyncio.gather(read(process.stdout, keep_stdout), read(process.stderr, keep_stderr_end), process.wait())
    status: int | None = None
    try:
        status = (await asyncio.wait_for(asyncio.shield(ended), max(limit, 0.0)))[-1]
    except asyncio.TimeoutError:
        kill()
        await ended
    finally:
        if process.returncode is None:
            kill()
    if broken:
        raise broken[0]
    return stdout.getvalue(), bytes(stderr), status


def _read_output(out: bytes) -> tuple[list[StreamChunk], BaseException | None, str]:
    """The chunks, the error raised, and what is wrong with the output ("" when nothing is)."""
    chunks: list[StreamChunk] = []
    raised: BaseException | None = None
    for number, value in parse_golden_lines(out):
        where = f"stdout line {number}"
        if raised is not None:
            return chunks, raised, f"P1 {where}: nothing may follow the 'raised' line"
        if isinstance(value, BadLine):
            return chunks, raised, f"P1 {where} is {value.reason}"
        try:
            line = Raised.from_line(value)
            if line is not None:
                raised = foreign_error(line.error, line.message)
            else:
                chunks.append(chunk_from_json(value))
        except ValueError as exc:
            return chunks, raised, f"P1 {where} is not a chunk: {exc}"
    return chunks, raised, ""


async def run_command_case(command: str, case: ConformanceCase, *, time_limit: float = CASE_TIMEOUT,
                           strict_requests: bool = False) -> CaseVerdict:
    """Serve ``case`` alone, run ``command`` against it, judge what it printed."""
    verdict = CaseVerdict(case)
    if case.skip:
        return verdict
    core = _CaseServer(case)
    server = HttpServer(core, stall_seconds=time_limit)
    port = await server.start("127.0.0.1", 0)
    deadline = asyncio.get_running_loop().time() + time_limit
    runs: list[tuple[list[Any], BaseException | None]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="dsh-replay-conform-") as folder:
            for call, options in enumerate(case.calls, start=1):
                options_file = Path(folder) / f"call-{call}.json"
                options_file.write_bytes(orjson.dumps(options.to_json()))
                values = {"base_url": f"http://127.0.0.1:{port}{_base_path(case)}", "origin": f"http://127.0.0.1:{port}",
                          "options": str(options_file), "route": case.route, "case": case.id}
                env = {**os.environ, **{f"DSH_REPLAY_{key.upper()}": value for key, value in values.items()}}
                try:
                    out, err, status = await _run(_argv(command, values), env,
                                                  deadline - asyncio.get_running_loop().time())
                except errors.CassetteError as exc:
                    verdict.problem = f"{exc}; the command was killed"
                    return verdict
                if status is None:
                    verdict.problem = f"hang: no result after {time_limit:g} s (the adapter must end or raise on its own)"
                    return verdict
                chunks, raised, broken = _read_output(out)
                verdict.chunks += len(chunks)
                if not broken and status != 0 and raised is None:
                    stderr = err.decode("utf-8", "replace").strip()[-_QUOTED_STDERR:]
                    broken = f"the command exited with status {status} without a 'raised' line; stderr: {stderr}"
                if broken:
                    verdict.problem = broken
                    return verdict
                runs.append((chunks, raised))
                if raised is not None:
                    break
    finally:
        await server.close()
    verdict.problem = core.problem
    if not verdict.problem:
        judge_requests(core.seen, case, verdict, strict=strict_requests)
    if not verdict.problem:
        judge_runs(runs, case, verdict)
    return verdict
