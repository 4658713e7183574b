"""``dsh-replay show``: the timeline of a cassette — fragments, the chunks each released, first byte/chunk."""

from __future__ import annotations

import re
from pathlib import Path

from dsh_replay.cassette.store import Cassette

from .conftest import run


def fixed_timing(path: Path, fragments: list[tuple[float, int]]) -> Path:
    """The cassette with its fragment timings replaced by known ones."""
    cassette = Cassette.load(path)
    cassette.interactions[0].fragments = fragments
    cassette.save()
    return path


def test_fragments_with_offsets_sizes_and_the_chunks_they_released(project: Path) -> None:
    cassette = fixed_timing(project / "cassettes" / "my-provider" / "greeting.yaml", [(12.5, 18), (30.0, 20), (41.2, 60)])
    result = run("show", str(cassette))
    assert (result.code, result.err) == (0, "")
    head, timeline = result.out.split("\n\n     ms", 1)
    assert head.splitlines()[0] == f"cassette {cassette}  route=my-provider  dsh-replay 0.1.0"
    assert "interaction 0: POST /v1/generate" in head
    assert "  request: model=m1, messages=1" in head
    assert "authorization: REDACTED" in head
    assert "  response: 200 OK, 98 bytes in 3 fragment(s)" in head
    assert ("     ms" + timeline).splitlines() == [
        "     ms   offset   bytes  fragment → chunks",
        '   12.5        0      18  {"text": "Hello"}\\n',
        '                         → {"type":"block-start","index":0,"blockType":"text"}',
        '                         → {"type":"text-delta","index":0,"text":"Hello"}',
        '   30.0       18      20  {"text": ", world"}\\n',
        '                         → {"type":"text-delta","index":0,"text":", world"}',
        '   41.2       38      60  {"done": true, "stop": "end", "usage": {"in": 3, "out": 2}}\\n',
        '                         → {"type":"block-end","index":0,"block":{"type":"text","text":"Hello, world"}}',
        '                         → {"type":"usage","usage":{"inputTokens":3,"outputTokens":2}}',
        '                         → {"type":"finish","reason":{"kind":"stop","raw":"end"}}',
        "",
        "time to first byte: 12.5 ms; time to first chunk: 12.5 ms",
    ]


def test_first_chunk_can_come_after_the_first_byte(project: Path) -> None:
    # the first line arrives in two fragments: no chunk until the second one completes it
    cassette = fixed_timing(project / "cassettes" / "my-provider" / "greeting.yaml", [(5.0, 10), (9.5, 28), (20.0, 60)])
    result = run("show", str(cassette))
    assert result.out.endswith("time to first byte: 5.0 ms; time to first chunk: 9.5 ms\n")


def test_an_adapter_error_is_part_of_the_timeline(project: Path) -> None:
    path = project / "cassettes" / "my-provider" / "greeting.yaml"
    cassette = Cassette.load(path)
    interaction = cassette.interactions[0]
    interaction.body = interaction.body[:38]  # the done line never came
    interaction.fragments = [(1.0, 18), (2.0, 20)]
    interaction.complete = True  # the provider ended the body there
    cassette.save()
    result = run("show", str(path))
    assert result.code == 0
    assert result.out.splitlines()[-3] == (
        "                         → raised StreamInterruptedError: the stream ended without its done line (route=my-provider)"
    )


def test_unknown_route_still_shows_the_fragments(project: Path) -> None:
    path = project / "cassettes" / "my-provider" / "greeting.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("route: my-provider", "route: nobody"), encoding="utf-8")
    result = run("show", str(path))
    assert result.code == 0
    assert "(chunks not shown: unknown route 'nobody'." in result.out
    assert '{"text": "Hello"}\\n' in result.out
    assert result.out.endswith("time to first chunk: n/a\n")


def test_a_plain_vcrpy_cassette_shows_its_traffic(project: Path) -> None:
    path = project / "cassettes" / "my-provider" / "greeting.yaml"
    text = path.read_text(encoding="utf-8")
    plain = path.with_name("plain.yaml")
    plain.write_text(text[text.index("interactions:"):], encoding="utf-8")
    result = run("show", str(plain))
    assert result.code == 0
    assert result.out.splitlines()[0] == f"cassette {plain}  route=?  plain vcrpy"
    assert "→ {" not in result.out  # no chunks: without metadata there is no route to replay through
    assert re.search(r'\n +\d+\.\d +0 +18  \{"text": "Hello"\}', result.out)


def test_the_query_string_is_shown(project: Path) -> None:
    path = project / "cassettes" / "my-provider" / "greeting.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("/v1/generate\n", "/v1/generate?alt=sse\n"), encoding="utf-8")
    assert "interaction 0: POST /v1/generate?alt=sse\n" in run("show", str(path)).out


def test_corrupt_and_missing_cassettes_are_one_line_errors(project: Path) -> None:
    corrupt = project / "corrupt.yaml"
    corrupt.write_text("dsh_replay: {route: x\n", encoding="utf-8")
    result = run("show", str(corrupt))
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"dsh-replay: error: cassette {corrupt} is not valid YAML (line ")
    assert "re-record it with --record-mode=rewrite" in result.err
    result = run("show", "absent.yaml")
    assert (result.code, result.err) == (2, "dsh-replay: error: cassette absent.yaml does not exist\n")


def test_html_may_not_replace_the_cassette_shown_nor_a_golden(project: Path) -> None:
    cassette = Path("cassettes/my-provider/greeting.yaml")
    golden = cassette.with_name("greeting.chunks.jsonl")
    other = cassette.with_name("umlauts.yaml")
    kept = {path: path.read_bytes() for path in (cassette, golden, other)}
    for output, reason in [(cassette, "it is one of the cassettes being read"), (golden, "it is a golden"),
                           (other, "it is a dsh_replay cassette")]:
        result = run("show", str(cassette), "--html", str(output))
        assert (result.code, result.out) == (2, "")
        assert result.err == (f"dsh-replay: error: refusing to write report to {output}: {reason} "
                              "(use --force to overwrite)\n")
    assert {path: path.read_bytes() for path in kept} == kept
    result = run("show", str(cassette), "--html", str(golden), "--force")
    assert (result.code, result.err) == (0, "")
    assert golden.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_an_emulated_recording_says_so_in_show_and_report(project: Path) -> None:
    cassette_path = project / "cassettes" / "my-provider" / "greeting.yaml"
    cassette = Cassette.load(cassette_path)
    cassette.metadata["emulated"] = True
    cassette.save()
    shown = run("show", str(cassette_path))
    assert shown.out.splitlines()[1] == (
        "emulated: recorded against a scripted provider emulator, not the real provider"
    )
    page = project / "report.html"
    assert run("report", str(cassette_path), "-o", str(page)).code == 0
    assert "ok, emulated" in page.read_text(encoding="utf-8")
