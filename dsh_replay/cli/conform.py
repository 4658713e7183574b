"""``dsh-replay conform``: the conformance suite against an adapter of one's own."""

from __future__ import annotations

import argparse
import functools
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio

from ..adapters.route_table import import_target
from ..cassette.files import atomic_write
from ..conformance import CaseVerdict, ConformanceCase, build_cases, run_case
from ..errors import ConfigError
from .check import render_table
from .common import refuse_output

__all__ = ["run_conform", "write_junit"]

DESCRIPTION = (
    "Replay every cassette of ROUTE (the bundled ones, or those under PATHS) through the adapter\n"
    "TARGET names, under the recorded, bytes and two random fragmentations; compare with the goldens;\n"
    "run rules P1-P12; then run the fault matrix: truncations, a connection reset, a stall past the\n"
    "read timeout, HTTP 400/401/403/404/429/500/503/529 with the provider's own error body and a\n"
    "mid-stream error event, each of which must raise the typed error (never hang, never finish).\n"
    "TARGET is module:attribute, a class or factory called as ATTR(api_key=..., base_url=...).\n"
    "An adapter in another language is run with --command instead of TARGET: each case is served\n"
    "alone on loopback (its fault injected by the server), the command is run with {base_url} and\n"
    "{options} (a JSON file of the call's GenerateOptions) put in, and its stdout is read as chunk\n"
    "JSONL, an error it raised as a last line {\"type\":\"raised\",\"error\":CLASS,\"message\":...}.\n"
    "Requests are matched on method and path; body differences are notes unless --strict-requests.\n"
    "One row per case, then a summary. Exit 1 if any case fails."
)
EXAMPLE = ("dsh-replay conform mypackage.adapter:MyAdapter --route openai\n"
           "  dsh-replay conform --command \"node my-adapter.mjs {base_url} {options}\" --route openai")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", nargs="?", default=None,
                        help="module:attribute of the adapter class or factory (or --command)")
    parser.add_argument("paths", nargs="*", metavar="PATHS", help="cassettes or folders (default: the bundled ones)")
    parser.add_argument("--route", required=True, help="the route whose cassettes and error shapes to use")
    # not dest "command": main keeps the name of the dsh-replay command there
    parser.add_argument("--command", dest="adapter_command", default=None, metavar="COMMAND",
                        help="the adapter as a command in any language: {base_url} (the case's server, with the "
                             "route's base path, e.g. /v1), {origin}, {options} (a JSON file), {route} and {case} "
                             "are put in, and set as DSH_REPLAY_BASE_URL, ... in its environment; it prints chunk "
                             "JSONL")
    parser.add_argument("--case-timeout", type=float, default=None, metavar="SECONDS",
                        help="seconds one case may take before it fails as a hang (default 30)")
    parser.add_argument("--strict-requests", action="store_true",
                        help="fail a case whose request body differs from the recorded one")
    parser.add_argument("-k", dest="only", default=None, metavar="TEXT", help="run only the cases whose id contains TEXT")
    parser.add_argument("--junit-xml", default=None, metavar="FILE", help="also write the results as JUnit XML")
    parser.add_argument("--force", action="store_true", help="let --junit-xml overwrite a cassette or golden")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="after the table, print every failure's whole message (and every case's notes)")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    paths, command = list(args.paths), args.adapter_command
    if command is not None and args.target is not None:
        paths.insert(0, args.target)  # with --command, the first word after it is a path
    elif command is None and args.target is None:
        raise ConfigError("name the adapter: TARGET (module:attribute of a Python adapter) or --command "
                          "(an adapter in any language, e.g. --command \"node my-adapter.mjs {base_url} {options}\")")
    if args.case_timeout is not None and not 0 < args.case_timeout < float("inf"):
        raise ConfigError(f"--case-timeout must be a number of seconds above 0, got {args.case_timeout:g}")
    return run_conform(args.target if command is None else None, args.route, paths, out,
                       strict_requests=args.strict_requests, only=args.only, junit_xml=args.junit_xml,
                       verbose=args.verbose, force=args.force, command=command, case_timeout=args.case_timeout)


def load_target(spec: str) -> Callable[..., Any]:
    """The adapter class or factory ``module:attribute`` names, importable from the current folder."""
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    return import_target(spec, f"TARGET {spec!r}")


