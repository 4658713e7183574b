"""Which file a recording goes to: ``<folder>/<name>.yaml``, and never anywhere else.

The name comes from the client (``/_dsh/NAME/-/...`` or the header
``x-dsh-replay-cassette: NAME``), so it is checked as untrusted input: a
name with ``..``, an absolute path, a backslash, a drive, a control
character, or one whose file resolves outside the folder (through a link) is
refused. Parts are separated by ``/``; ``.yaml`` is added (a name may end in
it already).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..errors import ConfigError

__all__ = ["MAX_NAME", "cassette_file", "clean_name"]

#: characters in a name: a file name's usual ones, without what a shell or a URL would read otherwise
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@=-]*")
#: a name longer than this is refused: with the folder, a path must stay under the file system's limits
MAX_NAME = 200


def clean_name(name: str) -> str:
    """``name`` without its ``.yaml`` and surrounding slashes; :class:`ConfigError` when it could leave the folder."""
    text = name.strip().strip("/").removesuffix(".yaml").removesuffix(".yml")
    why = ""
    if not text:
        why = "it is empty"
    elif len(text) > MAX_NAME:
        why = f"it is longer than {MAX_NAME} characters"
    elif name.strip().startswith("/") or re.match(r"[A-Za-z]:", text):
        why = "it is an absolute path"
    elif any(part in ("..", ".") for part in text.split("/")):
        why = "it has a '..' or '.' part"
    elif not all(_PART.fullmatch(part) for part in text.split("/")):
        why = ("each part must start with a letter or digit and hold only letters, digits and . _ + @ = - "
               "(parts separated by /)")
    if why:
        raise ConfigError(f"cassette name {name[:80]!r} is refused: {why}")
    return text


def cassette_file(folder: Path, name: str) -> Path:
    """The file a recording named ``name`` goes to, inside ``folder``."""
    text = clean_name(name)
    path = folder / f"{text}.yaml"
    if not _link_below(folder, f"{text}.yaml"):
        return path
    try:
        inside = path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError) as exc:  # a loop of links
        raise ConfigError(f"cassette name {name!r} is refused: {exc}") from None
    if not inside:
        raise ConfigError(f"cassette name {name!r} is refused: {path} resolves outside {folder} (a link)")
    return path


def _link_below(folder: Path, name: str) -> bool:
    """Might a part of ``name`` under ``folder`` be a link? Only one could lead out: a clean name has no ``..``.

    Each part that exists is looked at without following it, until one does not exist (nothing
    below it does either); a request pays these few calls instead of resolving the folder's
    whole path twice.
    """
    place = os.fspath(folder)
    for part in name.split("/"):
        place = os.path.join(place, part)
        try:
            mode = os.lstat(place).st_mode
        except FileNotFoundError:
            return False
        except OSError:  # not a folder, too long, no permission: the resolving check says why
            return True
        if stat.S_ISLNK(mode):
            return True
    return False
