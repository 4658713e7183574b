"""Cassette files on disk: atomic writes, whether a path can take a file, and telling our cassettes from others without parsing them."""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from ..errors import CassetteError

__all__ = ['atomic_write', 'has_metadata', 'read_metadata_key', 'unwritable_reason']


def unwritable_reason(path: Path) -> str | None:
    """Why a file cannot be written at ``path`` (its folders made as needed), or ``None``.

    Asked before a recording starts, so that a call paid for is not lost at the end.
    """
    try:
        if path.is_dir():
            return f"{path} is a folder"
        folder = next(parent for parent in path.absolute().parents if parent.exists())
    except OSError as exc:  # a name longer than the file system allows, a loop of links...
        return f"{path} cannot be written: {exc.strerror or exc}"
    if not folder.is_dir():
        return f"{folder} is a file, so the folder for {path.name} cannot be made"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    The file keeps the permission bits of the one it replaces; a new file gets
    the mode ``open(path, "w")`` would give it.
    """
    if path.is_symlink():
        # a golden or cassette kept elsewhere and linked in: update the file it
        # points to, and keep the link
        path = path.resolve()
    mode = _mode_to_keep(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A short name of its own: one derived from a long file name could pass the
    # file system's name limit when the final name does not.
    tmp = path.with_name(f".dsh-replay-{secrets.token_hex(8)}.tmp")
    # Not mkstemp, which forces 0600: created with 0666, the kernel applies the
    # umask itself (and any default ACL), exactly as for a plain open(). Reading
    # the umask instead (os.umask(0) then back) would briefly set it to 0 for
    # every thread of the process. 64 random bits make a name clash (EEXIST) moot.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _mode_to_keep(path: Path) -> int | None:
    """The permission bits of the file at ``path``; ``None`` when there is none."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise CassetteError(f"cannot write {path}: it is a directory; remove it or choose another path", path=str(path))
    return stat.S_IMODE(st.st_mode)


# Our top-level key at the start of a line, in block style, plain or quoted.
_TOP_LEVEL_KEY = re.compile(rb"\n(?:dsh_replay|\"dsh_replay\"|'dsh_replay')[ \t]*:")


def has_metadata(path: Path) -> bool:
    """Does this YAML file have our top-level ``dsh_replay:`` key, wherever it is?

    The file is read in blocks, not parsed: a directory may hold large cassettes
    and plain vcrpy ones. A file that cannot be read counts as a case, so that
    loading it reports why instead of the file being skipped in silence.
    """
    return read_metadata_key(path) is not False


def read_metadata_key(path: Path) -> bool | None:
    """True: the file has our top-level key; False: it has not; None: it cannot be read."""
    try:
        with path.open("rb") as fh:
            # The file's start (after a BOM) is a line start; a key cut by a block
            # edge is found with the end of the block before it.
            text = b"\n" + fh.read(1 << 16).removeprefix(b"\xef\xbb\xbf")
            while not _TOP_LEVEL_KEY.search(text):
                block = fh.read(1 << 16)
                if not block:
                    return False
                text = text[-64:] + block
    except OSError:
        return None
    return True
