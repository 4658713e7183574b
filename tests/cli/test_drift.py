"""``dsh-replay drift``: re-record against the (emulated) provider, compare shapes, leave the cassette alone."""

# ruff: noqa: RUF001 - the multiplication sign between a kind and its count is what the commands print

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_replay import use_cassette
from dsh_replay.adapters import OpenAIResponsesAdapter
from dsh_replay.cassette.replay import run_adapter
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from tests.cassette_cases.openai import WEATHER, ask
from tests.cassette_cases.openai_responses import ResponsesStream, usage

from .conftest import run

OPTIONS = ask("gpt-4.1-mini", "What's the weather in Paris?", tools=[WEATHER])
CALL = ("w1", "call_Dr1ftT3stW34th3rC4ll0001", "get_weather", '{"city"', ':"Paris"}')


def _body(*, text_after: bool = False, as_text: bool = False) -> bytes:
    s = ResponsesStream(1, OPTIONS)
    if as_text:
        s.message("t1", "I", " cannot", " check", " the", " weather", ".")
    else:
        s.function_call(*CALL)
    if text_after:
        s.message("t2", "Done", ".")
    return b"".join(s.end("response.completed", usage(40, 12)))


def _respond(body: bytes) -> ScriptedResponse:
    return ScriptedResponse.streaming(body, content_type="text/event-stream", delay=0.001)


@pytest.fixture
def emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderEmulator]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dr1ftK3yF0rT3sts00000000")
    with ProviderEmulator() as emu:
        yield emu


def _record(emulator: ProviderEmulator, path: Path) -> None:
    """Record the emulator's next answer into ``path`` (keeping its URL, as the fixture does)."""

    async def record() -> None:
        adapter = OpenAIResponsesAdapter(api_key="sk-test-dr1ftK3yF0rT3sts00000000", base_url=emulator.base_url + "/v1")
        async with use_cassette(path, "rewrite", route="openai-responses", options=OPTIONS) as session:
            session.cassette.metadata["base_url"] = adapter.base_url
            outcome = await run_adapter(adapter, OPTIONS)
        assert outcome.raised is None and outcome.violations == []
        path.with_name(path.stem + ".chunks.jsonl").write_bytes(outcome.golden_bytes())

    asyncio.run(record())


def _drift(emulator: ProviderEmulator, body: bytes) -> tuple[Path, int, list[str]]:
    """``cassettes/openai-responses/weather.yaml`` recorded from the emulator, which then answers ``body``."""
    # answered in order, the last one for good: the recording gets the old stream, drift the new
    emulator.add("POST", "/v1/responses", _respond(_body()), _respond(body))
    cassette = Path("cassettes") / "openai-responses" / "weather.yaml"
    _record(emulator, cassette)
    before = cassette.read_bytes()
    result = run("drift", str(cassette.parent), "--out", "fresh")
    assert cassette.read_bytes() == before  # the recorded cassette is never touched
    assert len(list(Path("fresh").glob("*.yaml"))) == 1  # the fresh stream is kept elsewhere
    assert len(emulator.requests) == 2  # the recording's request, then drift's
    return cassette, result.code, result.out.splitlines()


def test_an_unchanged_stream_reports_nothing(emulator: ProviderEmulator) -> None:
    cassette, code, lines = _drift(emulator, _body())
    assert code == 0
    assert lines[0].startswith(f"{cassette}: unchanged (fresh recording: fresh/")
    assert lines[1] == "1 cassette(s): 0 with a breaking change; fresh recordings in fresh"


def test_a_new_unmapped_event_kind_is_breaking(emulator: ProviderEmulator) -> None:
    extra = (b'event: response.output_item.added\ndata: {"type":"response.output_item.added","output_index":1,'
             b'"item":{"id":"ig_1","type":"image_generation_call","status":"in_progress"}}\n\n')
    body = _body().replace(b"event: response.completed", extra + b"event: response.completed")
    cassette, code, lines = _drift(emulator, body)
    assert code == 1
    assert lines[0].startswith(f"{cassette}: BREAKING")
    assert lines[1].startswith("  new kind: response.output_item.added:image_generation_call ×1 (first at body line")
    assert lines[1].endswith(", unmapped")
    assert not any("chunk shape changed" in line for line in lines)


def test_a_new_kind_ignored_on_purpose_is_reported_but_not_breaking(emulator: ProviderEmulator) -> None:
    # a message item whose text deltas are refusal.done events now: kinds appear, no chunk does
    cassette, code, lines = _drift(emulator, _body(text_after=True).replace(b"output_text.delta", b"refusal.done"))
    assert (code, lines[0].split(" (")[0]) == (0, f"{cassette}: drifted")
    kinds = [line for line in lines if "new kind" in line]
    assert any("response.output_item.added:message" in line and line.endswith(", mapped") for line in kinds)
    assert any("response.content_part.added" in line and line.endswith(", ignored") for line in kinds)


