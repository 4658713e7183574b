"""Installed alongside cassetter, whose plugin defines ``--record-mode`` too (as pytest-recording's does).

cassetter itself is not installed in this environment (its plugin and
pytest-recording's cannot be loaded together); a stand-in package of that name
defines the option the way it does.
"""

from __future__ import annotations

import pytest

from .helpers import IMPORTS, echo_test, ndjson, provider, streaming

STAND_IN = """
def pytest_addoption(parser):
    parser.getgroup("vcr", "VCR cassette recording").addoption(
        "--record-mode", action="store", default=None,
        choices=["none", "new_episodes", "all", "once", "rewrite", "verify"],
    )
"""


@pytest.mark.parametrize("loaded", ["before ours (-p)", "after ours (conftest)"])
def test_pytest_starts_with_both_and_we_read_its_record_mode(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, loaded: str
) -> None:
    package = project.mkpydir("cassetter")
    (package / "pytest_plugin.py").write_text(STAND_IN, encoding="utf-8")
    project.makepyfile(test_dsh=IMPORTS + echo_test())
    argv = ["-p", "no:recording", "--record-mode=once"]
    if loaded.startswith("before"):
        argv[:0] = ["-p", "cassetter.pytest_plugin"]
    else:
        project.makeconftest('pytest_plugins = ["cassetter.pytest_plugin"]\n')
    with provider(monkeypatch, streaming(ndjson("hi"))) as emu:
        result = project.runpytest_subprocess(*argv)
        assert [r.path for r in emu.requests] == ["/gen"]
    result.assert_outcomes(passed=1)
    assert (project.path / "cassettes" / "test_dsh" / "test_echo.yaml").is_file()
