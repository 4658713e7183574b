"""cassetter, the fastest peer, installed beside the venv and never in it.

cassetter's pytest plugin and pytest-recording's both define ``--record-mode``,
so pytest stops at start-up in an environment that has both. The pin lives in
``pyproject.toml`` (the ``bench-peers`` extra); :func:`ensure` installs it once
with ``pip install --target .venv/bench-peers`` (no dependencies: cassetter
needs none beyond the httpx the venv has), and the benchmarks put that folder
on ``sys.path`` (in-process figures) or ``PYTHONPATH`` (its pytest runs), only
where cassetter is measured.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDER = Path(sys.prefix) / "bench-peers"
_EXTRA = re.compile(r'^bench-peers\s*=\s*\["([^"]+)"\]', re.MULTILINE)


def requirement() -> str:
    """The pinned requirement, e.g. ``cassetter==0.16.1``."""
    found = _EXTRA.search((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    if found is None:
        raise RuntimeError("pyproject.toml has no bench-peers extra naming cassetter")
    return found.group(1)


def ensure() -> Path | str:
    """The folder cassetter is installed in, or why it could not be installed."""
    wanted = requirement()
    name, _, version = wanted.partition("==")
    if (FOLDER / f"{name}-{version}.dist-info").is_dir():
        return FOLDER
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--upgrade", "--target", str(FOLDER), wanted],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0 or not (FOLDER / f"{name}-{version}.dist-info").is_dir():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"pip could not install {wanted} into {FOLDER}: {last}"
    return FOLDER


def environ(folder: Path, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with cassetter's folder first on ``PYTHONPATH``."""
    path = [str(folder), *filter(None, [base.get("PYTHONPATH", "")])]
    return {**base, "PYTHONPATH": os.pathsep.join(path)}


def importable(folder: Path) -> None:
    """Make ``import cassetter`` work in this process (which runs no pytest of its own)."""
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
