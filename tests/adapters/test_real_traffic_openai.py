"""Real provider bodies (``shared/real-traffic``) through the OpenAI-family adapters.

Every recording of the ``openai-chat``, ``deepseek``, ``groq``, ``mistral``,
``other`` and ``openai-responses`` providers replays through ``trace_body``
with no rule violation, gives what ``MANIFEST.tsv`` says the source project
asserts (or what was read off the wire: its ``expected_summary`` column,
transcribed in ``EXPECTED`` below, raw wire token counts), and gives the same
chunks when the body arrives one byte at a time.
"""

# ruff: noqa: RUF001 - look-alike non-ASCII characters (multiplication sign, fullwidth
# punctuation, curly quotes) are the point of this test data

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_replay import InvalidRequestError, ProviderError, ReasoningBlock, Usage, chunk_to_json
from dsh_replay.cassette.replay import trace_body

from .test_openai_chat import turn

FOLDER = Path(__file__).resolve().parents[2].parent / "shared" / "real-traffic"
ROUTES = {
    "openai-chat": "openai",
    "deepseek": "deepseek",
    "groq": "openai-compatible",
    "mistral": "openai-compatible",
    "other": "openai-compatible",
    "openai-responses": "openai-responses",
}

pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason=f"real traffic not available at {FOLDER}")


@dataclass(frozen=True)
class Expect:
    """What MANIFEST.tsv states for one file (``text`` ending in ``…`` is a prefix)."""

    text: str = ""
    reasoning: str | None = None  # None: no reasoning expected; a prefix otherwise
    tools: list[tuple[str, Any]] = field(default_factory=list)
    raw: str | None = "stop"
    usage: tuple[int, int] | None = None
    reasoning_blocks: int | None = None
    raises: type[ProviderError] | None = None
    message: str = ""


