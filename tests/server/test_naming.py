"""Which file a recording goes to: a name from the client never leads out of the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.errors import ConfigError
from dsh_replay.server.naming import cassette_file, clean_name


def test_a_name_is_a_file_under_the_folder(tmp_path: Path) -> None:
    assert cassette_file(tmp_path, "openai/text") == tmp_path / "openai" / "text.yaml"
    assert cassette_file(tmp_path, "/openai/text.yaml/".lstrip("/")) == tmp_path / "openai" / "text.yaml"
    assert clean_name("node/tool-call_2") == "node/tool-call_2"


@pytest.mark.parametrize("name", [
    "../escape", "openai/../../escape", "/etc/passwd", "C:/Windows/x", "a\\..\\b", "a/./b", "", "a//b",
    "x\x00y", "%2e%2e/x", "-rf", "a" * 201,
])
def test_a_name_that_could_leave_the_folder_or_confuse_a_shell_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="is refused"):
        cassette_file(tmp_path, name)


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "in" / "link").symlink_to(tmp_path / "out")
    with pytest.raises(ConfigError, match="resolves outside"):
        cassette_file(tmp_path / "in", "link/text")


def test_a_link_that_stays_in_the_folder_is_taken(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert cassette_file(tmp_path, "alias/text") == tmp_path / "alias" / "text.yaml"


def test_a_linked_cassette_file_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in" / "openai").mkdir(parents=True)
    (tmp_path / "elsewhere.yaml").write_text("interactions: []\n")
    (tmp_path / "in" / "openai" / "text.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(ConfigError, match="resolves outside"):
        cassette_file(tmp_path / "in", "openai/text")


def test_a_file_where_a_folder_of_the_name_would_be_is_not_taken_for_a_link(tmp_path: Path) -> None:
    (tmp_path / "openai").write_text("not a folder")
    assert cassette_file(tmp_path, "openai/text") == tmp_path / "openai" / "text.yaml"
