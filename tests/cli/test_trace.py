"""``dsh-replay trace``: a raw body through a route's adapter, offline; stdout is the golden."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CASES, run

GREETING = CASES["greeting"][1]
UMLAUTS = CASES["umlauts"][1]

# an adapter that breaks P10 (finish says stop after a tool call), whatever the body
BAD_ADAPTER = '''
from dsh_replay import (BlockEnd, BlockStart, CallId, Finish, FinishReason, LlmAdapter, ToolCallBlock,
                        ToolCallDelta, Usage, UsageChunk)

class BadAdapter(LlmAdapter):
    def __init__(self, api_key, base_url=None):
        pass

    async def stream(self, options):
        call = CallId("c1")
        yield BlockStart(index=0, block_type="tool-call")
        yield ToolCallDelta(index=0, id=call, name="f", arguments_delta="{}")
        yield BlockEnd(index=0, block=ToolCallBlock(id=call, name="f", arguments="{}"))
        yield UsageChunk(usage=Usage(input_tokens=1, output_tokens=1))
        yield Finish(reason=FinishReason(kind="stop"))
'''


def test_stdout_is_exactly_the_golden(project: Path) -> None:
    (project / "body.ndjson").write_bytes(GREETING)
    result = run("trace", "--route", "my-provider", "body.ndjson")
    assert result.code == 0
    assert result.out.encode() == (project / "cassettes" / "my-provider" / "greeting.chunks.jsonl").read_bytes()
    assert result.err == "ok: 6 chunks, 1 block(s); rules P1-P12 hold\n"


@pytest.mark.parametrize("fragmentation", ["bytes", "random:3", "recorded"])
def test_fragmentation_does_not_change_stdout(project: Path, fragmentation: str) -> None:
    (project / "body.ndjson").write_bytes(UMLAUTS)
    expected = run("trace", "--route", "my-provider", "body.ndjson").out
    result = run("trace", "--route", "my-provider", "--fragmentation", fragmentation, "body.ndjson")
    assert (result.code, result.out) == (0, expected)
    assert "Grüße aus Köln" in expected


def test_dash_reads_stdin(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(GREETING)))
    result = run("trace", "--route", "my-provider", "-")
    assert result.code == 0
    assert result.out.encode() == (project / "cassettes" / "my-provider" / "greeting.chunks.jsonl").read_bytes()


def test_a_body_cut_short_ends_with_the_raised_line_and_exit_1(project: Path) -> None:
    (project / "cut.ndjson").write_bytes(GREETING.split(b"\n")[0] + b"\n")
    result = run("trace", "--route", "my-provider", "cut.ndjson")
    assert result.code == 1
    assert result.out.splitlines() == [
        '{"type":"block-start","index":0,"blockType":"text"}',
        '{"type":"text-delta","index":0,"text":"Hello"}',
        '{"type":"raised","error":"StreamInterruptedError","message":"the stream ended without its done line (route=my-provider)"}',
    ]
    assert result.err == (
        "raised StreamInterruptedError: the stream ended without its done line (route=my-provider)\n"
        "2 chunks before the error; rules hold for them\n"
    )


def test_a_rule_violation_goes_to_stderr_and_exits_1(project: Path) -> None:
    (project / "bad_adapter.py").write_text(BAD_ADAPTER, encoding="utf-8")
    (project / "pyproject.toml").write_text('[tool.dsh_replay.routes]\nbad = "bad_adapter:BadAdapter"\n')
    (project / "body").write_bytes(b"anything")
    result = run("trace", "--route", "bad", "body")
    assert result.code == 1
    assert result.out.splitlines()[-1] == '{"type":"finish","reason":{"kind":"stop"}}'
    assert result.err.startswith("P10 at chunk 4: finish at position 4 has kind 'stop'")


def test_unknown_route_lists_the_known_ones(project: Path) -> None:
    (project / "body.ndjson").write_bytes(GREETING)
    result = run("trace", "--route", "my-provder", "body.ndjson")
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("dsh-replay: error: unknown route 'my-provder'. Did you mean 'my-provider'? Known routes: ")
    assert "anthropic" in result.err and "openai" in result.err


def test_missing_file_is_named(project: Path) -> None:
    result = run("trace", "--route", "my-provider", "absent.ndjson")
    assert result.code == 2
    assert result.err == "dsh-replay: error: absent.ndjson: cannot read (No such file or directory)\n"


def test_bad_fragmentation_is_a_usage_error_listing_the_valid_ones() -> None:
    result = run("trace", "--route", "openai", "--fragmentation", "halves", "x")
    assert result.code == 2
    assert "unknown fragmentation 'halves'; valid: recorded, single, bytes, random, random:SEED" in result.err


def test_stdout_bytes_are_exact_whatever_the_terminal_encoding(project: Path) -> None:
    (project / "body.ndjson").write_bytes(UMLAUTS)
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    done = subprocess.run([sys.executable, "-m", "dsh_replay", "trace", "--route", "my-provider", "-"],
                          input=UMLAUTS, capture_output=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (project / "cassettes" / "my-provider" / "umlauts.chunks.jsonl").read_bytes()
    assert done.stderr == b"ok: 6 chunks, 1 block(s); rules P1-P12 hold\n"


class _TerminalStdin(io.TextIOWrapper):
    def isatty(self) -> bool:
        return True


def test_stdin_from_a_terminal_says_how_to_end_the_body(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", _TerminalStdin(io.BytesIO(GREETING)))
    result = run("trace", "--route", "my-provider", "-")
    assert result.code == 0
    assert result.err.splitlines()[0] == "reading the body from stdin; end it with Ctrl-D"
