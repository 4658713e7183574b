"""Plain vcrpy cassettes read in place by ``check``, ``report``, ``serve`` and the plugin's collection.

The cassettes are real third-party recordings (``tests/import_cases``, see
SOURCES.md there), copied into a fresh project folder. ``--route`` (or
``[tool.dsh_replay.hosts]``) says what they hold; the route, options and
fragments are inferred as ``import`` infers them, and nothing but goldens is
ever written.
"""

from __future__ import annotations

import asyncio
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from dsh_replay.adapters import adapter_class
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.inferred import Inference, read_plain_case
from dsh_replay.cassette.replay import run_adapter
from dsh_replay.cassette.store import Cassette
from dsh_replay.protocol.jsonl import dump_jsonl

from .conftest import file_digests, run
from .test_serve import GUARD, serving

CASES = Path(__file__).resolve().parents[1] / "import_cases"
OPENAI = "pydantic-ai/test_openai/test_run_stream_sync_streams_real_model.yaml"  # two calls
ANTHROPIC = "llm-anthropic/test_anthropic/test_prompt.yaml"
GEMINI = "pydantic-ai/test_google/test_google_model_stream.yaml"
HOSTS = textwrap.dedent("""\
    [tool.dsh_replay.hosts]
    "api.openai.com" = "openai"
    "api.anthropic.com" = "anthropic"
    "generativelanguage.googleapis.com" = "gemini"
""")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The cwd: ``plain/<route>/`` holding one real cassette of each of three providers."""
    monkeypatch.chdir(tmp_path)
    for route, name in (("openai", OPENAI), ("anthropic", ANTHROPIC), ("gemini", GEMINI)):
        (tmp_path / "plain" / route).mkdir(parents=True)
        shutil.copy(CASES / name, tmp_path / "plain" / route / Path(name).name)
    yield tmp_path


def test_check_with_a_route_replays_a_plain_cassette_and_writes_only_its_goldens(project: Path) -> None:
    folder = project / "plain" / "openai"
    before = file_digests(folder)
    missing = run("check", "--route", "openai", "plain/openai")
    assert missing.code == 1
    assert "golden missing" in missing.out and "openai" in missing.out
    updated = run("check", "--update", "--route", "openai", "plain/openai")
    assert updated.code == 0, updated.out
    name = Path(OPENAI).stem
    written = set(file_digests(folder)) - set(before)
    assert written == {f"{name}.chunks.jsonl", f"{name}.2.chunks.jsonl"}
    assert {k: v for k, v in file_digests(folder).items() if k in before} == before  # the cassette is only read
    checked = run("check", "--route", "openai", "plain/openai")
    assert checked.code == 0, checked.out
    row = next(line for line in checked.out.splitlines() if line.startswith(name))
    assert row.split()[1] == "openai" and int(row.split()[2]) > 2  # route, and one fragment per SSE event
    assert "1 case(s)" in checked.out and "1 passed, 0 failed" in checked.out
    assert b'"blockType":"tool-call"' in (folder / f"{name}.chunks.jsonl").read_bytes()
    bytes_ = run("check", "--route", "openai", "--fragmentation", "bytes", "plain/openai")
    assert bytes_.code == 0 and "1 passed" in bytes_.out


def test_the_goldens_are_the_ones_import_writes(project: Path) -> None:
    assert run("check", "--update", "--route", "anthropic", "plain/anthropic").code == 0
    assert run("import", "plain/anthropic", "--out", "imported").code == 0
    stem = Path(ANTHROPIC).stem
    read_in_place = (project / "plain" / "anthropic" / f"{stem}.chunks.jsonl").read_bytes()
    assert read_in_place == (project / "imported" / "anthropic" / f"{stem}.chunks.jsonl").read_bytes()


def test_without_a_route_or_hosts_a_plain_cassette_is_skipped_as_before(project: Path) -> None:
    result = run("check", "plain")
    assert result.code == 1
    assert "skipped 3 YAML file(s) without dsh_replay metadata" in result.out


def test_the_hosts_table_reads_each_cassette_as_its_hosts_route(project: Path) -> None:
    (project / "pyproject.toml").write_text(HOSTS, encoding="utf-8")
    assert run("check", "--update", "plain").code == 0
    checked = run("check", "plain")
    assert checked.code == 0, checked.out
    assert "3 case(s)" in checked.out and "3 passed, 0 failed" in checked.out
    routes = {line.split()[0]: line.split()[1] for line in checked.out.splitlines()[2:5]}
    assert set(routes.values()) == {"openai", "anthropic", "gemini"}


def test_a_host_the_table_does_not_name_stays_skipped(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.dsh_replay.hosts]\n"api.anthropic.com" = "anthropic"\n',
                                            encoding="utf-8")
    result = run("check", "--update", "plain")
    assert result.code == 0, result.out
    assert "1 case(s)" in result.out and "skipped 2 YAML file(s)" in result.out


def test_a_call_that_cannot_be_read_fails_its_row_naming_the_interaction(project: Path) -> None:
    # an OpenAI chat call read as Anthropic's: the path is not that route's endpoint
    result = run("check", "--route", "anthropic", "plain/openai")
    assert result.code == 1
    assert "1 failed" in result.out
    assert "cannot be read as a case: interaction 0:" in result.out
    assert "is not the anthropic endpoint" in result.out


def test_a_key_in_a_plain_cassettes_url_stays_out_of_every_output(project: Path) -> None:
    key = "AIza" + "SyZq7Rb3Nd8Lk2Wp5Xs9Jf4Hc6Mv1Tq0"
    path = project / "plain" / "openai" / Path(OPENAI).name
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("/v1/chat/completions", f"/v1/chat/completions?key={key}&alt=sse"), encoding="utf-8")
    # read as Anthropic's: every call fails its row, naming the request
    result = run("check", "--route", "anthropic", "--json", "plain/openai")
    junit = run("check", "--route", "anthropic", "--junit-xml", "out.xml", "plain/openai")
    assert result.code == junit.code == 1
    assert "key=REDACTED&alt=sse" in result.out
    for output in (result.out, result.err, junit.out, junit.err, (project / "out.xml").read_text(encoding="utf-8")):
        assert key not in output
    imported = run("import", "plain/openai", "--route", "anthropic", "--out", "imported")
    assert key not in imported.out + imported.err


def test_an_unknown_route_is_refused_before_anything_is_read(project: Path) -> None:
    result = run("check", "--route", "opneai", "plain")
    assert result.code == 2
    assert "--route: unknown route 'opneai'. Did you mean 'openai'?" in result.err


def test_a_changed_answer_in_the_plain_cassette_fails_against_its_golden(project: Path) -> None:
    assert run("check", "--update", "--route", "anthropic", "plain/anthropic").code == 0
    path = project / "plain" / "anthropic" / Path(ANTHROPIC).name
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    body = data["interactions"][0]["response"]["body"]["string"]
    assert '"text":"elly"' in body
    data["interactions"][0]["response"]["body"]["string"] = body.replace('"text":"elly"', '"text":"olly"', 1)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = run("check", "--route", "anthropic", "plain/anthropic")
    assert result.code == 1
    assert "golden differs" in result.out


def test_report_shows_a_plain_cassette_with_its_fragments_inferred(project: Path) -> None:
    assert run("check", "--update", "--route", "gemini", "plain/gemini").code == 0
    result = run("report", "--route", "gemini", "plain/gemini", "-o", "report.html")
    assert result.code == 0, result.out + result.err
    assert "1 cassette(s), 1 ok, 0 failed" in result.out
    page = (project / "report.html").read_text(encoding="utf-8")
    assert "fragments inferred" in page and Path(GEMINI).stem in page


def test_serve_with_a_route_answers_the_adapter_as_the_cassette_holds(project: Path) -> None:
    assert run("check", "--update", "--route", "anthropic", "plain/anthropic").code == 0
    path = project / "plain" / "anthropic" / Path(ANTHROPIC).name
    case = read_plain_case(path, RouteTable.load(), Inference(route="anthropic"))
    options = case.metadata["options"]
    from dsh_replay import GenerateOptions

    with serving(str(path.parent), "--route", "anthropic") as served:
        assert served.count == 1
        adapter = adapter_class("anthropic")("sk-ant-test-0123456789abcdefghij", base_url=served.base_url)

        async def stream() -> bytes:
            async with httpx.AsyncClient(timeout=GUARD) as client:
                adapter.client = client
                outcome = await run_adapter(adapter, GenerateOptions.from_json(options, "options"))
            assert outcome.raised is None and not outcome.violations
            return dump_jsonl(outcome.chunks)

        assert asyncio.run(stream()) == path.with_name(f"{path.stem}.chunks.jsonl").read_bytes()
        served.stop()


def test_serve_refuses_a_plain_cassette_it_cannot_read_naming_it(project: Path) -> None:
    result = run("serve", "--route", "anthropic", "plain/openai")
    assert result.code == 2
    assert "cannot be read as a case: interaction 0" in result.err


def test_collection_replays_plain_cassettes_of_the_hosts_table(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(HOSTS + "\n[tool.pytest.ini_options]\ndsh_replay_collect = true\n")
    target = pytester.path / "tests" / "cassettes"
    target.mkdir(parents=True)
    shutil.copy(CASES / ANTHROPIC, target / "prompt.yaml")
    shutil.copy(CASES / "not-importable" / "llm-gemini" / "test_gemini" / "test_prompt.yaml", target / "json.yaml")
    first = pytester.runpytest_subprocess("-p", "no:randomly", "--update-golden", "-q")
    first.assert_outcomes(passed=1)  # the gemini file streams no SSE: not a case
    assert (target / "prompt.chunks.jsonl").is_file() and not (target / "json.chunks.jsonl").exists()
    again = pytester.runpytest_subprocess("-p", "no:randomly", "-q")
    again.assert_outcomes(passed=1)
    golden = target / "prompt.chunks.jsonl"
    golden.write_bytes(golden.read_bytes().replace(b'"text":"elly"', b'"text":"olly"', 1))
    changed = pytester.runpytest_subprocess("-p", "no:randomly", "-q")
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*golden*prompt.chunks.jsonl differs*"])


def test_read_plain_case_keeps_the_request_for_matching_and_says_fragments_are_inferred() -> None:
    case = read_plain_case(CASES / OPENAI, RouteTable.load(), Inference(route="openai"))
    assert isinstance(case, Cassette)
    assert case.metadata["fragments"] == "inferred" and case.metadata["route"] == "openai"
    assert len(case.interactions) == 2 and len(case.metadata["follow_ups"]) == 1
    assert all(i.request is not None and i.request.uri.endswith("/v1/chat/completions") for i in case.interactions)
    assert all(len(i.fragment_sizes()) > 1 for i in case.interactions)
