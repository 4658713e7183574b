"""The command line as a whole: help with an example for every command, exit codes, ``python -m``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsh_replay._version import __version__

from .conftest import run

COMMANDS = ["check", "validate", "trace", "diff", "show", "report", "serve", "scan", "record", "routes", "conform",
            "golden"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = run(command, "--help")
    assert (result.code, result.err) == (0, "")
    assert result.out.startswith(f"usage: dsh-replay {command}")
    example = result.out.split("example:\n", 1)[1].strip()
    assert f"dsh-replay {command}" in example


def test_top_level_help_lists_every_command() -> None:
    result = run("--help")
    assert result.code == 0
    for command in COMMANDS:
        assert f"\n    {command} " in result.out
    assert "dsh-replay COMMAND --help" in result.out


def test_record_help_names_the_key_variables_and_ci() -> None:
    text = run("record", "--help").out
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "<ROUTE>_API_KEY"):
        assert variable in text
    assert "Refused when CI is set" in text


def test_version() -> None:
    result = run("--version")
    assert (result.code, result.out) == (0, f"dsh-replay {__version__}\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bogus"], "argument COMMAND: invalid choice: 'bogus'"),
        ([], "the following arguments are required: COMMAND"),
        (["trace", "body.sse"], "the following arguments are required: --route"),
        (["check", "--fragmentation", "halves"], "unknown fragmentation 'halves'"),
        (["diff", "a.jsonl"], "the following arguments are required: B"),
    ],
)
def test_usage_errors_exit_2_with_usage(argv: list[str], message: str) -> None:
    result = run(*argv)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("usage: dsh-replay")
    assert message in result.err


def test_python_dash_m(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "dsh_replay", "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "usage: dsh-replay" in done.stdout
    done = subprocess.run([sys.executable, "-m", "dsh_replay", "bogus"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert "invalid choice: 'bogus'" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "dsh_replay", "show", str(tmp_path / "absent.yaml")],
                          capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (2, f"dsh-replay: error: cassette {tmp_path / 'absent.yaml'} does not exist\n")


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("dsh-replay")
    if not script.exists():
        pytest.skip("dsh-replay is not installed next to this interpreter")
    done = subprocess.run([str(script), "routes"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "openai " in done.stdout


@pytest.mark.parametrize("command", [["routes"], ["validate", "--help"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(command: list[str]) -> None:
    # stdout is a pipe whose reading end is already closed, as when `| head` has exited
    script = (
        "import os, sys\n"
        "read, write = os.pipe()\n"
        "os.close(read)\n"
        "os.dup2(write, 1)\n"
        "from dsh_replay.cli.main import main\n"
        f"sys.exit(main({command!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.stderr == ""
    # 141 as after a SIGPIPE; argparse swallows the write error of --help itself and exits 0
    assert done.returncode == (0 if "--help" in command else 141)


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spoil", [False, True])
def test_the_program_ends_with_its_output_whole_and_exit_handlers_run(tmp_path: Path, spoil: bool) -> None:
    case = tmp_path / "text.yaml"
    case.write_bytes((ROOT / "cassettes" / "openai" / "text.yaml").read_bytes())
    golden = (ROOT / "cassettes" / "openai" / "text.chunks.jsonl").read_bytes()
    (tmp_path / "text.chunks.jsonl").write_bytes(golden.replace(b'"text"', b'"txet"', 1) if spoil else golden)
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('exit handler ran\\n'))\n"
        f"sys.argv = ['dsh-replay', 'check', {str(case)!r}]\n"
        "from dsh_replay.cli.main import console_main\n"
        "sys.exit(console_main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == (1 if spoil else 0), done.stdout + done.stderr
    summary = "0 passed, 1 failed" if spoil else "1 passed, 0 failed"
    assert f"1 case(s), 13 chunks: {summary}" in done.stdout, done.stdout
    # the last line written is there: nothing was lost to the exit
    assert done.stdout.endswith("accept them with: dsh-replay check --update\n" if spoil else f"{summary}\n")
    assert done.stderr.endswith("exit handler ran\n")


def test_main_called_in_a_program_leaves_its_collector_alone() -> None:
    import gc

    frozen = gc.get_freeze_count()
    assert run("routes").code == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
