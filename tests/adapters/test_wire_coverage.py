"""Wire coverage of the shipped adapters: every kind a provider sends is mapped or ignored on purpose.

- each shipped translator declares its kinds (mapped, ignored with a one-line reason);
- no bundled cassette and no body of ``shared/real-traffic`` carries an unmapped kind;
- a kind nobody declared is reported unmapped, with its count and first body line, on
  every wire: a typed SSE wire (a new event type), a shape-based one (a new part or field);
- counting changes nothing in the chunks.
"""

# ruff: noqa: RUF001 - the multiplication sign between a kind and its count is what the commands print

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dsh_replay.adapters import BUILTIN_ROUTES, adapter_class
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.replay import replay_case, trace_body
from dsh_replay.wire.coverage import WireCoverage, collect_coverage

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = ROOT / "cassettes"
REAL = ROOT.parent / "shared" / "real-traffic"
REAL_ROUTES = {"openai-chat": "openai", "deepseek": "deepseek", "groq": "openai-compatible",
               "mistral": "openai-compatible", "other": "openai-compatible", "openai-responses": "openai-responses",
               "anthropic": "anthropic", "gemini": "gemini", "ollama": "ollama"}
ROUTES = RouteTable.load()


def _trace(body: bytes, route: str, **kwargs: Any) -> tuple[Any, WireCoverage]:
    with collect_coverage(**kwargs) as seen:
        outcome = asyncio.run(trace_body(body, route=route))
    (stream,) = seen.streams
    return outcome, stream


def _sse(*payloads: dict[str, Any], named: bool = True) -> bytes:
    return b"".join((f"event: {p['type']}\n" if named and "type" in p else "").encode()
                    + f"data: {json.dumps(p)}\n\n".encode() for p in payloads)


@pytest.mark.parametrize("route", sorted(BUILTIN_ROUTES))
def test_every_shipped_translator_declares_its_kinds(route: str) -> None:
    translator = adapter_class(route).translator_class
    assert translator.mapped_kinds, route
    assert not translator.mapped_kinds & set(translator.ignored_kinds)
    for kind, reason in translator.ignored_kinds.items():
        assert reason and "\n" not in reason and len(reason) < 120, (kind, reason)


