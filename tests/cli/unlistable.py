"""Folders that cannot be listed, for the CLI tests.

The suite may run as root, whom ``chmod 000`` does not stop; so the folder is
made unlistable where every walk lists it: ``os.scandir`` (which ``os.walk``
calls through the ``os`` module) raises ``PermissionError`` for it, as it does
for a folder without read permission.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

#: a real ``chmod 000`` stops whoever is not root
AS_ROOT = not hasattr(os, "geteuid") or os.geteuid() == 0


def refuse_listing(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """``os.scandir(folder)`` raises ``PermissionError``, as for a folder without read permission."""
    scandir = os.scandir
    refused = os.path.realpath(folder)

    def guarded(path: object = ".") -> object:
        if isinstance(path, (str, os.PathLike)) and os.path.realpath(path) == refused:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", guarded)
