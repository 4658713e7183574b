"""Start-up: what ``import dsh_replay`` and the light commands cost, in fresh interpreters.

- ``import dsh_replay``: the package resolves its names on first use, so the
  import itself loads neither httpx, vcrpy nor any adapter. Measured against
  ``import vcr`` (what pytest-recording pays at start-up) in the same run.
- ``dsh-replay --help`` and ``dsh-replay routes``: wall time of the command,
  against a bare ``python -c pass``; and whether vcrpy or an adapter module was
  imported (the target: neither).

Each command runs in a new interpreter, interleaved, seven times; medians. The
package's bytecode is compiled first, as ``pip install`` does (``_installed.py``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from _installed import compile_package

RUNS = 7

#: what a light command must not load
HEAVY = ("vcr", "httpx", "dsh_replay.cassette.store", "dsh_replay.adapters.openai_chat", "dsh_replay.adapters._base")

_REPORT_MODULES = (
    "import json, sys\n"
    "heavy = {heavy!r}\n"
    "print(json.dumps(sorted(name for name in heavy if name in sys.modules)), file=sys.stderr)\n"
)


def _probe(code: str) -> list[str]:
    """The heavy modules loaded after running ``code`` in a fresh interpreter."""
    script = code + "\n" + _REPORT_MODULES.format(heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


def _command(argv: list[str]) -> str:
    return (
        "import contextlib, io\n"
        "from dsh_replay.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({argv!r})\n"
    )


CONTENDERS = {
    "python -c pass": "pass",
    "import vcr": "import vcr",
    "import dsh_replay": "import dsh_replay",
    "dsh-replay --help": _command(["--help"]),
    "dsh-replay routes": _command(["routes"]),
}


def _seconds(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return time.perf_counter() - started


def run(quick: bool = False) -> list[dict[str, object]]:
    runs = 3 if quick else RUNS
    compile_package()  # as installed: no start-up compiles our modules
    times: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for _ in range(runs):
        for name, code in CONTENDERS.items():
            times[name].append(_seconds(code))
    return [
        {"name": name, "seconds": statistics.median(values), "runs": runs,
         "heavy": _probe(code) if name.startswith(("import dsh", "dsh-replay")) else []}
        for name, (code, values) in ((n, (CONTENDERS[n], v)) for n, v in times.items())
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row)
