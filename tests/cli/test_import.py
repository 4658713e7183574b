"""``dsh-replay import`` on real third-party cassettes (``tests/import_cases``, see SOURCES.md there).

Each test imports copies of the cassettes into a fresh folder and runs the
command line the way a user does: import, then ``check`` on what it wrote.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsh_replay import collect, load_jsonl
from dsh_replay.cassette.store import Cassette

from .conftest import Result, file_digests, run

CASES = Path(__file__).resolve().parents[1] / "import_cases"

#: real cassette (under import_cases) -> (route, calls), and what its golden holds
IMPORTABLE = {
    "pydantic-ai/test_dbos/test_dbos_agent_run_stream.yaml": ("openai", 1),
    "pydantic-ai/test_openai/test_run_stream_sync_streams_real_model.yaml": ("openai", 2),
    "pydantic-ai/test_google/test_google_model_stream.yaml": ("gemini", 1),
    "pydantic-ai/test_google/test_google_model_iter_stream.yaml": ("gemini", 3),
    "llm-anthropic/test_anthropic/test_prompt.yaml": ("anthropic", 1),
    "llm-anthropic/test_anthropic/test_async_prompt.yaml": ("anthropic", 2),
    "llm-anthropic/test_anthropic/test_thinking_prompt.yaml": ("anthropic", 1),
    # the Anthropic SDK's beta client: ?beta=true, and the prompt as a list of one text block
    "pydantic-ai/test_anthropic/test_request_stream_fallback_for_high_max_tokens.yaml": ("anthropic", 1),
    # Azure OpenAI: a deployment URL with ?api-version=
    "openllmetry/test_azure/test_chat_streaming.yaml": ("openai", 4),
}
AZURE = "openllmetry/test_azure/test_chat_streaming.yaml"
BETA = "pydantic-ai/test_anthropic/test_request_stream_fallback_for_high_max_tokens.yaml"


def output_of(out: Path, name: str) -> Path:
    return out / IMPORTABLE[name][0] / name


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project folder (the cwd) holding a copy of the importable real cassettes under ``in/``."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(CASES, tmp_path / "in", ignore=shutil.ignore_patterns("not-importable", "*.md", "*.txt"))
    yield tmp_path


@pytest.fixture
def imported(work: Path) -> tuple[Result, dict[str, str]]:
    """``import in --out out`` run once; the result, and the inputs' hashes taken before it."""
    before = file_digests(work / "in")
    return run("import", "in", "--out", "out"), before


def test_real_cassettes_of_three_providers_import_into_cases_check_replays(
        work: Path, imported: tuple[Result, dict[str, str]]) -> None:
    result, before = imported
    assert result.code == 0, result.out
    assert result.out.endswith("9 file(s) read: 9 case(s) written from 16 streamed interaction(s); "
                               "0 could not be imported; 0 skipped\n")
    for name, (route, calls) in IMPORTABLE.items():
        cassette = output_of(work / "out", name)
        assert f"imported in/{name} -> out/{route}/{name} (route {route}, {calls} call" in result.out
        metadata = Cassette.load(cassette).metadata
        assert (metadata["route"], metadata["fragments"]) == (route, "inferred")
        assert len(metadata.get("follow_ups", [])) == calls - 1
        goldens = sorted(p.name for p in cassette.parent.glob(f"{cassette.stem}.*chunks.jsonl"))
        assert len(goldens) == calls
    assert {p.parent.parent.parent.name for p in (work / "out").rglob("*.yaml")} == {"openai", "gemini", "anthropic"}
    checked = run("check", "out")
    assert checked.code == 0, checked.out
    assert "9 case(s)" in checked.out and "9 passed, 0 failed" in checked.out
    # the originals were only read
    assert file_digests(work / "in") == before


def test_goldens_hold_what_the_providers_said_and_are_the_same_cut_into_bytes(
        work: Path, imported: tuple[Result, dict[str, str]]) -> None:
    out = work / "out"
    text = collect(load_jsonl(output_of(out, "pydantic-ai/test_google/test_google_model_stream.yaml")
                              .with_suffix(".chunks.jsonl")))
    assert text.text == "The capital of France is Paris.\n"
    assert (text.usage.input_tokens, text.usage.output_tokens) == (13, 8)  # type: ignore[union-attr]
    tool = collect(load_jsonl(output_of(out, "pydantic-ai/test_openai/test_run_stream_sync_streams_real_model.yaml")
                              .with_suffix(".chunks.jsonl")))
    assert [(c.name, c.parsed) for c in tool.tool_calls] == [("get_capital", {"country": "UK"})]
    thinking = collect(load_jsonl(output_of(out, "llm-anthropic/test_anthropic/test_thinking_prompt.yaml")
                                  .with_suffix(".chunks.jsonl")))
    assert thinking.reasoning.startswith("The person is asking for two names") and thinking.text
    one_byte_at_a_time = run("check", "out", "--fragmentation", "bytes")
    assert one_byte_at_a_time.code == 0, one_byte_at_a_time.out
    assert "9 passed, 0 failed" in one_byte_at_a_time.out


