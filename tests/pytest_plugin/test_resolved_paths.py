"""A test's paths are resolved once each when absolute; a relative one follows the working folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.pytest_plugin.shared import resolved


def test_an_absolute_path_is_resolved_through_its_links(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert resolved(tmp_path / "link" / "case.yaml") == (tmp_path / "real" / "case.yaml").resolve()
    assert resolved(tmp_path / "link" / "case.yaml") == (tmp_path / "real" / "case.yaml").resolve()


def test_a_relative_path_is_resolved_from_the_working_folder_of_the_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    first = resolved(Path("case.yaml"))
    monkeypatch.chdir(tmp_path / "b")
    assert first == (tmp_path / "a" / "case.yaml").resolve()
    assert resolved(Path("case.yaml")) == (tmp_path / "b" / "case.yaml").resolve()
