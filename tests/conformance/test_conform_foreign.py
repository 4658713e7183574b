"""``dsh-replay conform --command``: the suite against an adapter in any language, each case served alone.

The "foreign" adapter here is a Python one run as a separate process
(``foreign_adapter.py``), so that it is judged over the wire exactly as a
Node or Go adapter would be; ``tests/cli/test_node_example.py`` runs a real
Node one.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .test_conform_command import ROOT, conform, rows

FOREIGN = f"{sys.executable} {ROOT / 'tests' / 'conformance' / 'foreign_adapter.py'}"


def adapter(name: str) -> str:
    return f"{FOREIGN} {name} {{base_url}} {{options}}"


def test_an_adapter_run_as_a_command_passes_the_faults_over_the_wire() -> None:
    result = conform("--command", adapter("dsh_replay.adapters:OpenAIChatAdapter"), "--route", "openai", "-k", "fault-")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    table = rows(result.stdout)
    assert len(table) == 14 and {verdict for verdict, _ in table.values()} == {"ok"}
    assert "14 cases: 14 passed, 0 failed, 0 skipped (route openai, adapter command '" in result.stdout


def test_its_chunks_are_judged_against_the_golden_under_every_fragmentation() -> None:
    result = conform("--command", adapter("tests.conformance.bad_adapters:RenamesTheStory"), "--route", "openai",
                     "-k", "text[")
    assert result.returncode == 1
    table = rows(result.stdout)
    assert set(table) == {"text[recorded]", "text[bytes]", "text[random-1]", "text[random-2]"}
    for verdict, detail in table.values():
        assert (verdict, detail) == ("FAIL", f"chunks differ from the golden {ROOT}/cassettes/openai/text.chunks.jsonl:")
    assert '+ {"type":"text-delta","index":0,"text":"HELLO"}' in result.stdout


def test_the_rules_and_forged_finishes_are_caught_as_for_a_python_adapter() -> None:
    dropped = rows(conform("--command", adapter("tests.conformance.bad_adapters:DropsBlockEnd"), "--route", "openai",
                           "-k", "text[bytes]").stdout)
    assert dropped["text[bytes]"][0] == "FAIL" and dropped["text[bytes]"][1].startswith("P8 at chunk")
    swallowed = rows(conform("--command", adapter("tests.conformance.bad_adapters:SwallowsErrors"), "--route",
                             "openai", "-k", "fault-4").stdout)
    assert swallowed["fault-429"][0] == "FAIL"
    assert swallowed["fault-429"][1].startswith("forged finish: the stream finished (stop) where RateLimitError was "
                                                "expected")


@pytest.mark.parametrize(("command", "detail"), [
    ("sh -c 'echo \"{{not json\"'", "P1 stdout line 1 is not valid JSON"),
    ("sh -c 'echo \"{\\\"type\\\":\\\"text-delta\\\"}\"'", "P1 stdout line 1 is not a chunk"),
    ("sh -c 'echo broke >&2; exit 3'", "the command exited with status 3 without a 'raised' line; stderr: broke"),
    (f"{sys.executable} -c 'import time; time.sleep(30)'", "hang: no result after 1 s"),
])
def test_a_command_that_misbehaves_fails_its_case_with_the_reason(command: str, detail: str) -> None:
    result = conform("--command", command, "--route", "openai", "-k", "text[recorded]", "--case-timeout", "1")
    assert result.returncode == 1, result.stderr
    verdict, shown = rows(result.stdout)["text[recorded]"]
    assert verdict == "FAIL" and shown.startswith(detail), shown


def test_an_error_of_another_name_is_not_the_typed_error_a_fault_asks_for(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"type":"raised","error":"TypeError","message":"terminated"}\n')
    result = conform("--command", f"cat {out}", "--route", "openai", "-k", "fault-reset")
    assert rows(result.stdout)["fault-reset"] == (
        "FAIL", "raised TypeError (terminated) where StreamInterruptedError was expected")


def test_the_command_gets_the_base_url_options_and_case_in_its_words_and_environment(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    script = (f"import os, sys; open({str(seen)!r}, 'a').write(' '.join(sys.argv[1:]) + ' | ' + "
              "os.environ['DSH_REPLAY_BASE_URL'] + ' ' + os.environ['DSH_REPLAY_CASE'] + ' ' + "
              "open(os.environ['DSH_REPLAY_OPTIONS']).read()[:30] + '\\n')")
    report = tmp_path / "conform.xml"
    result = conform("--command", f"{sys.executable} -c \"{script}\" {{base_url}} {{route}}", "--route", "openai",
                     "-k", "text[recorded]", "--junit-xml", str(report))
    words, environment = seen.read_text().strip().split(" | ")
    url, route = words.split()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1") and route == "openai"
    assert environment == f'{url} text[recorded] {{"model":"gpt-4.1-mini","messa'
    assert result.returncode == 1  # it printed no chunks at all
    case = ET.parse(report).getroot().find("testcase")
    assert case is not None and case.get("name") == "text[recorded]" and case.find("failure") is not None


def test_neither_target_nor_command_is_a_usage_error() -> None:
    result = conform("--route", "openai")
    assert result.returncode == 2 and "name the adapter: TARGET" in result.stderr