EXPECTED: dict[str, Expect] = {
    # openai-chat
    "openai-chat__openai-python__text-usage.sse": Expect(
        "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I…", usage=(14, 30)),
    "openai-chat__openai-python__json-content.sse": Expect(
        '{"city":"San Francisco","temperature":61,"units":"f"}', usage=(79, 14)),
    # n=3: choice 0 is the one with temperature 65
    "openai-chat__openai-python__n3-multiple-choices.sse": Expect(
        '{"city":"San Francisco","temperature":65,"units":"f"}', usage=(79, 42)),
    "openai-chat__openai-python__length-max-tokens.sse": Expect('{"', raw="length", usage=(79, 1)),
    "openai-chat__openai-python__logprobs.sse": Expect("Foo!", usage=(9, 2)),
    "openai-chat__openai-python__single-tool-call.sse": Expect(
        tools=[("GetWeatherArgs", {"city": "Edinburgh", "country": "UK", "units": "c"})], raw="tool_calls", usage=(76, 24)),
    "openai-chat__pydantic-ai__parallel-empty-args.sse": Expect(
        tools=[("get_country", {}), ("get_product_name", {})], raw="tool_calls", usage=(364, 40)),
    "openai-chat__pydantic-ai__text.sse": Expect("The capital of Mexico is Mexico City.", usage=(14, 8)),
    "openai-chat__pydantic-ai__moderation-trailing-chunk.sse": Expect("Paris.", usage=(13, 11)),
    "openai-chat__pydantic-ai__tool-call-mini.sse": Expect(
        tools=[("get_capital", {"country": "UK"})], raw="tool_calls", usage=(53, 15)),
    "openai-chat__vercel-ai__text-long.sse": Expect(
        "**Holiday Name:** Harmony Day\n\n**Date:** Celebrated annually on the first Saturd…", usage=(16, 300)),
    # openai-responses (raw reason: the response status, or incomplete_details.reason)
    "openai-responses__pydantic-ai__function-call.sse": Expect(
        tools=[("get_capital", {"country": "France"})], raw="completed", usage=(255, 16)),
    "openai-responses__pydantic-ai__text.sse": Expect("The capital of France is Paris.", raw="completed", usage=(278, 9)),
    "openai-responses__pydantic-ai__reasoning-summary.sse": Expect(
        "I'm not a road safety professional, but here are some generally accepted guideli…", reasoning="",
        reasoning_blocks=4, raw="completed", usage=(13, 1680)),
    "openai-responses__pydantic-ai__tool-call-reasoning-tokens.sse": Expect(
        tools=[("final_result", {"result": 6666})], raw="completed", usage=(53, 469)),
    "openai-responses__pydantic-ai__phase-text-then-tool.sse": Expect(
        "I’ll check the capital lookup tool for “PotatoLand.”", tools=[("get_capital", {"country": "PotatoLand"})],
        raw="completed", usage=(63, 69)),
    "openai-responses__pydantic-ai__openrouter-no-event-lines.sse": Expect(
        "4", reasoning='The user asks: "What is 2+2?" They expect a straightforward answer: 4. Just answer 4.',
        raw="completed", usage=(78, 37)),
    "openai-responses__pydantic-ai__deepseek-reasoning-text.sse": Expect(
        "The capital of France is Paris.", reasoning="We need answer capital of France.", raw="completed", usage=(90, 15)),
    "openai-responses__pydantic-ai__deepseek-function-call.sse": Expect(
        tools=[("get_temperature", {"city": "Tokyo"})], reasoning="", raw="completed", usage=(366, 59)),
    "openai-responses__vercel-ai__azure-text.sse": Expect("Hello", raw="completed", usage=(11, 11)),
    # deepseek
    "deepseek__pydantic-ai__reasoning-content.sse": Expect(
        "Hello there! 😊 How can I help you today?", reasoning="", usage=(6, 212)),
    "deepseek__vercel-ai__reasoning.sse": Expect(
        'The word "strawberry" contains three "r"s.', reasoning="We need to count the number of the lette", usage=(18, 219)),
    "deepseek__vercel-ai__text-length-stop.sse": Expect(
        "## **Holiday Name:** Starlight Remembrance\n\n**Date:** The Saturday nearest the n…", raw="length", usage=(13, 400)),
    # mistral
    "mistral__vercel-ai__text.sse": Expect("Hello, world! This is a test response.", usage=(13, 8)),
    "mistral__vercel-ai__tool-call-one-chunk.sse": Expect(
        tools=[("weather", {"location": "San Francisco"})], raw="tool_calls", usage=(124, 22)),
    "mistral__vercel-ai__thinking-content-array.sse": Expect(
        "2 + 2 = 4", reasoning="The user is asking for 2+2. This is basi", usage=(10, 46)),
    # groq
    "groq__vercel-ai__reasoning-field.sse": Expect(
        'The word **"strawberry"** is spelled as **S-T-R-A-W-B-E-R-R-Y**. Breaking it dow…',
        reasoning="Okay, let me try to figure out how many ", usage=(17, 1107)),
    "groq__vercel-ai__text.sse": Expect(
        'Introducing "Luminaria" - a new holiday that celebrates the magic of light, comm…', usage=(45, 662)),
    # reasoning_format=raw: the <think> section is the model's text, kept as text (the adapter
    # does not parse tags); after it the answer starts with "To" as the manifest says
    "groq__pydantic-ai__think-tags-in-content.sse": Expect("<think>\n…", usage=(21, 988)),
    "groq__pydantic-ai__error-event-tool-use-failed.sse": Expect(
        raises=InvalidRequestError, message="Tool call validation failed: tool call validation failed: parameters for tool"),
    # other
    "other__pydantic-ai__openrouter-reasoning.sse": Expect(
        "2 + 2 = 4", reasoning="This is a simple arithmetic question. 2+2 equals 4.", usage=(43, 36)),
    "other__pydantic-ai__zai-reasoning.sse": Expect("4", reasoning="\n1.  **Analyze the User's Request:**", usage=(13, 564)),
    # Snowflake never sends finish_reason: finish at [DONE], raw None
    "other__pydantic-ai__snowflake-no-finish-reason.sse": Expect("4", raw=None, usage=(22, 5)),
    "other__vercel-ai__perplexity-citations.sse": Expect("The current population of **[2][3]", usage=(10, 336)),
}


