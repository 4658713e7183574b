"""``dsh-replay golden check``: an adapter's chunks from any language, held to a golden as pytest holds them."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import orjson
import pytest

from .conftest import ROOT, run

GOLDEN = ROOT / "cassettes" / "openai" / "text.chunks.jsonl"
RATE_LIMITED = ROOT / "cassettes" / "openai" / "rate-limited.chunks.jsonl"


def reordered(data: bytes) -> bytes:
    """The same chunks with their keys in another order and spaces after the separators, as another
    language's JSON writer may print them."""
    lines = []
    for line in data.decode().splitlines():
        value = orjson.loads(line)
        lines.append("{" + ", ".join(f"{orjson.dumps(k).decode()}: {orjson.dumps(value[k]).decode()}"
                                     for k in reversed(list(value))) + "}")
    return ("\n".join(lines) + "\n").encode()


def test_the_same_chunks_match_whatever_the_key_order_and_spacing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(reordered(GOLDEN.read_bytes()))
    result = run("golden", "check", str(out), "--golden", str(GOLDEN))
    assert (result.code, result.out) == (0, f"{GOLDEN}: matched (13 chunks)\n")


def test_other_chunks_fail_with_pytest_s_diff_and_the_command_that_accepts_them(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(GOLDEN.read_bytes().replace(b'"text":"?"', b'"text":"!"').replace(b"today?", b"today!"))
    result = run("golden", "check", str(out), "--golden", str(GOLDEN))
    assert result.code == 1
    assert result.out.startswith(f"golden {GOLDEN} differs from the adapter's chunks; first difference at chunk 9 "
                                 "(line 10)")
    assert '\n- {"type":"text-delta","index":0,"text":"?"}\n' in result.out
    assert '\n+ {"type":"text-delta","index":0,"text":"!"}\n' in result.out
    assert result.out.rstrip().endswith(f"accept them with: dsh-replay golden check {out} --golden {GOLDEN} --update")


def test_a_raised_line_is_compared_with_its_message(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(RATE_LIMITED.read_bytes().replace(b"Please try again in 20s.", b"Try later."))
    result = run("golden", "check", str(out), "--golden", str(RATE_LIMITED))
    assert result.code == 1 and '+ {"type":"raised","error":"RateLimitError","message":"Rate limit' in result.out


def test_the_rules_come_first_and_a_broken_output_is_never_written(tmp_path: Path) -> None:
    out, golden = tmp_path / "out.jsonl", tmp_path / "new.chunks.jsonl"
    out.write_bytes(b"\n".join(GOLDEN.read_bytes().splitlines()[:-1]) + b"\n")  # no finish
    result = run("golden", "check", str(out), "--golden", str(golden), "--update")
    assert result.code == 1 and result.out.startswith(f"{out}:12: P11 ")
    assert result.out.endswith("rule violation(s); the golden was not compared nor written\n")
    assert not golden.exists()


def test_update_writes_a_missing_golden_then_a_changed_one_and_ci_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    out, golden = tmp_path / "out.jsonl", tmp_path / "g" / "text.chunks.jsonl"
    out.write_bytes(reordered(GOLDEN.read_bytes()))
    missing = run("golden", "check", str(out), "--golden", str(golden))
    assert missing.code == 1 and f"golden {golden} is missing; write it with dsh-replay golden check" in missing.out
    assert run("golden", "check", str(out), "--golden", str(golden), "--update").out == f"{golden}: written (13 chunks)\n"
    assert golden.read_bytes() == GOLDEN.read_bytes()  # canonical: what pytest writes
    out.write_bytes(RATE_LIMITED.read_bytes())
    assert run("golden", "check", str(out), "--golden", str(golden), "--update").out == \
        f"{golden}: updated (0 chunks, raised RateLimitError)\n"
    monkeypatch.setenv("CI", "1")
    refused = run("golden", "check", str(out), "--golden", str(golden), "--update")
    assert refused.code == 2 and "refused because CI is set" in refused.err


def test_a_golden_that_would_hold_a_credential_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    out, golden = tmp_path / "out.jsonl", tmp_path / "leak.chunks.jsonl"
    out.write_text('{"type":"raised","error":"AuthenticationError","message":"bad key sk-proj-'
                   'abcdefghijklmnopqrstuvwxyz0123456789ABCD"}\n')
    result = run("golden", "check", str(out), "--golden", str(golden), "--update")
    assert result.code == 1 and "was not written: it would hold" in result.out and not golden.exists()


def test_chunks_can_come_on_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(GOLDEN.read_bytes())))
    assert run("golden", "check", "-", "--golden", str(GOLDEN)).out == f"{GOLDEN}: matched (13 chunks)\n"