@pytest.mark.parametrize("path", sorted(CASSETTES.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_bundled_cassette_carries_an_unmapped_kind(path: Path) -> None:
    with collect_coverage(detail=True) as seen:
        result = asyncio.run(replay_case(path, ROUTES))
    assert result.ok, result.problem
    assert [line for stream in seen.streams for line in stream.unmapped_lines()] == []
    assert all(stream.declared for stream in seen.streams)


def _real_files() -> list[Path]:
    if not REAL.is_dir():
        return []
    return sorted(p for p in REAL.iterdir() if p.name.split("__")[0] in REAL_ROUTES)


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real traffic not available at {REAL}")
@pytest.mark.parametrize("path", _real_files(), ids=lambda p: p.name)
def test_no_real_traffic_body_carries_an_unmapped_kind(path: Path) -> None:
    _, stream = _trace(path.read_bytes(), REAL_ROUTES[path.name.split("__")[0]], detail=True)
    assert stream.unmapped_lines() == []
    assert stream.events > 0


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real traffic not available at {REAL}")
def test_real_traffic_kinds_that_are_skipped_on_purpose_say_why() -> None:
    """A few of the kinds found in real traffic that no translator turns into chunks, and why."""
    found = {}
    for name, route in [("groq__pydantic-ai__error-event-tool-use-failed.sse", "openai-compatible"),
                        ("anthropic__pydantic-ai__mcp-tool-use.sse", "anthropic"),
                        ("gemini__pydantic-ai__code-execution.sse", "gemini"),
                        ("openai-responses__pydantic-ai__openrouter-no-event-lines.sse", "openai-responses")]:
        _, stream = _trace((REAL / name).read_bytes(), route, detail=True)
        found.update({k.kind: (k.status, k.count, k.first_line) for k in stream.kinds if k.status == "ignored"})
    assert found["delta.channel"] == ("ignored", 93, 3)
    assert found["content_block_start:mcp_tool_use"][0] == "ignored"
    assert found["part.executableCode"][0] == "ignored"
    assert found["(sse comment)"][0] == "ignored"  # OpenRouter's ": OPENROUTER PROCESSING"
    assert found["(after the terminal event)"][0] == "ignored"  # its [DONE] after response.completed


RESPONSES_TEXT = [
    {"type": "response.created", "response": {"status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0, "item": {"id": "msg_1", "type": "message"}},
    {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hi"},
]
COMPLETED = {"type": "response.completed", "response": {"status": "completed", "usage": {"input_tokens": 1}}}


def test_the_issue_custom_tool_call_under_an_unknown_name_is_reported_unmapped_with_count_and_line() -> None:
    # what the adapter did before it knew custom tools: usage + finish(stop), and "ok" — now named
    deltas = [{"type": "response.custom_tool_call_input.deltax", "item_id": "ctc_1", "output_index": 1, "delta": "x"}
              for _ in range(47)]
    body = _sse(*RESPONSES_TEXT, *deltas, COMPLETED)
    outcome, stream = _trace(body, "openai-responses")
    assert outcome.violations == [] and outcome.raised is None
    assert stream.unmapped_lines() == ["unmapped: response.custom_tool_call_input.deltax ×47 (first at body line 10)"]
    assert body.split(b"\n")[9].startswith(b"event: response.custom_tool_call_input.deltax")


@pytest.mark.parametrize(
    ("route", "body", "unmapped"),
    [
        ("openai-responses",
         _sse(*RESPONSES_TEXT, {"type": "response.output_item.added", "output_index": 1,
                                "item": {"id": "ic_1", "type": "image_generation_call"}}, COMPLETED, named=False),
         "response.output_item.added:image_generation_call"),
        ("anthropic",
         _sse({"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
              {"type": "message_stop"}),
         "content_block_start:compaction"),
        ("openai",
         b'data: {"choices":[{"index":0,"delta":{"audio":{"id":"a1","data":"UklGR"}}}]}\n\n'
         b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,'
         b'"completion_tokens":1}}\n\ndata: [DONE]\n\n',
         "delta.audio"),
        ("gemini",
         b'data: {"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBO"}}]},'
         b'"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}}\r\n\r\n',
         "part.inlineData"),
        ("ollama",
         b'{"message":{"role":"assistant","content":"","images":["iVBO"]},"done":false}\n'
         b'{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}\n',
         "message.images"),
    ],
    ids=["responses-new-item", "anthropic-new-block", "chat-new-delta-field", "gemini-new-part", "ollama-new-field"],
)
def test_a_kind_nobody_declared_is_unmapped_on_every_wire(route: str, body: bytes, unmapped: str) -> None:
    outcome, stream = _trace(body, route)
    assert outcome.raised is None and outcome.violations == []  # the stream looks fine...
    assert [k.kind for k in stream.unmapped] == [unmapped]  # ...and coverage says what it lost
    assert stream.status == "unmapped"
    (kind,) = stream.unmapped
    assert kind.first_line is not None
    # the event's block starts on that line (an "event:" line, then its data)
    block = b"\n".join(body.splitlines()[kind.first_line - 1 : kind.first_line + 1])
    assert unmapped.rpartition(":")[2].rpartition(".")[2].encode() in block


@pytest.mark.parametrize("path", sorted(CASSETTES.glob("*/*.yaml"))[::7], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_collecting_coverage_changes_no_chunk(path: Path) -> None:
    plain = asyncio.run(replay_case(path, ROUTES, fragmentation="bytes"))
    with collect_coverage(fields=True):
        covered = asyncio.run(replay_case(path, ROUTES, fragmentation="bytes"))
    assert [o.golden_bytes() for o in covered.outcomes] == [o.golden_bytes() for o in plain.outcomes]


def test_deep_coverage_names_the_fields_a_mapped_event_carried_that_the_translator_never_read() -> None:
    body = _sse({"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                 "usage": {"output_tokens": 1, "server_tool_use": {"web_search_requests": 1}}},
                {"type": "message_stop"})
    _, stream = _trace(body, "anthropic", fields=True)
    message_delta = stream.get("message_delta")
    assert message_delta is not None and message_delta.status == "mapped"
    assert "usage.server_tool_use" in message_delta.unread
    assert "usage.output_tokens" not in message_delta.unread
    assert "usage.server_tool_use.web_search_requests" in message_delta.fields
