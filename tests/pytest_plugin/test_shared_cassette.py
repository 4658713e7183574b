"""Tests that share one cassette through the marker's ``cassette=`` never lose each other's recordings.

Re-recording (``rewrite``, ``all``) starts a test's cassette afresh; the
first test of the run to write a shared cassette does, and the later ones add
theirs after it, so a replay of all of them passes. Under pytest-xdist the
tests could run in different processes at once, so recording there is refused.
"""

from __future__ import annotations

import pytest
import yaml

from .helpers import IMPORTS, echo_test, ndjson, provider, streaming

SHARED = '@pytest.mark.dsh_replay(cassette="shared", allow_unplayed=True, golden=False)'
THREE = IMPORTS + "".join(echo_test(f"test_{name}", name, marker=SHARED) for name in ("a", "b", "c"))
NO_RANDOM = ("-p", "no:randomly")


def bodies(project: pytest.Pytester) -> list[str]:
    data = yaml.safe_load((project.path / "cassettes" / "test_three" / "shared.yaml").read_text())
    return [interaction["response"]["body"]["string"] for interaction in data["interactions"]]


def record(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *texts: str, args: tuple[str, ...]) -> pytest.RunResult:
    with provider(monkeypatch, *(streaming(ndjson(text), delay=0) for text in texts)):
        return project.runpytest(*args, *NO_RANDOM)


@pytest.fixture
def three(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Three tests sharing ``shared.yaml``, recorded one after the other (new_episodes adds each)."""
    project.makepyfile(test_three=THREE)
    record(project, monkeypatch, "A1", "B1", "C1", args=("--record-mode=new_episodes",)).assert_outcomes(passed=3)
    assert bodies(project) == [ndjson(t).decode() for t in ("A1", "B1", "C1")]
    return project


@pytest.mark.parametrize("mode", ["rewrite", "all"])
def test_re_recording_a_shared_cassette_keeps_every_test_in_order(
    three: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    record(three, monkeypatch, "A2", "B2", "C2", args=(f"--record-mode={mode}",)).assert_outcomes(passed=3)
    assert bodies(three) == [ndjson(t).decode() for t in ("A2", "B2", "C2")]
    three.runpytest(*NO_RANDOM).assert_outcomes(passed=3)  # every test finds its recording


def test_recording_a_shared_cassette_under_xdist_is_refused_and_the_file_kept(
    three: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (three.path / "cassettes" / "test_three" / "shared.yaml").read_bytes()
    result = record(three, monkeypatch, "A2", "B2", "C2", args=("--record-mode=rewrite", "-p", "xdist", "-n", "2"))
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*shared.yaml is shared by 3 tests*under pytest-xdist would let the workers "
                                 "overwrite each other's recordings*"])
    assert (three.path / "cassettes" / "test_three" / "shared.yaml").read_bytes() == before
    # replaying it under xdist is fine
    three.runpytest("-p", "xdist", "-n", "2").assert_outcomes(passed=3)


def test_re_recording_a_shared_cassette_with_a_test_deselected_is_refused(
    three: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (three.path / "cassettes" / "test_three" / "shared.yaml").read_bytes()
    result = record(three, monkeypatch, "A2", "C2", args=("--record-mode=rewrite", "-k", "not test_b"))
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*shared.yaml is shared with 1 deselected test(s) (test_three.py::test_b): "
                                 "re-recording it (--record-mode=rewrite) would drop their recordings*"])
    assert (three.path / "cassettes" / "test_three" / "shared.yaml").read_bytes() == before
