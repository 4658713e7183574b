"""``dsh-replay check --update`` and the disk: what a killed run left is removed, a full disk is one line per case."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from ..killed_write import TEMP_NAME, kill_during_write
from .conftest import run

FOLDER = Path("cassettes/my-provider")
GREETING_GOLDEN = FOLDER / "greeting.chunks.jsonl"
UMLAUTS_GOLDEN = FOLDER / "umlauts.chunks.jsonl"


def _temp_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if TEMP_NAME.fullmatch(p.name))


def test_update_removes_the_temp_file_a_killed_write_left(project: Path) -> None:
    cassette = project / FOLDER / "greeting.yaml"
    before = cassette.read_bytes()
    left = kill_during_write(cassette)
    assert _temp_files(project) == [left]
    # a concurrent run's file, started after this run: kept; and names that are not ours
    newer = project / FOLDER / ".dsh-replay-0000000000000000.tmp"
    newer.write_bytes(b"being written")
    stamp = time.time() + 60
    os.utime(newer, (stamp, stamp))
    others = [project / FOLDER / ".dsh-replay-notours.tmp", project / FOLDER / "foo.tmp"]
    for other in others:
        other.write_bytes(b"x")

    result = run("check", "--update", "cassettes")
    assert result.code == 0, result.out + result.err
    assert _temp_files(project) == [newer]
    assert all(other.exists() for other in others)
    assert cassette.read_bytes() == before


def test_plain_check_writes_nothing_and_removes_nothing(project: Path) -> None:
    left = kill_during_write(project / FOLDER / "greeting.yaml")
    assert run("check", "cassettes").code == 0
    assert left.exists()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_full_disk_is_one_line_per_case_and_the_goldens_stay(
    project: Path, monkeypatch: pytest.MonkeyPatch, jobs: str
) -> None:
    differing = UMLAUTS_GOLDEN.read_bytes().replace(" aus Köln".encode(), b" aus Bonn")
    UMLAUTS_GOLDEN.write_bytes(differing)
    GREETING_GOLDEN.unlink()
    real_replace = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if str(dst).endswith(".chunks.jsonl"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)  # inherited by the workers of -n 2, which are forks
    result = run("check", "--update", "-n", jobs, "cassettes")
    assert (result.code, result.err) == (1, "")
    assert "2 case(s), " in result.out and ": 0 passed, 2 failed" in result.out
    details = result.out.split("failed\n", 1)[1]
    assert details == (
        f"\n{FOLDER / 'greeting.yaml'}:\n"
        f"cannot write {GREETING_GOLDEN}: No space left on device (nothing was written)\n"
        f"\n{FOLDER / 'umlauts.yaml'}:\n"
        f"cannot write {UMLAUTS_GOLDEN}: No space left on device (the previous file is intact)\n"
    )
    assert UMLAUTS_GOLDEN.read_bytes() == differing and not GREETING_GOLDEN.exists()
    assert _temp_files(project) == []
