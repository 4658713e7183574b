"""A test's paths are resolved once each when absolute; a relative one follows the working folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.pytest_plugin.shared import real_name


def test_an_absolute_path_is_resolved_through_its_links(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert real_name(tmp_path / "link" / "case.yaml") == str((tmp_path / "real" / "case.yaml").resolve())
    assert real_name(tmp_path / "link" / "case.yaml") == str((tmp_path / "real" / "case.yaml").resolve())


def test_the_same_path_spelt_as_text_or_with_redundant_parts_has_one_real_name(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    wanted = str((tmp_path / "real" / "case.yaml").resolve())
    assert real_name(str(tmp_path / "real" / "case.yaml")) == wanted
    assert real_name(f"{tmp_path}//real/./case.yaml") == wanted
    assert real_name(f"{tmp_path}/real/../real/case.yaml") == wanted


def test_a_relative_path_is_resolved_from_the_working_folder_of_the_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    first = real_name(Path("case.yaml"))
    monkeypatch.chdir(tmp_path / "b")
    assert first == str((tmp_path / "a" / "case.yaml").resolve())
    assert real_name(Path("case.yaml")) == str((tmp_path / "b" / "case.yaml").resolve())


def test_a_file_that_is_a_link_is_followed_though_its_folder_is_known(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cases" / "plain.yaml").write_text("")
    (tmp_path / "cases" / "linked.yaml").symlink_to(tmp_path / "elsewhere" / "target.yaml")
    folder = str((tmp_path / "cases").resolve())
    assert real_name(tmp_path / "cases" / "plain.yaml") == f"{folder}/plain.yaml"
    assert real_name(tmp_path / "cases" / "linked.yaml") == str((tmp_path / "elsewhere" / "target.yaml").resolve())
    assert real_name(tmp_path / "cases" / "absent.yaml") == f"{folder}/absent.yaml"
