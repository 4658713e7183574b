"""``atomic_write`` on a full disk: one ``CassetteError`` naming the file, the old file intact, no temp file."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from dsh_replay.cassette.files import atomic_write
from dsh_replay.cassette.store import Cassette
from dsh_replay.errors import CassetteError

FULL = os.strerror(errno.ENOSPC)  # "No space left on device"


def _full_disk_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.fdopen`` whose file takes a few bytes, then finds the disk full, as a real one would."""
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, fh: Any) -> None:
            self.fh = fh

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

        def write(self, data: bytes) -> int:
            self.fh.write(data[:5])
            self.fh.flush()
            raise OSError(errno.ENOSPC, FULL)

    monkeypatch.setattr(os, "fdopen", lambda fd, *args, **kwargs: FullDisk(real_fdopen(fd, *args, **kwargs)))


def _full_disk_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    def replace(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, FULL)

    monkeypatch.setattr(os, "replace", replace)


FAILURES = {"write": _full_disk_writer, "rename": _full_disk_rename}


@pytest.mark.parametrize("where", FAILURES)
def test_a_full_disk_keeps_the_previous_file_and_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.chdir(tmp_path)
    golden = Path("cassettes/openai/text.chunks.jsonl")
    golden.parent.mkdir(parents=True)
    golden.write_bytes(b'{"type":"finish"}\n')
    FAILURES[where](monkeypatch)
    with pytest.raises(CassetteError) as caught:
        atomic_write(golden, b'{"type":"block-start"}\n' * 1000)
    assert str(caught.value) == (
        f"cannot write {golden}: No space left on device (the previous file is intact)")
    assert caught.value.path == str(golden)
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == errno.ENOSPC
    assert golden.read_bytes() == b'{"type":"finish"}\n'
    assert os.listdir(golden.parent) == ["text.chunks.jsonl"]  # no temp file left


@pytest.mark.parametrize("where", FAILURES)
def test_a_new_file_on_a_full_disk_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    path = tmp_path / "new.yaml"
    FAILURES[where](monkeypatch)
    with pytest.raises(CassetteError, match=r"^cannot write .*new\.yaml: No space left on device \(nothing was written\)$"):
        atomic_write(path, b"data\n")
    assert os.listdir(tmp_path) == []


def test_a_cassette_saved_to_a_full_disk_is_one_cassette_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "text.yaml"
    path.write_bytes(b"old\n")
    _full_disk_writer(monkeypatch)
    with pytest.raises(CassetteError) as caught:
        Cassette(path=path, interactions=[]).save()
    assert str(caught.value) == f"cannot write {path}: No space left on device (the previous file is intact)"
    assert path.read_bytes() == b"old\n" and os.listdir(tmp_path) == ["text.yaml"]


def test_an_interrupt_still_removes_the_temp_file_and_is_not_wrapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def replace(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "x.yaml", b"data\n")
    assert os.listdir(tmp_path) == []