def run_conform(target: str | None, route: str, paths: Sequence[str], out: TextIO, *, strict_requests: bool = False,
                only: str | None = None, junit_xml: str | None = None, verbose: bool = False,
                force: bool = False, command: str | None = None, case_timeout: float | None = None) -> int:
    """Run the suite against the Python adapter ``target`` or, when ``target`` is None, ``command``."""
    run_one = _runner(target, command, strict_requests, case_timeout)
    cases = build_cases(route, paths)
    if only is not None:
        cases = [case for case in cases if only in case.id]
        if not cases:
            raise ConfigError(f"-k {only!r} matches no case of route {route!r}")
    if junit_xml:
        refuse_output(Path(junit_xml), what="JUnit XML", force=force, inputs={
            "one of the cassettes being read": {case.cassette for case in cases},
            "one of the goldens being read": {golden for case in cases for golden in case.goldens}})
    results: list[tuple[CaseVerdict, float]] = []
    for case in cases:
        started = time.perf_counter()
        verdict = anyio.run(functools.partial(run_one, case))
        results.append((verdict, time.perf_counter() - started))
    rows = [[v.case.id, _status(v), _first_line(v.case.skip or v.problem or "; ".join(v.notes))] for v, _ in results]
    out.write(render_table(["case", "verdict", "detail"], rows))
    failed = [v for v, _ in results if v.problem]
    _write_details(failed if verbose else [v for v in failed if "\n" in v.problem], out)
    if verbose:
        for verdict, _ in results:
            for note in verdict.notes:
                out.write(f"note: {verdict.case.id}: {note}\n")
    skipped = sum(1 for v, _ in results if v.case.skip)
    passed = len(results) - len(failed) - skipped
    adapter = target if target is not None else f"command {command!r}"
    out.write(f"\n{len(results)} cases: {passed} passed, {len(failed)} failed, {skipped} skipped "
              f"(route {route}, adapter {adapter})\n")
    if junit_xml:
        write_junit(Path(junit_xml), f"conform {route} {adapter}", results)
    return 1 if failed else 0


def _runner(target: str | None, command: str | None, strict_requests: bool,
            case_timeout: float | None) -> Callable[[ConformanceCase], Awaitable[CaseVerdict]]:
    """What runs one case: the Python adapter ``target`` in-process, or ``command`` against a served case."""
    if command is None:
        assert target is not None
        factory = load_target(target)
        return functools.partial(run_case, factory, strict_requests=strict_requests)
    from ..conformance.command import run_command_case
    from ..conformance.runner import CASE_TIMEOUT

    return functools.partial(run_command_case, command, time_limit=case_timeout or CASE_TIMEOUT,
                             strict_requests=strict_requests)


def _write_details(failed: Sequence[CaseVerdict], out: TextIO) -> None:
    """Each failure's whole message, once: the fragmentations of one cassette usually fail alike
    (a golden difference is the same diff four times), so cases with one message share it."""
    by_message: dict[str, list[str]] = {}
    for verdict in failed:
        by_message.setdefault(verdict.problem.rstrip(), []).append(verdict.case.id)
    for message, ids in by_message.items():
        out.write(f"\n{', '.join(ids)}:\n{message}\n")


def _status(verdict: CaseVerdict) -> str:
    if verdict.case.skip:
        return "skip"
    return "FAIL" if verdict.problem else "ok"


def _first_line(text: str, width: int = 110) -> str:
    line = text.split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def write_junit(path: Path, name: str, results: Sequence[tuple[CaseVerdict, float]]) -> None:
    """The results as one JUnit ``testsuite``: classname = route, name = case id."""
    failures = sum(1 for v, _ in results if v.problem)
    skipped = sum(1 for v, _ in results if v.case.skip)
    suite = ET.Element("testsuite", name=name, tests=str(len(results)), failures=str(failures),
                       errors="0", skipped=str(skipped), time=f"{sum(s for _, s in results):.3f}")
    for verdict, seconds in results:
        case = ET.SubElement(suite, "testcase", classname=verdict.case.route, name=verdict.case.id,
                             time=f"{seconds:.3f}")
        if verdict.case.skip:
            ET.SubElement(case, "skipped", message=verdict.case.skip)
        elif verdict.problem:
            ET.SubElement(case, "failure", message=_first_line(verdict.problem, 500)).text = verdict.problem
        if verdict.notes:
            ET.SubElement(case, "system-out").text = "\n".join(verdict.notes)
    atomic_write(path, ET.tostring(suite, encoding="utf-8", xml_declaration=True) + b"\n")
