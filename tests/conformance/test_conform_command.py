"""``dsh-replay conform`` as a user runs it: exit codes, rows, JUnit XML.

The command runs in-process through ``main()`` (what the console script and
``python -m dsh_replay`` call), as ``tests/cli`` runs the other commands; one
route is also run as a subprocess, the way a user starts it.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dsh_replay.adapters import BUILTIN_ROUTES
from dsh_replay.cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def conform(*args: str, cwd: Path = ROOT, in_subprocess: bool = False) -> subprocess.CompletedProcess[str]:
    """``dsh-replay conform ARGS`` started in ``cwd``: in-process unless ``in_subprocess``."""
    argv = ["conform", *args]
    if in_subprocess:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.run([sys.executable, "-m", "dsh_replay", *argv], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    out, err = io.StringIO(), io.StringIO()
    before = Path.cwd()
    os.chdir(cwd)
    try:
        code = main(argv, out=out, err=err)
    finally:
        os.chdir(before)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def rows(stdout: str) -> dict[str, tuple[str, str]]:
    """case id -> (verdict, detail) from the table."""
    table: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines()[2:]:
        if not line.strip():
            break
        case, verdict, *detail = line.split(maxsplit=2)
        table[case] = (verdict, detail[0] if detail else "")
    return table


@pytest.mark.parametrize("route", sorted(BUILTIN_ROUTES))
def test_every_shipped_adapter_conforms(route: str) -> None:
    _, name, _ = BUILTIN_ROUTES[route]
    result = conform(f"dsh_replay.adapters:{name}", "--route", route, in_subprocess=route == "openai")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    table = rows(result.stdout)
    assert {"text[recorded]", "text[bytes]", "text[random-1]", "text[random-2]", "fault-reset", "fault-stall",
            "fault-429", "fault-529", "fault-error-event", "fault-truncate-middle"} <= set(table)
    assert {verdict for verdict, _ in table.values()} == {"ok"}
    cassettes = len(list((ROOT / "cassettes" / route).glob("*.yaml")))
    assert sum(1 for case in table if "[" in case) == 4 * cassettes
    assert f"{len(table)} cases: {len(table)} passed, 0 failed, 0 skipped" in result.stdout


def test_an_adapter_that_drops_block_ends_fails_with_the_rule_named() -> None:
    result = conform("tests.conformance.bad_adapters:DropsBlockEnd", "--route", "openai")
    assert result.returncode == 1, result.stderr
    table = rows(result.stdout)
    verdict, detail = table["text[bytes]"]
    assert verdict == "FAIL"
    assert detail.startswith("P8 at chunk") and "still open" in detail
    assert table["parallel-tool-calls[recorded]"][1].startswith("P3 at chunk")


def test_an_adapter_that_swallows_errors_into_a_finish_fails_every_fault() -> None:
    result = conform("tests.conformance.bad_adapters:SwallowsErrors", "--route", "openai")
    assert result.returncode == 1
    table = rows(result.stdout)
    faults = {case: row for case, row in table.items() if case.startswith("fault-")}
    assert len(faults) == 3 + 2 + 8 + 1  # truncations, reset, stall, statuses, error event
    for case, (verdict, detail) in faults.items():
        assert verdict == "FAIL", case
        assert detail.startswith("forged finish: the stream finished (stop) where"), (case, detail)
    assert "RateLimitError was expected" in faults["fault-429"][1]
    assert "AuthenticationError was expected" in faults["fault-401"][1]
    # the cassettes that really finish still pass: the suite blames the fault handling only
    assert table["text[recorded]"][0] == "ok"


def test_request_body_differences_are_notes_unless_strict() -> None:
    lenient = conform("tests.conformance.bad_adapters:SendsExtraField", "--route", "openai", "-k", "text[")
    assert lenient.returncode == 0, lenient.stdout
    assert "request body of POST /v1/chat/completions differs from the recorded one in: user" in lenient.stdout
    strict = conform("tests.conformance.bad_adapters:SendsExtraField", "--route", "openai", "-k", "text[",
                     "--strict-requests")
    assert strict.returncode == 1
    assert rows(strict.stdout)["text[bytes]"] == (
        "FAIL", "request body of POST /v1/chat/completions differs from the recorded one in: user (strict requests)"
    )


def test_junit_xml_has_one_testcase_per_case(tmp_path: Path) -> None:
    report = tmp_path / "conform.xml"
    result = conform("tests.conformance.bad_adapters:SwallowsErrors", "--route", "openai", "--junit-xml",
                     str(report))
    assert result.returncode == 1
    suite = ET.parse(report).getroot()
    cases = suite.findall("testcase")
    assert suite.tag == "testsuite" and int(suite.get("tests", "")) == len(cases) == len(rows(result.stdout))
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures", "")) == len(failed) == 22
    by_name = {c.get("name"): c for c in cases}
    assert by_name["fault-429"].get("classname") == "openai"
    failure = by_name["fault-429"].find("failure")
    assert failure is not None and "forged finish" in failure.get("message", "")
    assert by_name["text[recorded]"].find("failure") is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_module:Adapter", "--route", "openai"], "cannot import 'no_such_module'"),
        (["dsh_replay.adapters:NoSuchAdapter", "--route", "openai"], "module dsh_replay.adapters has no 'NoSuchAdapter'"),
        (["dsh_replay.adapters", "--route", "openai"], "must name 'package.module:AdapterClass'"),
        (["dsh_replay.adapters:OpenAIChatAdapter", "--route", "cohere"], "no bundled cassettes for route 'cohere'"),
        (["dsh_replay.adapters:OpenAIChatAdapter", "--route", "openai", "missing/folder"],
         "missing/folder: no such file or folder"),
        (["dsh_replay.adapters:OpenAIChatAdapter", "--route", "openai", "-k", "nothing-like-this"],
         "-k 'nothing-like-this' matches no case"),
        (["dsh_replay.adapters:OpenAIChatAdapter", "--route", "openai", "cassettes/anthropic"],
         "no cassette of route 'openai' in cassettes/anthropic"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = conform(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("dsh-replay: error: ") and message in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("builtins:dict", "builtins:dict(...) gave dict, which has no stream(options) method"),
        ("dsh_replay.errors:ConfigError", "cannot build the adapter as dsh_replay.errors:ConfigError(api_key=...)"),
    ],
)
def test_an_adapter_that_cannot_be_built_is_named(target: str, message: str) -> None:
    result = conform(target, "--route", "openai", "-k", "text[recorded]")
    assert result.returncode == 2
    assert message in result.stderr


def test_a_misspelt_target_names_it_and_the_nearest_name() -> None:
    result = conform("dsh_replay.adapters:OpenAIChatAdaptr", "--route", "openai")
    assert result.returncode == 2
    assert result.stderr == (
        "dsh-replay: error: TARGET 'dsh_replay.adapters:OpenAIChatAdaptr': module dsh_replay.adapters has no "
        "'OpenAIChatAdaptr' (did you mean 'OpenAIChatAdapter'?)\n"
    )


def test_an_adapter_that_ends_quietly_is_not_called_a_forged_finish() -> None:
    result = conform("tests.conformance.bad_adapters:EndsQuietlyOnErrors", "--route", "openai", "-k", "fault-4")
    assert result.returncode == 1
    table = rows(result.stdout)
    verdict, detail = table["fault-429"]
    assert verdict == "FAIL" and detail.startswith("the stream ended without an error where RateLimitError was expected")
    assert not any("forged" in detail for _, detail in table.values())


def test_a_golden_difference_is_shown_once_per_cassette_and_verbose_shows_every_message() -> None:
    result = conform("tests.conformance.bad_adapters:RenamesTheStory", "--route", "openai", "-k", "text[")
    assert result.returncode == 1
    assert [verdict for verdict, _ in rows(result.stdout).values()] == ["FAIL"] * 4
    assert result.stdout.count("differs from the adapter's chunks") == 1
    assert "\ntext[recorded], text[bytes], text[random-1], text[random-2]:\nchunks differ from the golden" in result.stdout
    assert "accept them with: dsh-replay check --update " in result.stdout
    assert "pytest --update-golden" not in result.stdout

    quiet = conform("tests.conformance.bad_adapters:EndsQuietlyOnErrors", "--route", "openai", "-k", "fault-429")
    assert "\nfault-429:\n" not in quiet.stdout  # a one-line failure is whole in the table
    verbose = conform("tests.conformance.bad_adapters:EndsQuietlyOnErrors", "--route", "openai", "-k", "fault-429", "-v")
    assert ("\nfault-429:\nthe stream ended without an error where RateLimitError was expected; and P11 at chunk 0: "
            "stream ended after 0 chunk(s) without finish\n") in verbose.stdout  # whole, where the table cuts it


def test_junit_xml_may_not_replace_a_cassette_or_golden(tmp_path: Path) -> None:
    folder = tmp_path / "openai"
    shutil.copytree(ROOT / "cassettes" / "openai", folder)
    cassette = folder / "text.yaml"
    before = cassette.read_bytes()
    result = conform("dsh_replay.adapters:OpenAIChatAdapter", "--route", "openai", str(folder), "-k", "text[",
                     "--junit-xml", str(cassette))
    assert result.returncode == 2
    assert result.stderr == (f"dsh-replay: error: refusing to write JUnit XML to {cassette}: it is one of the "
                             "cassettes being read (use --force to overwrite)\n")
    assert cassette.read_bytes() == before