def test_fields_the_options_do_not_hold_are_named_in_the_report(imported: tuple[Result, dict[str, str]]) -> None:
    result, _ = imported
    lines = result.out.splitlines()
    assert ("cassette in/llm-anthropic/test_anthropic/test_thinking_prompt.yaml interaction 0: "
            "request field 'thinking' is kept as an extra parameter") in lines
    assert ("cassette in/pydantic-ai/test_google/test_google_model_stream.yaml interaction 0: "
            "request field 'systemInstruction.role' is kept as an extra parameter") in lines
    assert ("cassette in/pydantic-ai/test_openai/test_run_stream_sync_streams_real_model.yaml interaction 1: "
            "request field 'tool_choice' is kept as an extra parameter") in lines


@pytest.mark.parametrize(("name", "field"), [
    ("pydantic-ai/test_dbos/test_dbos_agent_run_stream.yaml", "messages[0].content"),
    ("pydantic-ai/test_google/test_google_model_stream.yaml", "contents[0].parts[0].text"),
    ("llm-anthropic/test_anthropic/test_prompt.yaml", "messages[0].content"),
    (AZURE, "messages[0].content"),
    (BETA, "messages[0].content"),
])
def test_a_changed_prompt_in_the_options_fails_the_replay_with_a_request_mismatch(
        work: Path, imported: tuple[Result, dict[str, str]], name: str, field: str) -> None:
    cassette = Cassette.load(output_of(work / "out", name))
    prompt = cassette.metadata["options"]["messages"][-1]
    prompt["content"] += " Answer in French."
    cassette.save()
    result = run("check", "out")
    assert result.code == 1
    assert "8 passed, 1 failed" in result.out
    assert "no recorded interaction matches POST" in result.out
    assert f"changed JSON fields: {field}" in result.out


def test_an_interaction_that_cannot_be_imported_is_listed_with_its_reason_and_fails(
        work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run("import", str(CASES / "not-importable"), "--out", "out")
    assert result.code == 1
    # the Azure AI Inference SDK names no model in its body (the deployment in the URL does)
    azure = next(line for line in result.out.splitlines() if "test_azure_streaming_completion" in line)
    assert ("interaction 0: not importable: POST https://fake-azure-endpoint.openai.azure.com/openai/deployments/"
            "gpt-4o-mini/chat/completions?api-version=2024-12-01-preview: request field 'model' cannot be mapped: "
            "the recorded request names no model") in azure
    # llm-gemini calls streamGenerateContent without alt=sse: a JSON array, not an SSE stream
    assert ("llm-gemini/test_gemini/test_prompt.yaml interaction 0: skipped: not streamed (application/json "
            "response to POST https://generativelanguage.googleapis.com/v1beta/models/gemini-flash-latest"
            ":streamGenerateContent)") in result.out
    assert result.out.endswith("0 case(s) written from 0 streamed interaction(s); 1 could not be imported; "
                               "1 skipped\n")
    assert not (work / "out").exists() or not list((work / "out").rglob("*.yaml"))


def real_interactions(name: str) -> list[dict[str, Any]]:
    data = yaml.safe_load((CASES / name).read_text(encoding="utf-8"))
    return list(data["interactions"])


def write_cassette(path: Path, interactions: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}), encoding="utf-8")
    return path


TOKEN_FETCH = {
    "request": {"method": "POST", "uri": "https://oauth2.googleapis.com/token", "body": "grant_type=refresh",
                "headers": {"content-type": ["application/x-www-form-urlencoded"]}},
    "response": {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["application/json"]},
                 "body": {"string": '{"expires_in": 3599}'}},
}


