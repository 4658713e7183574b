"""``dsh-replay trace``: what the provider sent and the adapter did nothing with is named on stderr."""

# ruff: noqa: RUF001 - the multiplication sign between a kind and its count is what the commands print

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run

CUSTOM = Path(__file__).resolve().parents[2] / "cassettes" / "openai-responses" / "custom-tool-call.yaml"


def _events(*payloads: dict[str, object]) -> bytes:
    return b"".join(f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads)


BODY = _events(
    {"type": "response.created", "response": {"status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0,
     "item": {"id": "ctc_1", "type": "custom_tool_callz", "call_id": "call_1", "name": "apply_patch", "input": ""}},
    *({"type": "response.custom_tool_callz_input.delta", "item_id": "ctc_1", "output_index": 0, "delta": "+x"}
      for _ in range(47)),
    {"type": "response.completed",
     "response": {"status": "completed", "id": "resp_1",
                  "usage": {"input_tokens": 5, "output_tokens": 9, "server_tool_use": {"web": 1}}}},
)


@pytest.fixture
def body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "body.sse").write_bytes(BODY)
    return tmp_path / "body.sse"


def test_unmapped_kinds_are_named_on_stderr_with_count_and_first_line(body: Path) -> None:
    result = run("trace", "--route", "openai-responses", str(body))
    # the stream is valid: the loss is only visible as unmapped kinds
    assert result.code == 0
    assert result.out.splitlines()[-1] == '{"type":"finish","reason":{"kind":"stop","raw":"completed"}}'
    assert result.err.splitlines() == [
        "ok: 2 chunks, 0 block(s); rules P1-P12 hold",
        "unmapped: response.output_item.added:custom_tool_callz ×1 (first at body line 4)",
        "unmapped: response.custom_tool_callz_input.delta ×47 (first at body line 7)",
    ]


def test_a_fully_covered_body_prints_no_unmapped_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    from dsh_replay.cassette.store import Cassette

    (interaction,) = Cassette.load(CUSTOM).interactions
    (tmp_path / "custom.sse").write_bytes(interaction.body)
    result = run("trace", "--route", "openai-responses", "custom.sse")
    assert result.code == 0
    assert result.err == "ok: 53 chunks, 1 block(s); rules P1-P12 hold\n"  # open, 47 pieces, close
    assert '"name":"apply_patch"' in result.out


def test_coverage_lists_every_kind_and_the_fields_mapped_events_carry_unread(body: Path) -> None:
    result = run("trace", "--route", "openai-responses", "--coverage", str(body))
    lines = result.err.splitlines()
    assert lines[:3] == [
        "ok: 2 chunks, 0 block(s); rules P1-P12 hold",
        "unmapped: response.output_item.added:custom_tool_callz ×1 (first at body line 4)",
        "unmapped: response.custom_tool_callz_input.delta ×47 (first at body line 7)",
    ]
    assert lines[3] == "coverage: 4 kind(s) in 50 event(s), unmapped"
    table = {line.split()[1]: line.split() for line in lines[4:8]}
    assert table["response.created"][0] == "ignored" and "line" in table["response.created"]
    assert table["response.custom_tool_callz_input.delta"][:3] == ["unmapped", "response.custom_tool_callz_input.delta",
                                                                  "×47"]
    assert table["response.completed"][0] == "mapped"
    # inside the mapped terminal event: what the translator never looked at
    assert lines[8] == "fields never read (inside mapped events):"
    unread = " ".join(lines[9:])
    assert "response.usage.server_tool_use" in unread and "response.id" in unread
    assert "response.usage.input_tokens" not in unread
    # stdout stays exactly the golden
    assert result.out == run("trace", "--route", "openai-responses", str(body)).out
