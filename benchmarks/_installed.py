"""The package measured as ``pip install`` leaves it: with its bytecode compiled.

pip compiles a package's modules when it installs it. An editable install does
not, and with ``PYTHONDONTWRITEBYTECODE`` set (as on CI machines) nothing ever
writes the bytecode, so every new process would compile each module of ours
from source, a cost no installed copy pays. The start-up benchmarks compile
it first.
"""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dsh_replay"


def compile_package() -> None:
    if not compileall.compile_dir(PACKAGE, quiet=1):
        raise RuntimeError(f"compiling {PACKAGE} failed")