def manifest() -> list[dict[str, str]]:
    with (FOLDER / "MANIFEST.tsv").open(encoding="utf-8", newline="") as handle:
        return [row for row in csv.DictReader(handle, delimiter="\t") if row["provider"] in ROUTES]


def files() -> list[str]:
    if not FOLDER.is_dir():
        return []
    return [row["file"] for row in manifest()]


def route_of(name: str) -> str:
    return ROUTES[name.split("__", 1)[0]]


def test_every_manifest_file_of_these_providers_has_an_expectation() -> None:
    assert sorted(files()) == sorted(EXPECTED)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", files())
async def test_real_body_replays_with_no_violation_and_the_manifest_result(name: str) -> None:
    expect = EXPECTED[name]
    outcome = await trace_body((FOLDER / name).read_bytes(), route=route_of(name))
    assert outcome.violations == []
    if expect.raises is not None:
        error = outcome.raised
        assert isinstance(error, expect.raises)
        assert error.message.startswith(expect.message)
        assert not any(chunk_to_json(c)["type"] == "finish" for c in outcome.chunks)
        return
    result = turn(outcome)
    if expect.text.endswith("…"):
        assert result.text.startswith(expect.text[:-1])
    else:
        assert result.text == expect.text
    if expect.reasoning is None:
        assert result.reasoning == ""
    else:
        assert result.reasoning.startswith(expect.reasoning) and result.reasoning
    if expect.reasoning_blocks is not None:
        assert sum(isinstance(b, ReasoningBlock) for b in result.blocks) == expect.reasoning_blocks
    assert [(call.name, call.parsed) for call in result.tool_calls] == expect.tools
    assert result.finish_reason is not None
    assert result.finish_reason.raw == expect.raw
    assert result.finish_reason.kind == ("tool-calls" if expect.tools else "stop")
    assert result.usage is not None and expect.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == expect.usage


@pytest.mark.asyncio
async def test_think_tags_stay_in_the_text_and_the_answer_follows() -> None:
    name = "groq__pydantic-ai__think-tags-in-content.sse"
    result = turn(await trace_body((FOLDER / name).read_bytes(), route=route_of(name)))
    thinking, _, answer = result.text.partition("</think>")
    assert thinking.startswith("<think>") and answer.strip().startswith("To")


@pytest.mark.asyncio
async def test_cache_and_reasoning_counts_come_from_the_wire() -> None:
    reasoning = await trace_body((FOLDER / "deepseek__vercel-ai__reasoning.sse").read_bytes(), route="deepseek")
    assert turn(reasoning).usage == Usage(input_tokens=18, output_tokens=219, cached_input_tokens=0, reasoning_tokens=205)
    cached = await trace_body(
        (FOLDER / "openai-responses__pydantic-ai__deepseek-function-call.sse").read_bytes(), route="openai-responses"
    )
    assert turn(cached).usage == Usage(input_tokens=366, output_tokens=59, cached_input_tokens=256, reasoning_tokens=14)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", files())
async def test_one_byte_fragments_give_the_same_chunks(name: str) -> None:
    body = (FOLDER / name).read_bytes()
    whole = await trace_body(body, route=route_of(name))
    bytewise = await trace_body(body, route=route_of(name), fragmentation="bytes")
    assert bytewise.chunks == whole.chunks
    assert repr(bytewise.raised) == repr(whole.raised)
    assert bytewise.golden_bytes() == whole.golden_bytes()