#: an MCP server's tool call, streamed as SSE too: no LLM call
MCP_CALL = {
    "request": {"method": "POST", "uri": "https://mcp.example.com/mcp", "headers": {},
                "body": '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'},
    "response": {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["text/event-stream"]},
                 "body": {"string": 'event: message\ndata: {"jsonrpc": "2.0", "id": 1, "result": {}}\n\n'}},
}


def test_a_token_fetch_and_an_mcp_stream_beside_the_llm_call_are_skipped_not_failed(work: Path) -> None:
    name = "pydantic-ai/test_google/test_google_model_stream.yaml"
    write_cassette(work / "mixed" / "with_token.yaml", [TOKEN_FETCH, MCP_CALL, *real_interactions(name)])
    result = run("import", "mixed", "--out", "out")
    assert result.code == 0, result.out
    assert ("cassette mixed/with_token.yaml interaction 0: skipped: not streamed (application/json response "
            "to POST https://oauth2.googleapis.com/token)") in result.out
    assert ("cassette mixed/with_token.yaml interaction 1: skipped: POST https://mcp.example.com/mcp: a streamed "
            "response, but no LLM call") in result.out
    assert Cassette.load(work / "out" / "gemini" / "with_token.yaml").metadata["imported_from"]["interactions"] == [2]
    assert run("check", "out").code == 0


def test_a_host_of_no_known_route_needs_route_and_then_imports(work: Path) -> None:
    [interaction] = real_interactions("pydantic-ai/test_dbos/test_dbos_agent_run_stream.yaml")
    interaction["request"]["uri"] = "http://127.0.0.1:8000/v1/chat/completions"  # a local vLLM, say
    write_cassette(work / "local" / "vllm.yaml", [interaction])
    refused = run("import", "local", "--out", "out")
    assert refused.code == 1
    assert "a streamed response from an endpoint of no built-in route; pass --route ROUTE" in refused.out
    forced = run("import", "local", "--out", "out", "--route", "openai-compatible")
    assert forced.code == 0, forced.out
    metadata = Cassette.load(work / "out" / "openai-compatible" / "vllm.yaml").metadata
    assert metadata["base_url"] == "http://127.0.0.1:8000/v1"
    assert run("check", "out").code == 0


def test_an_out_folder_that_cannot_be_made_is_refused_before_anything_is_read(work: Path) -> None:
    (work / "afile").write_text("not a folder\n")
    before = file_digests(work)
    result = run("import", "in", "--out", "afile/cases")
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"dsh-replay: error: --out afile/cases cannot be written: {work / 'afile'} is a file, so the folder for "
        "case.yaml cannot be made"]
    assert result.out == ""
    assert file_digests(work) == before  # no folder made, nothing written


def test_an_unknown_route_is_a_usage_error_listing_the_routes(work: Path) -> None:
    result = run("import", "in", "--out", "out", "--route", "opneai")
    assert result.code == 2
    assert "opneai" in result.err and "openai-responses" in result.err


@pytest.mark.parametrize("style", ["vcrpy-gzip", "vcrpy-json", "cassetter"])
def test_other_styles_of_the_same_real_call_import_alike(work: Path, style: str) -> None:
    [interaction] = real_interactions("pydantic-ai/test_dbos/test_dbos_agent_run_stream.yaml")
    body = interaction["response"]["body"]["string"].encode()
    request = interaction["request"]
    if style == "vcrpy-gzip":  # as vcrpy keeps a gzip response: !!binary bytes and the header
        request["body"] = json.dumps(request.pop("parsed_body"))
        interaction["response"]["body"]["string"] = gzip.compress(body)
        interaction["response"]["headers"]["content-encoding"] = ["gzip"]
        path = write_cassette(work / "styles" / "call.yaml", [interaction])
        assert b"!!binary" in path.read_bytes()
    elif style == "vcrpy-json":
        request["body"] = json.dumps(request.pop("parsed_body"))
        (work / "styles").mkdir()
        (work / "styles" / "call.json").write_text(json.dumps({"interactions": [interaction], "version": 1}))
    else:
        request["body"] = {"type": "json", "content": request.pop("parsed_body")}
        interaction["response"] = {"status": 200, "headers": interaction["response"]["headers"],
                                   "body": {"type": "text", "content": body.decode()}}
        write_cassette(work / "styles" / "call.yaml", [interaction])
    result = run("import", "styles", "--out", "out")
    assert result.code == 0, result.out
    cassette = Cassette.load(work / "out" / "openai" / "call.yaml")
    assert cassette.interactions[0].body == body  # byte-exact, whatever the style kept
    assert "content-encoding" not in {name.lower() for name, _ in cassette.interactions[0].headers}
    assert run("check", "out", "--fragmentation", "bytes").code == 0