def test_a_renamed_field_is_reported_per_kind_and_what_it_did_to_the_chunks(
        emulator: ProviderEmulator) -> None:
    # the arguments deltas now say "seq" and "text" for "sequence_number" and "delta"
    body = _body().replace(b'"type":"response.function_call_arguments.delta","sequence_number"',
                           b'"type":"response.function_call_arguments.delta","seq"')
    body = body.replace(b'"output_index":0,"delta":', b'"output_index":0,"text":')
    cassette, code, lines = _drift(emulator, body)
    fields = [line.strip() for line in lines if "field in response.function_call_arguments.delta" in line]
    assert "new field in response.function_call_arguments.delta: seq, text" in fields
    assert "removed field in response.function_call_arguments.delta: delta, sequence_number" in fields
    # the deltas now give nothing, but function_call_arguments.done still brings the whole
    # arguments: the chunks keep their shape, so this drift is reported, not breaking
    assert code == 0
    assert lines[0].startswith(f"{cassette}: drifted")


def test_a_tool_call_that_became_text_changes_the_chunk_shape(emulator: ProviderEmulator) -> None:
    _, code, lines = _drift(emulator, _body(as_text=True))
    assert code == 1
    assert "  vanished kind: response.function_call_arguments.delta" in lines
    assert ("  chunk shape changed: tool-call get_weather; finish tool-calls; usage inputTokens, outputTokens, "
            "cachedInputTokens, reasoningTokens -> text; finish stop; usage inputTokens, outputTokens, "
            "cachedInputTokens, reasoningTokens") in lines


def test_drift_is_refused_under_ci(emulator: ProviderEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    emulator.add("POST", "/v1/responses", _respond(_body()))
    cassette = Path("cassettes") / "weather.yaml"
    _record(emulator, cassette)
    monkeypatch.setenv("CI", "true")
    result = run("drift", str(cassette))
    assert result.code == 2
    assert "drift is refused because CI is set" in result.err
    assert len(emulator.requests) == 1  # only the recording's request ever reached it


def _recorded(emulator: ProviderEmulator, *then: ScriptedResponse) -> Path:
    """``cassettes/openai-responses/weather.yaml`` recorded from the emulator, which then answers ``then``."""
    emulator.add("POST", "/v1/responses", _respond(_body()), *then)
    cassette = Path("cassettes") / "openai-responses" / "weather.yaml"
    _record(emulator, cassette)
    return cassette


def _assert_not_checked(cassette: Path, code: int, out: str, why: str) -> None:
    """Exit 2 (could not check), one line saying why, no drift reported, no recording named."""
    lines = out.splitlines()
    assert code == 2, out
    assert lines[0].startswith(f"{cassette}: not checked: {why}"), lines
    assert lines[1] == "1 cassette(s): 0 with a breaking change, 1 not checked"
    assert len(lines) == 2
    assert not any(word in out for word in ("BREAKING", "vanished kind", "chunk shape", "fresh recording"))


def test_an_unreachable_provider_is_not_checked_rather_than_breaking(emulator: ProviderEmulator) -> None:
    cassette = _recorded(emulator)
    with ProviderEmulator() as gone:
        closed = gone.base_url  # a port nobody listens on once this emulator has stopped
    result = run("drift", str(cassette), "--out", "fresh", "--base-url", closed + "/v1")
    _assert_not_checked(cassette, result.code, result.out,
                        f"{closed}/v1 could not be reached (route 'openai-responses'), so no stream was compared: "
                        f"ProviderError: could not connect to {closed}")
    assert not Path("fresh").exists()


@pytest.mark.parametrize("status", [401, 404])
def test_an_error_status_before_any_stream_is_not_checked(emulator: ProviderEmulator, status: int) -> None:
    cassette = _recorded(emulator, ScriptedResponse.json({"error": {"message": "no"}}, status=status))
    result = run("drift", str(cassette), "--out", "fresh")
    _assert_not_checked(cassette, result.code, result.out,
                        f"{emulator.base_url}/v1 answered status {status} (route 'openai-responses')")


def test_a_missing_key_is_not_checked(emulator: ProviderEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    cassette = _recorded(emulator)
    monkeypatch.delenv("OPENAI_API_KEY")
    result = run("drift", str(cassette), "--out", "fresh")
    _assert_not_checked(cassette, result.code, result.out, "configuration error: route 'openai-responses' needs "
                        "its key in the environment variable OPENAI_API_KEY")
    assert len(emulator.requests) == 1  # only the recording's


def test_a_stream_that_broke_after_its_start_is_still_compared(emulator: ProviderEmulator) -> None:
    # a 200 whose body ends before the terminal event: the provider was heard, and its stream changed
    cassette, code, lines = _drift(emulator, _body().split(b"event: response.completed")[0])
    assert code == 1
    assert lines[0].startswith(f"{cassette}: BREAKING (fresh recording: fresh/")
    assert any("raised StreamInterruptedError" in line for line in lines)
