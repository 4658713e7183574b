"""``dsh-replay report`` and ``show --html``: one self-contained page, a timeline per cassette."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from dsh_replay.cassette.store import Cassette
from dsh_replay.cli.report_html import CaseView, render_page
from dsh_replay.cli.report_svg import nice_ticks

from .conftest import PYPROJECT, ndjson, run
from .test_show import fixed_timing

SVG = "{http://www.w3.org/2000/svg}"


class Page(HTMLParser):
    """The parts of a report a test looks at: sections with their attributes, index rows, tags seen."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[dict[str, str]] = []
        self.svgs_per_section: list[int] = []
        self.rows: list[list[str]] = []
        self.links: list[str] = []
        self.tags: list[str] = []
        self.external: list[str] = []
        self._in_index = self._in_row = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        self.tags.append(tag)
        self.external += [v for n, v in found.items() if n in ("src", "href") and not v.startswith("#")]
        if tag == "section":
            self.sections.append(found)
            self.svgs_per_section.append(0)
        elif tag == "svg" and self.sections:
            self.svgs_per_section[-1] += 1
        elif tag == "table" and found.get("class") == "index":
            self._in_index = True
        elif tag == "tr" and self._in_index:
            self.rows.append([])
        elif tag == "td" and self._in_index:
            self.rows[-1].append(found.get("data-value", ""))
        elif tag == "a" and self._in_index:
            self.links.append(found.get("href", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_index = False


def report(*argv: str, output: str = "report.html") -> tuple[str, Page]:
    result = run("report", *argv, "-o", output)
    assert (result.code, result.err) == (0, ""), result.err
    text = Path(output).read_text(encoding="utf-8")
    return text, Page(text)


def svgs(text: str) -> list[ET.Element]:
    """Every inline SVG, parsed as XML (so each must be well-formed on its own)."""
    return [ET.fromstring(found) for found in re.findall(r"<svg .*?</svg>", text, flags=re.S)]


def test_one_timeline_per_cassette_with_the_cassettes_numbers(project: Path) -> None:
    greeting = fixed_timing(project / "cassettes" / "my-provider" / "greeting.yaml", [(5.0, 10), (9.5, 28), (20.0, 60)])
    text, page = report("cassettes")
    cases = [s for s in page.sections if s.get("class") == "case"]
    assert [s["id"] for s in cases] == ["case-1", "case-2"]
    assert page.svgs_per_section == [1, 1]
    assert page.links == ["#case-1", "#case-2"]
    first = cases[0]
    assert (first["data-fragments"], first["data-bytes"], first["data-chunks"]) == ("3", "98", "6")
    assert (first["data-ttfb-ms"], first["data-first-text-ms"], first["data-golden"]) == ("5.0", "9.5", "matched")
    umlauts = Cassette.load(project / "cassettes" / "my-provider" / "umlauts.yaml").interactions[0]
    assert umlauts.fragments is not None
    assert cases[1]["data-fragments"] == str(len(umlauts.fragments))
    assert cases[1]["data-bytes"] == str(len(umlauts.body))
    assert cases[1]["data-ttfb-ms"] == f"{umlauts.fragments[0][0]:.1f}"
    # case, route, fragments, chunks, TTFB, first text, golden, verdict
    assert page.rows[1] == ["greeting", "my-provider", "3", "6", "5.0", "9.5", "matched", "ok"]
    assert "time to first byte</dt><dd>5.0 ms" in text
    picture = svgs(text)[0]
    series = picture.find(f".//{SVG}g[@class='series']")
    assert series is not None
    assert (series.get("data-fragments"), series.get("data-bytes")) == ("3", "98")
    assert len(series.findall(f"{SVG}circle")) == 3
    events = picture.findall(f".//{SVG}rect[@class='event']")
    assert sum(int(e.get("data-count", "0")) for e in events) == 6
    kinds = {e.get("data-kind") for e in events}
    assert kinds == {"block-start", "text-delta", "block-end", "usage", "finish"}
    assert greeting.exists() and not page.external


def test_the_same_cassettes_give_the_same_bytes(project: Path) -> None:
    first, _ = report("cassettes", output="one.html")
    second, _ = report("cassettes", output="two.html")
    assert first == second
    assert not re.search(r"20\d\d-\d\d-\d\d", first)


def test_untrusted_text_is_escaped_everywhere(project: Path) -> None:
    source = project / "cassettes" / "my-provider" / "greeting.yaml"
    hostile = source.with_name("<b onmouseover=alert(1)>.yaml")
    source.rename(hostile)
    source.with_name("greeting.chunks.jsonl").rename(source.with_name("<b onmouseover=alert(1)>.chunks.jsonl"))
    cassette = Cassette.load(hostile)
    body = ndjson("<script>alert(1)</script>", ' & \\"quoted\\"')
    cassette.interactions[0].body = body
    cassette.interactions[0].fragments = [(1.0, len(body))]
    cassette.save()
    text, page = report("cassettes")
    assert page.tags.count("script") == 1
    assert "<script>alert" not in text and "<b onmouseover" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&amp; \\&quot;quoted\\&quot;" in text
    hostile_case = next(s for s in page.sections if s.get("data-golden") == "differs")
    assert hostile_case["id"] == "case-1"  # ids come from positions, never from the file name
    for picture in svgs(text):
        assert picture.tag == f"{SVG}svg"


def test_a_missing_golden_and_a_broken_rule_are_shown(project: Path) -> None:
    (project / "cassettes" / "my-provider" / "umlauts.chunks.jsonl").unlink()
    (project / "report_bad_adapter.py").write_text(
        "from my_llm_adapter import _MyAdapter\n"
        "from dsh_replay.protocol.chunks import BlockStart\n\n"
        "class Bad(_MyAdapter):\n"
        "    async def stream(self, options):\n"
        "        async for chunk in super().stream(options):\n"
        "            if type(chunk) is not BlockStart:\n"
        "                yield chunk\n", encoding="utf-8")
    (project / "pyproject.toml").write_text(PYPROJECT + '"bad-provider" = "report_bad_adapter:Bad"\n', encoding="utf-8")
    greeting = project / "cassettes" / "my-provider" / "greeting.yaml"
    bad = greeting.with_name("bad.yaml")
    bad.write_text(greeting.read_text(encoding="utf-8").replace("route: my-provider", "route: bad-provider"),
                   encoding="utf-8")
    text, page = report("cassettes")
    assert [row[0] for row in page.rows[1:]] == ["bad", "greeting", "umlauts"]
    bad_row, _, umlauts_row = page.rows[1:]
    assert bad_row[7].startswith("FAIL P")
    assert umlauts_row[6:] == ["missing", "FAIL golden missing"]
    rule = bad_row[7].split()[1]
    assert re.search(rf'<ul class="violations"><li>{rule} at chunk 0: ', text)
    assert "golden cassettes/my-provider/umlauts.chunks.jsonl is missing" in text


def test_compare_overlays_two_cassettes_with_a_legend(project: Path) -> None:
    folder = project / "cassettes" / "my-provider"
    before = fixed_timing(folder / "greeting.yaml", [(5.0, 38), (20.0, 60)])
    after = folder / "greeting-rerecorded.yaml"
    after.write_bytes(before.read_bytes())
    fixed_timing(after, [(2.0, 18), (3.0, 20), (8.0, 60)])
    text, page = report("--compare", str(before), str(after))
    assert [s.get("class") for s in page.sections] == ["comparison", "case", "case"]
    assert page.svgs_per_section == [1, 1, 1]
    overlay = svgs(text)[0]
    lines = overlay.findall(f".//{SVG}g[@class='series']")
    assert [(g.get("data-series"), g.get("data-fragments")) for g in lines] == [
        (f"A: {before}", "2"), (f"B: {after}", "3")]
    legend = overlay.find(f".//{SVG}g[@class='legend']")
    assert legend is not None
    assert [t.text for t in legend.findall(f"{SVG}text")] == [f"A: {before}", f"B: {after}"]


def test_show_html_writes_the_page_for_one_cassette(project: Path) -> None:
    cassette = fixed_timing(project / "cassettes" / "my-provider" / "greeting.yaml", [(12.5, 18), (30.0, 20), (41.2, 60)])
    result = run("show", str(cassette), "--html", "one.html")
    assert (result.code, result.err) == (0, "")
    assert result.out == "wrote one.html: 1 cassette(s), 1 ok, 0 failed\n"
    page = Page(Path("one.html").read_text(encoding="utf-8"))
    assert [(s["id"], s["data-fragments"], s["data-ttfb-ms"]) for s in page.sections] == [("case-1", "3", "12.5")]
    assert "time to first byte: 12.5 ms" in run("show", str(cassette)).out  # the text stays as it was


def test_a_corrupt_cassette_is_a_failed_section_not_a_crash(project: Path) -> None:
    (project / "cassettes" / "my-provider" / "corrupt.yaml").write_text("dsh_replay: {route: x\n", encoding="utf-8")
    _, page = report("cassettes/my-provider/corrupt.yaml", "cassettes")
    corrupt = page.rows[1]
    assert corrupt[0] == "corrupt" and corrupt[7] == "FAIL CassetteError"
    assert page.svgs_per_section == [0, 1, 1]


def test_bad_paths_and_outputs_are_one_line_errors(project: Path) -> None:
    result = run("report", "absent", "-o", "r.html")
    assert (result.code, result.out, result.err) == (2, "", "dsh-replay: error: absent: no such file or folder\n")
    (project / "empty").mkdir()
    result = run("report", "empty", "-o", "r.html")
    assert (result.code, result.out) == (1, "")
    assert result.err == "dsh-replay: no cassettes with dsh_replay metadata under empty; nothing written\n"
    assert not Path("r.html").exists()
    result = run("report", "cassettes", "-o", "empty")
    assert (result.code, result.out) == (2, "")
    assert result.err == "dsh-replay: error: -o empty: empty is a folder; choose a file that can be written\n"
    Path("a-file").write_text("", encoding="utf-8")
    result = run("report", "cassettes", "-o", "a-file/r.html")
    assert result.code == 2
    assert result.err.startswith("dsh-replay: error: -o a-file/r.html: ") and result.err.count("\n") == 1
    result = run("report", "--compare", "cassettes/my-provider/greeting.yaml", "gone.yaml", "-o", "r.html")
    assert (result.code, result.err) == (
        2, "dsh-replay: error: --compare gone.yaml: no such cassette file; give two cassette files\n")
    assert not Path("r.html").exists()


def test_render_page_lists_violations_and_counts_failures() -> None:
    view = CaseView(anchor="case-1", case="c", path="c.yaml", route="r", verdict="FAIL P4 (chunk 2)", ok=False,
                    violations=("P4 at chunk 2: a <delta> after block-end",), golden="n/a")
    text = render_page([view], title="t", version="9.9")
    assert "<li>P4 at chunk 2: a &lt;delta&gt; after block-end</li>" in text
    assert "1 cassette(s): 0 ok, 1 failed." in text
    assert "<svg" not in text  # nothing recorded, nothing to draw


def test_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0) == [0.0, 1.0]
    assert nice_ticks(41.2) == [0, 10, 20, 30, 40, 50]
    assert nice_ticks(0.3) == [0, 0.1, 0.2, 0.3]
    assert nice_ticks(1239) == [0, 500, 1000, 1500]


# -- the page never replaces a cassette, a golden or a file read ---------------------------------

GREETING = Path("cassettes/my-provider/greeting.yaml")
UMLAUTS = Path("cassettes/my-provider/umlauts.yaml")


def _refused(output: str, reason: str, what: str = "report") -> str:
    return f"dsh-replay: error: refusing to write {what} to {output}: {reason} (use --force to overwrite)\n"


def test_the_page_may_not_replace_a_cassette_being_read(project: Path) -> None:
    before = GREETING.read_bytes()
    result = run("report", str(GREETING), "-o", str(GREETING))
    assert (result.code, result.out, result.err) == (
        2, "", _refused(str(GREETING), "it is one of the cassettes being read"))
    # the same file by another name: a link, a path through a linked folder
    Path("page.html").symlink_to(GREETING)
    Path("linked").symlink_to(GREETING.parent, target_is_directory=True)
    for output in ("page.html", "linked/greeting.yaml"):
        result = run("report", "cassettes", "-o", output)
        assert (result.code, result.err) == (2, _refused(output, "it is one of the cassettes being read"))
    assert GREETING.read_bytes() == before


def test_the_page_may_not_replace_a_golden_or_another_cassette(project: Path) -> None:
    Path("plain.yaml").write_text("interactions:\n- request: {method: GET}\nversion: 1\n", encoding="utf-8")
    Path("plain.json").write_text('{\n    "interactions": [],\n    "version": 1\n}\n', encoding="utf-8")
    kept = {path: path.read_bytes() for path in [UMLAUTS, UMLAUTS.with_name("umlauts.chunks.jsonl"),
                                                 Path("plain.yaml"), Path("plain.json"), Path("pyproject.toml")]}
    for output, reason in [
        (str(UMLAUTS), "it is a dsh_replay cassette"),  # not read by this report, a cassette all the same
        ("cassettes/my-provider/umlauts.chunks.jsonl", "it is a golden"),
        ("new.chunks.jsonl", "a .chunks.jsonl file is read as a golden"),
        ("plain.yaml", "it is a vcrpy cassette"),
        ("plain.json", "it is a vcrpy cassette"),
        ("pyproject.toml", "it is pyproject.toml, read for the routes"),
    ]:
        result = run("report", str(GREETING), "-o", output)
        assert (result.code, result.out, result.err) == (2, "", _refused(output, reason))
    assert {path: path.read_bytes() for path in kept} == kept
    assert not Path("new.chunks.jsonl").exists()


def test_other_yaml_files_and_force_are_written(project: Path) -> None:
    Path("notes.yaml").write_text("title: not a cassette\n", encoding="utf-8")
    result = run("report", str(GREETING), "-o", "notes.yaml")
    assert (result.code, result.err) == (0, "")
    assert Path("notes.yaml").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    result = run("report", str(GREETING), "-o", str(UMLAUTS), "--force")
    assert (result.code, result.err) == (0, "")
    assert UMLAUTS.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
