"""Real Anthropic, Gemini and Ollama traffic (../shared/real-traffic) through the adapters.

Each body is fed to its route's adapter offline with ``trace_body``. The
expectations below are hard-coded per file from ``MANIFEST.tsv`` (its
``expected_summary`` column: what the source project asserts, or what can be
read off the wire). Usage is compared as raw wire values, as the README asks:
where a source adds thought tokens to output or tool-use prompt tokens to
input, we compare the wire's own counts (noted per file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_replay import ReasoningBlock, Usage, check_chunk_sequence, collect
from dsh_replay.cassette.replay import trace_body

REAL_TRAFFIC = Path(__file__).resolve().parents[2].parent / "shared" / "real-traffic"
ROUTES = {"anthropic": "anthropic", "gemini": "gemini", "ollama": "ollama"}


@dataclass(frozen=True)
class Expect:
    """What the manifest says one file must give."""

    raw: str | None
    usage: Usage
    text: str | None = None  # exact answer text (all text blocks joined)
    text_prefix: str | None = None  # when the manifest quotes only the start
    tools: tuple[tuple[str, dict[str, Any]], ...] = ()
    reasoning: bool = False  # a reasoning block is expected
    signed: bool = False  # ... carrying a signature
    rules: tuple[str, ...] = ()  # rule ids the validator is expected to report
    extra: dict[str, Any] = field(default_factory=dict)


EXPECTED: dict[str, Expect] = {
    # src[anthropic-sdk-python EXPECTED_INCOMPLETE_MESSAGE]: text, make_file cut by max_tokens, in=450 out=124.
    # The tool JSON is cut with no content_block_stop: the block is closed at message_stop with the
    # partial arguments as sent (never repaired), so P7j reports it; raw=max_tokens says why.
    "anthropic__anthropic-sdk-python__max-tokens-partial-tool-json.sse": Expect(
        raw="max_tokens",
        usage=Usage(input_tokens=450, output_tokens=124, cached_input_tokens=0),
        text="I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file "
        "called taxes.txt. Let me do that for you now.",
        rules=("P7j",),
        extra={"partial_tool": ("make_file", '{"filename": "taxes.txt", "lines_of_text": [\n"# COMPREHENSIVE TAX GUIDE')},
    ),
    # src[pydantic-ai test_anthropic_mcp_servers_stream]: ThinkingPart, MCP call (server side: no block), TextPart;
    # in=3042 out=354; end_turn.
    "anthropic__pydantic-ai__mcp-tool-use.sse": Expect(
        raw="end_turn",
        usage=Usage(input_tokens=3042, output_tokens=354, cached_input_tokens=0),
        text_prefix="**Pydantic-AI** is a framework for building Generative AI applications",
        reasoning=True,
        signed=True,
    ),
    # src[pydantic-ai ..._redacted_stream]: 2 redacted thinking parts (no readable text: no block here) +
    # TextPart "I notice that you've sent what..."; in=92 out=189.
    "anthropic__pydantic-ai__redacted-thinking.sse": Expect(
        raw="end_turn",
        usage=Usage(input_tokens=92, output_tokens=189, cached_input_tokens=0),
        text_prefix="I notice that you've sent what",
    ),
    # src[pydantic-ai test_request_stream_fallback_for_high_max_tokens]: text="2"; in=20 out=5.
    "anthropic__pydantic-ai__text-minimal.sse": Expect(
        raw="end_turn", usage=Usage(input_tokens=20, output_tokens=5, cached_input_tokens=0), text="2",
    ),
    # derived: text="Let me search ... information.I fo"...; tool_search_tool_bm25 is a server tool (skipped),
    # get_exchange_rate({"from_currency": "USD", "to_currency": "EUR"}); tool_use; in=1591 out=175.
    "anthropic__pydantic-ai__text-server-tool-then-tool-use.sse": Expect(
        raw="tool_use",
        usage=Usage(input_tokens=1591, output_tokens=175, cached_input_tokens=0),
        text_prefix="Let me search for a tool that can provide current exchange rate information.I fo",
        tools=(("get_exchange_rate", {"from_currency": "USD", "to_currency": "EUR"}),),
    ),
    # src[pydantic-ai test_anthropic_model_thinking_part_stream]: ThinkingPart with signature + TextPart "Here are...";
    # in=43 out=282.
    "anthropic__pydantic-ai__thinking-signature.sse": Expect(
        raw="end_turn",
        usage=Usage(input_tokens=43, output_tokens=282, cached_input_tokens=0),
        text_prefix="Here are",
        reasoning=True,
        signed=True,
    ),
    # src[vercel-ai "ignores a duplicate message_start"]: derived text="Hello, World!"; end_turn; in=17 out=227.
    "anthropic__vercel-ai__duplicate-message-start.sse": Expect(
        raw="end_turn", usage=Usage(input_tokens=17, output_tokens=227), text="Hello, World!",
    ),
    # src[vercel-ai "should use input_tokens from message_delta"]: input 61 overrides 43; out=2; text="pong".
    "anthropic__vercel-ai__message-delta-input-tokens.sse": Expect(
        raw="end_turn", usage=Usage(input_tokens=61, output_tokens=2), text="pong",
    ),
    # src[vercel-ai "streamed classifier refusal"]: raw=refusal; no content; wire in=18 out=5.
    "anthropic__vercel-ai__refusal-stop-details.sse": Expect(
        raw="refusal", usage=Usage(input_tokens=18, output_tokens=5, cached_input_tokens=0), text="",
    ),
    # derived: text="Hello! I'm doing well, thank you for asking. How are you doing today? Is there a"...;
    # end_turn; in=12 out=30.
    "anthropic__vercel-ai__text-ping.sse": Expect(
        raw="end_turn",
        usage=Usage(input_tokens=12, output_tokens=30, cached_input_tokens=0),
        text_prefix="Hello! I'm doing well, thank you for asking. How are you doing today? Is there a",
    ),
    # src[vercel-ai "tools with empty parameters in streaming"]: text, updateIssueList({}); tool_use; in=565 out=48.
    "anthropic__vercel-ai__tool-no-args.sse": Expect(
        raw="tool_use",
        usage=Usage(input_tokens=565, output_tokens=48, cached_input_tokens=0),
        text="I'll update the issue list for you.",
        tools=(("updateIssueList", {}),),
    ),
    # src[pydantic-ai test_code_execution_stream]: code execution is server side (no block) + TextPart;
    # source usage in=507 (=147 + toolUse 360) out=276 (=108 + thoughts 168): raw wire 147 / 108 / thoughts 168.
    "gemini__pydantic-ai__code-execution.sse": Expect(
        raw="STOP",
        usage=Usage(input_tokens=147, output_tokens=108, reasoning_tokens=168),
        text="The result of $65465 - 6544 \\times 65464 - 6 + 1.02255$ is **-428,330,955.97745**.",
    ),
    # src[pydantic-ai test_google_model_iter_stream]: get_capital({"country": "France"}); STOP; in=52 out=5.
    "gemini__pydantic-ai__function-call.sse": Expect(
        raw="STOP",
        usage=Usage(input_tokens=52, output_tokens=5),
        text="",
        tools=(("get_capital", {"country": "France"}),),
    ),
    # src[pydantic-ai test_google_model_web_search_tool_stream]: TextPart "### Weather in San Francisco is Mild ...";
    # source in=119 (=17 + toolUse 102) out=653 (=241 + thoughts 412): raw wire 17 / 241 / thoughts 412.
    "gemini__pydantic-ai__grounding-web-search.sse": Expect(
        raw="STOP",
        usage=Usage(input_tokens=17, output_tokens=241, reasoning_tokens=412),
        text_prefix="### Weather in San Francisco is Mild and Partly Cloudy Today",
    ),
    # src[pydantic-ai test_google_model_stream]: text="The capital of France is Paris.\n"; in=13 out=8.
    "gemini__pydantic-ai__text.sse": Expect(
        raw="STOP", usage=Usage(input_tokens=13, output_tokens=8), text="The capital of France is Paris.\n",
    ),
    # src[pydantic-ai test_google_model_thinking_part_iter]: ThinkingPart + TextPart (signature on the text part,
    # which signs the reasoning block); source out=1256 (=469 + thoughts 787): raw wire 34 / 469 / 787.
    "gemini__pydantic-ai__thought-parts.sse": Expect(
        raw="STOP",
        usage=Usage(input_tokens=34, output_tokens=469, reasoning_tokens=787),
        text_prefix="This is a great question! Safely crossing the street is all about being aware and predictable.",
        reasoning=True,
        signed=True,
    ),
    # src[vercel-ai streaming-tool-call-arguments parallel]: getWeather Boston + San Francisco (Vertex partialArgs);
    # raw STOP; source out=155 (=23 + thoughts 132): raw wire 26 / 23 / 132.
    "gemini__vercel-ai__streamed-function-args-parallel.sse": Expect(
        raw="STOP",
        usage=Usage(input_tokens=26, output_tokens=23, reasoning_tokens=132),
        text="",
        tools=(("getWeather", {"location": "Boston"}), ("getWeather", {"location": "San Francisco"})),
    ),
    # src[vercel-ai "should stream reasoning and text parts"]: text exact; raw STOP; source out=285 (=29 + thoughts 256).
    # The trailing empty part's signature has no reasoning block to sign: dropped.
    "gemini__vercel-ai__text-trailing-signature-part.sse": Expect(
        raw="STOP",
        usage=Usage(input_tokens=9, output_tokens=29, reasoning_tokens=256),
        text='There are **3** "r"s in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.',
    ),
    # derived: /api/generate (``response`` lines); text starts "Rabbits are small ..."; stop; in=51 out=64.
    "ollama__ollama-bash-lib__generate-text.ndjson": Expect(
        raw="stop",
        usage=Usage(input_tokens=51, output_tokens=64),
        text_prefix="Rabbits are small to medium-sized mammals known for their fluffy tails and long ",
    ),
    # derived: get_weather({"city": "Tokyo"}); done_reason stop; in=169 out=15.
    "ollama__ollama-docs__chat-tool-call.ndjson": Expect(
        raw="stop", usage=Usage(input_tokens=169, output_tokens=15), text="", tools=(("get_weather", {"city": "Tokyo"}),),
    ),
    # derived: /api/generate; text="That's a fantastic question!"; stop; no counts on the wire (reported as 0).
    "ollama__ollama-docs__generate-text.ndjson": Expect(
        raw="stop", usage=Usage(input_tokens=0, output_tokens=0), text="That's a fantastic question!",
    ),
    # src[semantic-kernel]: "This is test completion response"; DoneReason=stop; wire in=10 out=239.
    "ollama__semantic-kernel__chat-text-excerpt.ndjson": Expect(
        raw="stop", usage=Usage(input_tokens=10, output_tokens=239), text="This is test completion response",
    ),
}


def _files() -> list[Path]:
    if not REAL_TRAFFIC.is_dir():
        return []
    return sorted(p for p in REAL_TRAFFIC.iterdir() if p.name.split("__")[0] in ROUTES)


FILES = _files()
needs_folder = pytest.mark.skipif(not FILES, reason=f"{REAL_TRAFFIC} is absent")


def _route(path: Path) -> str:
    return ROUTES[path.name.split("__")[0]]


@needs_folder
def test_every_file_of_these_providers_has_an_expectation() -> None:
    assert sorted(p.name for p in FILES) == sorted(EXPECTED)


@needs_folder
@pytest.mark.asyncio
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
async def test_real_body_gives_the_expected_turn(path: Path) -> None:
    expect = EXPECTED[path.name]
    outcome = await trace_body(path.read_bytes(), route=_route(path))
    assert outcome.raised is None, repr(outcome.raised)
    assert [v.rule for v in outcome.violations] == list(expect.rules), outcome.violations
    turn = collect(outcome.chunks)
    assert turn.finish_reason is not None
    assert turn.finish_reason.raw == expect.raw
    assert turn.finish_reason.kind == ("tool-calls" if turn.tool_calls else "stop")
    assert turn.usage == expect.usage
    if expect.text is not None:
        assert turn.text == expect.text
    if expect.text_prefix is not None:
        assert turn.text.startswith(expect.text_prefix)
    parsed = [(c.name, c.parsed) for c in turn.tool_calls if c.ok]
    assert parsed == list(expect.tools)
    reasoning = [b for b in turn.blocks if isinstance(b, ReasoningBlock)]
    assert bool(reasoning) == expect.reasoning
    if reasoning:
        assert all(b.signature for b in reasoning) == expect.signed
    if "partial_tool" in expect.extra:
        name, start = expect.extra["partial_tool"]
        broken = [c for c in turn.tool_calls if not c.ok]
        assert [c.name for c in broken] == [name] and broken[0].arguments.startswith(start)
        assert check_chunk_sequence(outcome.chunks, json_arguments=False) == []


@needs_folder
@pytest.mark.asyncio
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
async def test_one_byte_fragments_give_the_same_chunks(path: Path) -> None:
    whole = await trace_body(path.read_bytes(), route=_route(path))
    bytewise = await trace_body(path.read_bytes(), route=_route(path), fragmentation="bytes")
    assert bytewise.golden_bytes() == whole.golden_bytes()


@needs_folder
@pytest.mark.asyncio
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
async def test_drop_reasoning_leaves_a_valid_sequence(path: Path) -> None:
    outcome = await trace_body(path.read_bytes(), route=_route(path), drop_reasoning=True)
    assert outcome.raised is None
    assert [v.rule for v in outcome.violations] == list(EXPECTED[path.name].rules)
    assert collect(outcome.chunks).reasoning == ""
