"""``remove_stale_temp_files``: what a killed ``atomic_write`` left is removed, nothing else is."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dsh_replay.cassette.files import remove_stale_temp_files

from ..killed_write import kill_during_write

OURS = ".dsh-replay-0123456789abcdef.tmp"
HOUR = 3600.0


def _file(path: Path, *, age: float = HOUR) -> Path:
    """A file at ``path`` last modified ``age`` seconds ago (negative: in the future)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"partial")
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def test_a_killed_write_leaves_its_temp_file_which_the_cleanup_removes(tmp_path: Path) -> None:
    target = tmp_path / "cassettes" / "big.yaml"
    target.parent.mkdir()
    target.write_bytes(b"the reviewed cassette\n")
    left = kill_during_write(target)
    # kill -9: atomic_write's own clean-up never ran
    assert left.exists() and target.read_bytes() == b"the reviewed cassette\n"

    started = time.time()  # the next run starts after the killed one
    assert remove_stale_temp_files(tmp_path, older_than=started) == [left]
    assert sorted(p.name for p in target.parent.iterdir()) == ["big.yaml"]
    assert target.read_bytes() == b"the reviewed cassette\n"


def test_only_our_names_older_than_the_start_are_removed(tmp_path: Path) -> None:
    stale = [_file(tmp_path / OURS), _file(tmp_path / "openai" / "deep" / ".dsh-replay-fedcba9876543210.tmp")]
    kept = [
        _file(tmp_path / "openai" / ".dsh-replay-aaaaaaaaaaaaaaaa.tmp", age=-60),  # a concurrent run's, being written
        _file(tmp_path / ".dsh-replay-notours.tmp"),
        _file(tmp_path / "foo.tmp"),
        _file(tmp_path / ".dsh-replay-0123456789ABCDEF.tmp"),  # token_hex never writes upper case
        _file(tmp_path / ".dsh-replay-0123456789abcde.tmp"),  # 15 digits
        _file(tmp_path / ".dsh-replay-0123456789abcdef.tmp.bak"),
        _file(tmp_path / "x.dsh-replay-0123456789abcdef.tmp"),
        _file(tmp_path / "text.yaml"),
    ]
    (tmp_path / "named-like-ours" / ".dsh-replay-1111111111111111.tmp").mkdir(parents=True)  # a folder, not a file
    assert remove_stale_temp_files(tmp_path, older_than=time.time()) == sorted(stale)
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in kept)
    assert (tmp_path / "named-like-ours" / ".dsh-replay-1111111111111111.tmp").is_dir()


def test_linked_folders_and_linked_files_are_left_alone(tmp_path: Path) -> None:
    elsewhere = _file(tmp_path / "elsewhere" / OURS)
    folder = tmp_path / "cassettes"
    folder.mkdir()
    (folder / "shared").symlink_to(elsewhere.parent, target_is_directory=True)
    (folder / ".dsh-replay-2222222222222222.tmp").symlink_to(elsewhere)
    assert remove_stale_temp_files(folder, older_than=time.time()) == []
    assert elsewhere.exists() and (folder / ".dsh-replay-2222222222222222.tmp").is_symlink()
    # the folder given may itself be a link: that is where the user asked to look
    (tmp_path / "link").symlink_to(elsewhere.parent, target_is_directory=True)
    assert remove_stale_temp_files(tmp_path / "link", older_than=time.time()) == [tmp_path / "link" / OURS]
    assert not elsewhere.exists()


def test_not_recursive_looks_only_beside(tmp_path: Path) -> None:
    beside = _file(tmp_path / OURS)
    below = _file(tmp_path / "sub" / OURS)
    assert remove_stale_temp_files(tmp_path, older_than=time.time(), recursive=False) == [beside]
    assert below.exists()


def test_a_file_that_cannot_be_removed_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = _file(tmp_path / "a" / OURS)
    gone = _file(tmp_path / "b" / OURS)
    real_unlink = os.unlink

    def unlink(path: str) -> None:
        if path == str(stuck):
            raise PermissionError(13, "Permission denied", path)
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", unlink)
    assert remove_stale_temp_files(tmp_path, older_than=time.time()) == [gone]
    assert stuck.exists() and not gone.exists()


def test_a_missing_folder_has_nothing_to_remove(tmp_path: Path) -> None:
    assert remove_stale_temp_files(tmp_path / "absent", older_than=time.time()) == []
