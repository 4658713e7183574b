"""``--prune-unused`` and the unused/orphan listing touch only our own files, and only after a whole run.

Ours: a cassette with top-level ``dsh_replay:`` metadata, a golden by its
``.chunks.jsonl`` suffix (kept when its cassette is someone else's). Plain
vcrpy and pytest-recording cassettes beside ours are never listed, whatever
their name. A run of part of the suite lists nothing: another module's test,
not run, may own any file of a folder (its marker's ``cassette=`` may point there).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .helpers import IMPORTS, echo_test, ndjson, provider, streaming, summary
from .test_prune import PATHS, SUBSET

EXAMPLE = Path(__file__).parents[2] / "examples" / "acme_adapter"

#: a vcrpy cassette, as vcrpy writes it: one GET answered with JSON, no dsh_replay metadata
PING = """\
interactions:
- request:
    body: null
    headers: {}
    method: GET
    uri: http://ping.invalid/ping
  response:
    body:
      string: '{"pong": true}'
    headers:
      Content-Type:
      - application/json
    status:
      code: 200
      message: OK
version: 1
"""

#: appended to the example's tests/test_acme.py: vcrpy and pytest-recording tests whose
#: cassettes live in cassettes/test_acme/ beside ours, under names no test of ours derives
NEIGHBOURS = '''

import json
import urllib.request
from pathlib import Path

import vcr

MANUAL = str(Path(__file__).parent / "cassettes" / "test_acme" / "manual.yaml")


def ping():
    with urllib.request.urlopen("http://ping.invalid/ping") as response:
        return json.load(response)


def test_plain_vcrpy():
    with vcr.use_cassette(MANUAL, record_mode="none"):
        assert ping() == {"pong": True}


@pytest.mark.vcr
@pytest.mark.default_cassette("recording_default.yaml")
def test_pytest_recording_default_cassette():
    assert ping() == {"pong": True}


@pytest.mark.vcr("recording_extra.yaml")
def test_pytest_recording_extra_cassette():
    assert ping() == {"pong": True}
'''


@pytest.fixture
def acme(pytester: pytest.Pytester) -> Path:
    """The Acme example with vcrpy and pytest-recording tests added; returns its cassette folder."""
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    tests = pytester.path / "tests" / "test_acme.py"
    tests.write_text(tests.read_text(encoding="utf-8") + NEIGHBOURS, encoding="utf-8")
    folder = pytester.path / "tests" / "cassettes" / "test_acme"
    for name in ("manual.yaml", "recording_default.yaml", "recording_extra.yaml"):
        (folder / name).write_text(PING, encoding="utf-8")
    return folder


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_prune_in_the_acme_example_deletes_only_its_own_unused_files(
    pytester: pytest.Pytester, acme: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = ["manual.yaml", "recording_default.yaml", "recording_extra.yaml"]
    # a golden someone made for the vcrpy cassette: ours by suffix, but its cassette is not
    (acme / "manual.chunks.jsonl").write_bytes((acme / "test_text_answer.chunks.jsonl").read_bytes())
    # what a deleted test of ours leaves behind: its cassette and golden, and a golden alone
    (acme / "test_removed.yaml").write_bytes((acme / "test_text_answer.yaml").read_bytes())
    (acme / "test_removed.chunks.jsonl").write_bytes((acme / "test_text_answer.chunks.jsonl").read_bytes())
    (acme / "gone.chunks.jsonl").write_bytes((acme / "test_tool_call.chunks.jsonl").read_bytes())
    before = names(acme)

    result = pytester.runpytest("--prune-unused", "-p", "no:randomly")
    result.assert_outcomes(passed=9)  # the six Acme tests, the three that replay through vcrpy
    assert summary(result)[3:] == [
        "unused goldens: 2, deleted (tests/cassettes/test_acme/gone.chunks.jsonl, "
        "tests/cassettes/test_acme/test_removed.chunks.jsonl)",
        "orphan cassettes: 1, deleted (tests/cassettes/test_acme/test_removed.yaml)",
    ]
    gone = {"gone.chunks.jsonl", "test_removed.chunks.jsonl", "test_removed.yaml"}
    assert names(acme) == sorted(set(before) - gone)
    assert set(theirs) | {"manual.chunks.jsonl"} <= set(names(acme))

    # the next whole run finds nothing more: the vcrpy files are still not ours to judge
    # (run from outside the project, naming it: its rootdir, so still the whole suite)
    monkeypatch.chdir(pytester.path.parent)
    result = pytester.runpytest(str(pytester.path), "--prune-unused", "-p", "no:randomly")
    result.assert_outcomes(passed=9)
    assert summary(result)[3:] == ["unused goldens: 0", "orphan cassettes: 0"]
    assert names(acme) == sorted(set(before) - gone)


A = IMPORTS + echo_test("test_one", "one") + echo_test("test_two", "two")

#: test_b.py keeps a cassette in test_a's folder, by an absolute path in its marker
B = IMPORTS + """
from pathlib import Path

SHARED = str(Path(__file__).parent / "cassettes" / "test_a" / "shared")
""" + echo_test("test_shared", "shared", marker="@pytest.mark.dsh_replay(cassette=SHARED)")


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["test_b.py"], PATHS),
        (["test_b.py::test_shared"], SUBSET),
        (["-k", "test_shared"], SUBSET),
        (["-k", "test_one"], SUBSET),
    ],
    ids=["module", "node-id", "k-other-module", "k-this-module"],
)
def test_a_partial_run_lists_no_other_modules_files(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], why: str
) -> None:
    project.makepyfile(test_a=A, test_b=B)
    with provider(monkeypatch, *(streaming(ndjson(text), delay=0) for text in ("one", "two", "shared"))):
        project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=3)
    folder = project.path / "cassettes" / "test_a"
    recorded = [
        "shared.chunks.jsonl", "shared.yaml",
        "test_one.chunks.jsonl", "test_one.yaml", "test_two.chunks.jsonl", "test_two.yaml",
    ]
    assert names(folder) == recorded

    # test_b's cassette opens test_a's folder, but test_a's tests did not run: nothing is listed
    result = project.runpytest(*args)
    result.assert_outcomes(passed=1)
    assert summary(result)[3:] == []
    result = project.runpytest(*args, "--prune-unused")
    result.assert_outcomes(passed=1)
    assert summary(result)[3:] == [why]
    assert names(folder) == recorded

    # the whole suite knows every owner: nothing in the folder is unused
    result = project.runpytest("--prune-unused")
    result.assert_outcomes(passed=3)
    assert summary(result)[3:] == ["unused goldens: 0", "orphan cassettes: 0"]
    assert names(folder) == recorded
