"""``AdapterConformance``: the same cases as ``dsh-replay conform``, one pytest test each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.pytest_plugin.helpers import INI

ROOT = Path(__file__).resolve().parents[2]


def suite(body: str) -> str:
    return (
        "import pytest\n"
        "from dsh_replay.adapters import AnthropicAdapter\n"
        "from dsh_replay.conformance import AdapterConformance\n"
        "from tests.conformance.bad_adapters import DropsBlockEnd\n\n"
        + body
    )


def run(pytester: pytest.Pytester, body: str, *args: str, in_subprocess: bool = False) -> pytest.RunResult:
    pytester.makeini(INI)
    pytester.makepyfile(test_mine=suite(body))
    argv = ("-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-rs", f"--rootdir={pytester.path}",
            "-o", f"pythonpath={ROOT}", *args)
    if in_subprocess:
        # as in a user's own pytest: a fresh process, with the installed plugin around the cases
        return pytester.runpytest_subprocess(*argv)
    return pytester.runpytest(*argv)  # in-process: the same plugin and cases, without a start-up each


GOOD = '''
class TestAnthropic(AdapterConformance):
    route = "anthropic"

    @pytest.fixture
    def adapter_factory(self):
        return AnthropicAdapter
'''


def test_one_test_per_case_with_the_case_ids(pytester: pytest.Pytester) -> None:
    result = run(pytester, GOOD, "--collect-only")
    ids = re.findall(r"test_conformance\[(.+)\]", result.stdout.str())
    cassettes = len(list((ROOT / "cassettes" / "anthropic").glob("*.yaml")))
    assert len(ids) == 4 * cassettes + 14
    assert {"text[recorded]", "text[bytes]", "text[random-1]", "tool-call[random-2]", "fault-429", "fault-stall",
            "fault-truncate-early", "fault-error-event"} <= set(ids)


def test_a_shipped_adapter_passes_every_case(pytester: pytest.Pytester) -> None:
    result = run(pytester, GOOD, in_subprocess=True)
    cassettes = len(list((ROOT / "cassettes" / "anthropic").glob("*.yaml")))
    result.assert_outcomes(passed=4 * cassettes + 14)


def test_a_failing_case_names_the_rule_and_a_case_can_be_skipped_by_id(pytester: pytest.Pytester) -> None:
    body = '''
class TestDropsBlockEnd(AdapterConformance):
    route = "openai"
    skip_cases = {"text[bytes]": "known: blocks are not closed yet"}

    @pytest.fixture
    def adapter_factory(self):
        return DropsBlockEnd
'''
    result = run(pytester, body, "-k", "text[ or fault-429")
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 1 and outcomes["failed"] == 3, result.stdout.str()
    out = result.stdout.str()
    assert "SKIPPED [1]" in out and "known: blocks are not closed yet" in out
    assert re.search(r"text\[recorded\]: P8 at chunk \d+: usage at position \d+ while block 0 \(text\) is still open", out)


def test_a_skip_naming_no_case_is_an_error_listing_the_cases(pytester: pytest.Pytester) -> None:
    body = GOOD + '    skip_cases = {"fault-999": "no such status"}\n'
    result = run(pytester, body)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*TestAnthropic.skip_cases names no case: fault-999; the cases are: *fault-429*"])


def test_a_class_without_adapter_factory_says_what_to_write(pytester: pytest.Pytester) -> None:
    body = '''
class TestNothing(AdapterConformance):
    route = "anthropic"
'''
    result = run(pytester, body, "-k", "text[recorded]")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*TestNothing needs an adapter_factory fixture returning the adapter class*"])
