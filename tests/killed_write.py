"""A real ``kill -9`` in the middle of ``atomic_write``: what an interrupted recording leaves behind.

A child process writes a big file through ``atomic_write`` whose writer stalls
halfway (half the bytes are on disk in the temporary file); it says so on
stdout, and the parent SIGKILLs it there, so no ``finally`` or ``except`` of
``atomic_write`` runs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMP_NAME = re.compile(r"\.dsh-replay-[0-9a-f]{16}\.tmp")
SIZE = 50_000_000

_CHILD = """
import os, sys, time
from pathlib import Path
from dsh_replay.cassette.files import atomic_write

real_fdopen = os.fdopen

class Stalling:
    def __init__(self, fh):
        self.fh = fh
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.fh.close()
    def write(self, data):
        self.fh.write(data[: len(data) // 2])
        self.fh.flush()
        print("half written", flush=True)
        time.sleep(120)  # SIGKILLed here

os.fdopen = lambda fd, *args, **kwargs: Stalling(real_fdopen(fd, *args, **kwargs))
atomic_write(Path(sys.argv[1]), b"x" * int(sys.argv[2]))
"""


def kill_during_write(target: Path) -> Path:
    """SIGKILL a process halfway through ``atomic_write(target, 50 MB)``; the temporary file it left."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(target), str(SIZE)], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"half written\n"
        left = [p for p in target.parent.iterdir() if TEMP_NAME.fullmatch(p.name)]
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert len(left) == 1 and left[0].stat().st_size == SIZE // 2
    return left[0]
