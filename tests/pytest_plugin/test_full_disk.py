"""A full disk while the plugin writes a cassette or golden: one line naming the file, the old file intact."""

from __future__ import annotations

import pytest

from .helpers import IMPORTS, echo_test, ndjson, provider, streaming

FULL_DISK = '''
import errno
import os

import pytest


@pytest.fixture(autouse=True)
def full_disk(monkeypatch):
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith(os.environ["FULL_FOR"]):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
'''


@pytest.mark.parametrize(("suffix", "name"), [(".yaml", "test_a.yaml"), (".jsonl", "test_a.chunks.jsonl")])
def test_a_full_disk_is_one_line_naming_the_file_and_the_old_file_stays(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, suffix: str, name: str
) -> None:
    project.makepyfile(test_t=IMPORTS + echo_test("test_a", "a"))
    with provider(monkeypatch, streaming(ndjson("A"), delay=0)):
        project.runpytest("--record-mode=once").assert_outcomes(passed=1)
    target = project.path / "cassettes" / "test_t" / name
    before = target.read_bytes()

    project.makeconftest(FULL_DISK)
    monkeypatch.setenv("FULL_FOR", suffix)
    with provider(monkeypatch, streaming(ndjson("B"), delay=0)):
        result = project.runpytest("--record-mode=rewrite", "-p", "no:randomly")
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) + outcomes.get("failed", 0) == 1, result.stdout.str()
    output = result.stdout.str()
    assert f"cannot write {target}: No space left on device (the previous file is intact)" in output
    assert "Traceback" not in output and "Errno 28" not in output
    assert target.read_bytes() == before
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]