def test_an_ollama_ndjson_stream_is_cut_one_fragment_per_line(work: Path) -> None:
    lines = [{"model": "llama3.2", "message": {"role": "assistant", "content": piece}, "done": False}
             for piece in ("Hel", "lo")]
    lines.append({"model": "llama3.2", "message": {"role": "assistant", "content": ""}, "done": True,
                  "done_reason": "stop", "prompt_eval_count": 5, "eval_count": 2})
    body = "".join(json.dumps(line) + "\n" for line in lines)
    request = {"model": "llama3.2", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    write_cassette(work / "ollama" / "chat.yaml", [{
        "request": {"method": "POST", "uri": "http://localhost:11434/api/chat", "body": json.dumps(request),
                    "headers": {}},
        "response": {"status": {"code": 200, "message": "OK"},
                     "headers": {"Content-Type": ["application/x-ndjson"]}, "body": {"string": body}},
    }])
    result = run("import", "ollama", "--out", "out")
    assert result.code == 0, result.out
    [interaction] = Cassette.load(work / "out" / "ollama" / "chat.yaml").interactions
    assert interaction.fragment_sizes() == [len(json.dumps(line)) + 1 for line in lines]
    assert collect(load_jsonl(work / "out" / "ollama" / "chat.chunks.jsonl")).text == "Hello"


def test_import_again_replaces_its_own_cases_but_never_a_recorded_cassette(
        work: Path, imported: tuple[Result, dict[str, str]]) -> None:
    again = run("import", "in", "--out", "out")
    assert again.code == 0, again.out
    name = "llm-anthropic/test_anthropic/test_prompt.yaml"
    target = output_of(work / "out", name)
    recorded = Cassette.load(target)
    del recorded.metadata["imported_from"]  # now it reads as a cassette recorded by dsh-replay
    recorded.save()
    kept = target.read_bytes()
    refused = run("import", "in", "--out", "out")
    assert refused.code == 1
    assert (f"cassette in/{name} interaction 0: not importable: {target.relative_to(work)} exists and is a "
            "recorded dsh-replay cassette, not one an import wrote") in refused.out
    assert target.read_bytes() == kept


def test_show_and_report_say_the_fragments_are_inferred(work: Path, imported: tuple[Result, dict[str, str]]) -> None:
    cassette = output_of(work / "out", "llm-anthropic/test_anthropic/test_prompt.yaml")
    shown = run("show", str(cassette))
    assert shown.code == 0
    assert shown.out.splitlines()[1].startswith("fragments inferred: ")
    assert run("report", "out", "-o", "report.html").code == 0
    assert "ok, fragments inferred" in (work / "report.html").read_text(encoding="utf-8")


def test_the_real_cassettes_hold_no_secret() -> None:
    result = run("scan", str(CASES))
    assert result.code == 0, result.out


# -- query parameters: Azure OpenAI's api-version, the Anthropic SDK's beta=true -----------------------


def test_azure_and_the_beta_client_import_with_their_query_as_the_cases_default_query(
        work: Path, imported: tuple[Result, dict[str, str]]) -> None:
    result, _ = imported
    lines = result.out.splitlines()
    for call in range(4):
        assert (f"cassette in/{AZURE} interaction {call}: the recorded query parameter(s) api-version=2024-02-01 "
                "are sent on every request of the case (dsh_replay.adapter.default_query)") in lines
    assert (f"cassette in/{BETA} interaction 0: request field messages[0].content is a list of one text part in "
            "the recording and a string in the anthropic adapter's request; the API reads a string as one text "
            "part, so the case keeps the string") in lines
    azure = output_of(work / "out", AZURE)
    metadata = Cassette.load(azure).metadata
    assert metadata["adapter"] == {"default_query": {"api-version": "2024-02-01"}}
    assert metadata["base_url"] == "https://traceloop-stg.openai.azure.com/openai/deployments/openllmetry-testing"
    assert "api-version: '2024-02-01'" in azure.read_text(encoding="utf-8")  # quoted, or YAML reads a date
    assert Cassette.load(output_of(work / "out", BETA)).metadata["adapter"] == {"default_query": {"beta": "true"}}
    joke = collect(load_jsonl(azure.with_suffix(".chunks.jsonl")))
    assert joke.text.startswith("Why did the Opentelemetry developer bring a ladder")
    beta = output_of(work / "out", BETA)
    assert collect(load_jsonl(beta.with_suffix(".chunks.jsonl"))).text == "2"
    # show's timeline builds the adapter from the same settings: the chunks are attributed, no mismatch
    shown = run("show", str(azure.relative_to(work)))
    assert shown.code == 0
    assert '→ {"type":"text-delta","index":0,"text":"Why"}' in shown.out
    # the case keeps the request as the adapter sends it: the prompt as a string, the query as recorded
    [interaction] = Cassette.load(beta).interactions
    assert interaction.request is not None
    assert interaction.request.uri == "https://api.anthropic.com/v1/messages?beta=true"
    assert json.loads(interaction.request.body)["messages"] == [
        {"role": "user", "content": "What is 1+1? Answer with just the number."}]


def test_without_its_default_query_the_azure_case_no_longer_replays(
        work: Path, imported: tuple[Result, dict[str, str]]) -> None:
    cassette = Cassette.load(output_of(work / "out", AZURE))
    del cassette.metadata["adapter"]
    cassette.save()
    result = run("check", "out")
    assert result.code == 1
    assert "8 passed, 1 failed" in result.out
    assert "differs in: query" in result.out


def test_a_default_query_value_yaml_reads_as_a_date_is_named_with_the_field(
        work: Path, imported: tuple[Result, dict[str, str]]) -> None:
    azure = output_of(work / "out", AZURE)
    azure.write_text(azure.read_text(encoding="utf-8").replace("api-version: '2024-02-01'", "api-version: 2024-02-01"),
                     encoding="utf-8")
    result = run("check", "out")
    assert result.code == 1
    assert f"cassette out/openai/{AZURE}: dsh_replay.adapter.default_query.api-version must be a string (quote it)" \
        in result.out


def test_an_azure_api_key_header_is_scrubbed_on_import(work: Path) -> None:
    interactions = real_interactions(AZURE)[:1]
    interactions[0]["request"]["headers"]["api-key"] = ["sk-test-azure-4c1f0e9a8b7d6c5e4f3a2b1c"]
    write_cassette(work / "keyed" / "azure.yaml", interactions)
    result = run("import", "keyed", "--out", "out")
    assert result.code == 0, result.out
    written = work / "out" / "openai" / "azure.yaml"
    text = written.read_text(encoding="utf-8")
    assert "sk-test-azure" not in text
    assert Cassette.load(written).interactions[0].request.headers["api-key"] == "REDACTED"
    assert run("check", "out").code == 0


# -- [tool.dsh_replay.hosts] ------------------------------------------------------------------------------


def local_server_cassette(work: Path) -> None:
    [interaction] = real_interactions("pydantic-ai/test_dbos/test_dbos_agent_run_stream.yaml")
    interaction["request"]["uri"] = "http://my-vllm.internal:8000/v1/chat/completions"
    write_cassette(work / "local" / "vllm.yaml", [interaction])


def test_a_host_in_the_pyproject_hosts_table_names_the_route_and_route_still_wins(work: Path) -> None:
    local_server_cassette(work)
    (work / "pyproject.toml").write_text('[tool.dsh_replay.hosts]\n"my-vllm.internal:8000" = "openai-compatible"\n',
                                         encoding="utf-8")
    result = run("import", "local", "--out", "out")
    assert result.code == 0, result.out
    assert Cassette.load(work / "out" / "openai-compatible" / "vllm.yaml").metadata["base_url"] == \
        "http://my-vllm.internal:8000/v1"
    forced = run("import", "local", "--out", "forced", "--route", "openai")
    assert forced.code == 0, forced.out
    assert (work / "forced" / "openai" / "vllm.yaml").is_file()


def test_an_unknown_route_in_the_hosts_table_is_a_usage_error_naming_file_key_and_routes(work: Path) -> None:
    (work / "pyproject.toml").write_text('[tool.dsh_replay.hosts]\n"my-vllm.internal:8000" = "openai-compatibel"\n',
                                         encoding="utf-8")
    result = run("import", "in", "--out", "out")
    assert result.code == 2
    assert ("pyproject.toml [tool.dsh_replay.hosts] 'my-vllm.internal:8000' names the route 'openai-compatibel', "
            "which is not a known route; the known routes are anthropic, deepseek, gemini, ollama, openai, "
            "openai-compatible, openai-responses") in result.err
