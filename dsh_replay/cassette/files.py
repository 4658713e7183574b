"""Cassette files on disk: atomic writes, whether a path can take a file, and telling our cassettes from others without parsing them."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from pathlib import Path

from ..errors import CassetteError

__all__ = [
    "atomic_write",
    "cassette_kind",
    "has_metadata",
    "is_cassette_name",
    "read_metadata_key",
    "remove_stale_temp_files",
    "unwritable_reason",
]


def unwritable_reason(path: Path) -> str | None:
    """Why a file cannot be written at ``path`` (its folders made as needed), or ``None``.

    Asked before a recording starts, so that a call paid for is not lost at the end; with
    ``os`` calls on the path's text, as each test that records asks it.
    """
    try:
        if stat.S_ISDIR(_mode(os.fspath(path)) or 0):
            return f"{path} is a folder"
        folder = path.absolute().parent
        while (mode := _mode(os.fspath(folder))) is None and folder.parent != folder:
            folder = folder.parent
    except OSError as exc:  # a name longer than the file system allows...
        return f"{path} cannot be written: {exc.strerror or exc}"
    if not stat.S_ISDIR(mode or 0):
        return f"{folder} is a file, so the folder for {path.name} cannot be made"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None


def _mode(path: str) -> int | None:
    """``path``'s mode, links followed; None when nothing is there (or a loop of links), as pathlib's tests read it."""
    try:
        return os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EBADF):
            return None
        raise


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    The file keeps the permission bits of the one it replaces; a new file gets
    the mode ``open(path, "w")`` would give it. A write that fails (a full disk,
    no permission) raises :class:`CassetteError` naming ``path`` and the reason,
    chained to the ``OSError``; the temporary file is removed and the previous
    file, if any, is left as it was.
    """
    shown = path
    existed = False
    try:
        if path.is_symlink():
            # a golden or cassette kept elsewhere and linked in: update the file it
            # points to, and keep the link
            path = path.resolve()
        mode = _mode_to_keep(path)
        existed = mode is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_through_temp_file(path, data, mode)
    except OSError as exc:
        state = "the previous file is intact" if existed else "nothing was written"
        raise CassetteError(f"cannot write {shown}: {exc.strerror or exc} ({state})", path=str(shown)) from exc


def _write_through_temp_file(path: Path, data: bytes, mode: int | None) -> None:
    # A short name of its own: one derived from a long file name could pass the
    # file system's name limit when the final name does not.
    # ``remove_stale_temp_files`` knows this name: change both together.
    tmp = path.with_name(f"{_TEMP_PREFIX}{secrets.token_hex(8)}{_TEMP_SUFFIX}")
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
        with contextlib.suppress(OSError):  # the error that brought us here is the one to report
            tmp.unlink(missing_ok=True)
        raise


_TEMP_PREFIX = ".dsh-replay-"
_TEMP_SUFFIX = ".tmp"
#: exactly the names ``atomic_write`` gives its temporary files (``secrets.token_hex(8)``)
_TEMP_NAME = re.compile(re.escape(_TEMP_PREFIX) + "[0-9a-f]{16}" + re.escape(_TEMP_SUFFIX))


def remove_stale_temp_files(folder: Path, *, older_than: float, recursive: bool = True) -> list[Path]:
    """Remove the temporary files of ``atomic_write`` that a killed process left under ``folder``.

    Only regular files named exactly as ``atomic_write`` names them
    (``.dsh-replay-`` + 16 hex digits + ``.tmp``) and last modified before
    ``older_than`` (a ``time.time()``, the start of the run) are removed: a
    concurrent run's file being written is newer, and is kept. Linked folders
    are not entered (``folder`` itself may be a link). A file or folder that
    cannot be read or removed is passed over. Returns the removed files, sorted.
    """
    removed: list[Path] = []
    for root, folders, names in os.walk(folder):  # errors are ignored; links to folders are not followed
        if not recursive:
            folders.clear()
        for name in names:
            if not _TEMP_NAME.fullmatch(name):
                continue
            found = os.path.join(root, name)
            try:
                st = os.lstat(found)
                if stat.S_ISREG(st.st_mode) and st.st_mtime < older_than:
                    os.unlink(found)
                    removed.append(Path(found))
            except OSError:  # gone meanwhile, or not ours to remove
                continue
    return sorted(removed)


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
# vcrpy's (which our cassettes have too), likewise.
_VCR_KEY = re.compile(rb"\n(?:interactions|\"interactions\"|'interactions')[ \t]*:")
# vcrpy's JSON serializer indents its keys: the key at any depth is taken for a cassette.
_JSON_VCR_KEY = re.compile(rb"\"interactions\"\s*:")


def is_cassette_name(name: str) -> bool:
    """A ``.yaml`` or ``.yml`` file name or path (a name that is all suffix, ``.yaml``, is a hidden file)."""
    return os.path.splitext(name)[1] in (".yaml", ".yml")


def has_metadata(path: Path) -> bool:
    """Does this YAML file have our top-level ``dsh_replay:`` key, wherever it is?

    The file is read in blocks, not parsed: a directory may hold large cassettes
    and plain vcrpy ones. A file that cannot be read counts as a case, so that
    loading it reports why instead of the file being skipped in silence.
    """
    return read_metadata_key(path) is not False


def read_metadata_key(path: Path) -> bool | None:
    """True: the file has our top-level key; False: it has not; None: it cannot be read."""
    return _has_key(path, _TOP_LEVEL_KEY)


def cassette_kind(path: Path) -> str | None:
    """``"dsh_replay"`` or ``"vcrpy"`` when the file at ``path`` is such a cassette; ``"unreadable"``; else ``None``.

    Only ``.yaml``, ``.yml`` and ``.json`` files are looked at, in blocks as
    :func:`has_metadata` does. ``None`` too when there is no file.
    """
    if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
        return None
    if path.suffix == ".json":
        found = _has_key(path, _JSON_VCR_KEY)
        return "unreadable" if found is None else ("vcrpy" if found else None)
    ours = _has_key(path, _TOP_LEVEL_KEY)
    if ours is None:
        return "unreadable"
    if ours:
        return "dsh_replay"
    return "vcrpy" if _has_key(path, _VCR_KEY) else None


def _has_key(path: Path, pattern: re.Pattern[bytes]) -> bool | None:
    try:
        with path.open("rb") as fh:
            # The file's start (after a BOM) is a line start; a key cut by a block
            # edge is found with the end of the block before it.
            text = b"\n" + fh.read(1 << 16).removeprefix(b"\xef\xbb\xbf")
            while not pattern.search(text):
                block = fh.read(1 << 16)
                if not block:
                    return False
                text = text[-64:] + block
    except OSError:
        return None
    return True
