"""``dsh-replay check``'s CI outputs: -q, --junit-xml, --github, and the progress line."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from dsh_replay.cli.check_outputs import Progress, github_annotations, junit_xml

from .conftest import run

GREETING = Path("cassettes/my-provider/greeting.yaml")
UMLAUTS_GOLDEN = Path("cassettes/my-provider/umlauts.chunks.jsonl")


def _break_umlauts(project: Path) -> None:
    """The second chunk line of the umlauts golden no longer matches the adapter."""
    golden = project / UMLAUTS_GOLDEN
    golden.write_bytes(golden.read_bytes().replace(b" aus K\xc3\xb6ln", b" aus Bonn"))


def _first_changed_line(project: Path) -> int:
    lines = (project / UMLAUTS_GOLDEN).read_bytes().split(b"\n")
    return next(n for n, line in enumerate(lines, start=1) if b"Bonn" in line)


def test_quiet_prints_only_the_summary_when_all_pass(project: Path) -> None:
    result = run("check", "-q", "cassettes")
    assert result.code == 0
    assert result.out == "2 case(s), 12 chunks: 2 passed, 0 failed\n"


def test_quiet_prints_only_the_failing_rows_and_the_summary(project: Path) -> None:
    _break_umlauts(project)
    result = run("check", "--quiet", "cassettes")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].split() == ["case", "route", "fragments", "chunks", "blocks", "verdict", "time"]
    assert re.match(r"umlauts +my-provider +3 +6 +1 +FAIL golden differs +\d+ ms$", lines[2]), result.out
    assert lines[3:] == ["", "2 case(s), 12 chunks: 1 passed, 1 failed"]
    assert "greeting" not in result.out


def test_junit_xml_has_one_testcase_per_case_and_the_failure(project: Path) -> None:
    _break_umlauts(project)
    (project / "cassettes" / "my-provider" / "corrupt.yaml").write_text("dsh_replay:\n  route: [\n", encoding="utf-8")
    result = run("check", "--junit-xml", "reports/check.xml", "cassettes")
    assert result.code == 1
    root = ET.parse(project / "reports" / "check.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    cases = {(case.get("classname"), case.get("name")): case for case in suite.iter("testcase")}
    assert set(cases) == {("-", "corrupt"), ("my-provider", "greeting"), ("my-provider", "umlauts")}
    assert cases[("my-provider", "greeting")].find("failure") is None
    failure = cases[("my-provider", "umlauts")].find("failure")
    assert failure is not None
    assert failure.get("message") == "FAIL golden differs"
    assert failure.text is not None and "- {" in failure.text and "Bonn" in failure.text
    corrupt = cases[("-", "corrupt")].find("failure")
    assert corrupt is not None and "is not valid YAML" in (corrupt.text or "")
    # the table is still printed: the report is written besides it
    assert "umlauts" in result.out
    assert not list((project / "reports").glob("*.tmp*"))


def test_junit_xml_escapes_what_xml_cannot_hold_raw() -> None:
    row = {"case": 'a<b>&"c"', "route": "r", "path": "p.yaml", "ok": False, "verdict": "FAIL <x>",
           "problem": "line 1\n]]> & <tag>", "seconds": 0.5}
    root = ET.fromstring(junit_xml([row]))
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == 'a<b>&"c"'
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == "FAIL <x>" and failure.text == "line 1\n]]> & <tag>"


def test_an_unwritable_junit_path_is_refused_before_the_run(project: Path) -> None:
    (project / "taken").mkdir()
    result = run("check", "--junit-xml", "taken", "cassettes")
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        "dsh-replay: error: --junit-xml taken cannot be written: taken is a folder"
    ]


def test_github_annotations_point_at_the_first_differing_golden_line(project: Path) -> None:
    _break_umlauts(project)
    result = run("check", "--github", "-q", "cassettes")
    assert result.code == 1
    annotations = [line for line in result.out.splitlines() if line.startswith("::")]
    assert len(annotations) == 1
    line = _first_changed_line(project)
    prefix = f"::error file={UMLAUTS_GOLDEN},line={line},title=dsh-replay check%3A umlauts::FAIL golden differs%0A"
    assert annotations[0].startswith(prefix), annotations[0]
    assert "\r" not in annotations[0]


def test_github_annotations_of_a_lone_golden_use_its_line(project: Path) -> None:
    golden = project / "cassettes" / "seed" / "bad.chunks.jsonl"
    golden.parent.mkdir()
    golden.write_text('{"type":"text_delta","index":0,"text":"x"}\n', encoding="utf-8")  # no block started
    result = run("check", "--github", "-q", "cassettes")
    assert result.code == 1
    [annotation] = [line for line in result.out.splitlines() if line.startswith("::")]
    assert annotation.startswith(f"::error file={Path('cassettes/seed/bad.chunks.jsonl')},line=1,")


def test_github_escapes_data_and_properties() -> None:
    row = {"case": "a,b:c", "route": None, "path": "dir,1/x:y.yaml", "ok": False, "verdict": "FAIL 100%",
           "problem": "one\r\ntwo", "seconds": 0.0, "where": None}
    ok = dict(row, ok=True)
    assert github_annotations([row, ok]) == (
        "::error file=dir%2C1/x%3Ay.yaml,line=1,title=dsh-replay check%3A a%2Cb%3Ac::FAIL 100%25%0Aone%0D%0Atwo\n"
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_shows_done_total_rate_and_eta_on_a_terminal() -> None:
    stream, clock = _Terminal(), _Clock()
    progress = Progress(stream, 10, clock=clock, interval=0.5)
    clock.now += 1.0
    progress.update(2, "a.yaml")
    clock.now += 0.1
    progress.update(3, "b.yaml")  # within the interval: not redrawn
    clock.now += 1.0
    progress.update(4, "c.yaml")
    clock.now += 0.1
    progress.update(10, "d.yaml")  # the last one is always drawn
    progress.clear()
    assert stream.getvalue() == (
        "\r\x1b[K[2/10] 2 cases/s, ETA 4 s a.yaml"
        "\r\x1b[K[4/10] 2 cases/s, ETA 3 s c.yaml"
        "\r\x1b[K[10/10] 5 cases/s d.yaml"
        "\r\x1b[K"
    )


def test_progress_never_appears_off_a_terminal() -> None:
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(stream, 3, clock=clock)
    for done in (1, 2, 3):
        clock.now += 1
        progress.update(done, "x")
    progress.clear()
    assert stream.getvalue() == ""


def test_progress_on_a_closed_stream_is_silent() -> None:
    stream = io.StringIO()
    stream.close()
    progress = Progress(stream, 3)  # a closed stream's isatty() raises ValueError
    progress.update(1, "x")
    progress.clear()


def test_piped_check_writes_no_progress(project: Path) -> None:
    result = run("check", "-q", "cassettes")
    assert result.err == ""


def test_github_annotations_after_json_go_to_stderr(project: Path) -> None:
    _break_umlauts(project)
    result = run("check", "--github", "--json", "cassettes")
    assert result.code == 1
    assert json.loads(result.out)["failed"] == 1
    assert result.err.startswith(f"::error file={UMLAUTS_GOLDEN},line=")


def test_junit_xml_may_not_replace_a_cassette_or_golden(project: Path) -> None:
    lone = project / "lone" / "solo.chunks.jsonl"
    lone.parent.mkdir()
    lone.write_bytes((project / UMLAUTS_GOLDEN).read_bytes())
    (project / "report.xml").symlink_to(project / GREETING)
    kept = {path: path.read_bytes() for path in (GREETING, UMLAUTS_GOLDEN, lone)}
    for output, reason in [
        (str(GREETING), "it is one of the cassettes being read"),
        ("report.xml", "it is one of the cassettes being read"),  # a link to one
        ("lone/solo.chunks.jsonl", "it is one of the goldens being read"),
        (str(UMLAUTS_GOLDEN), "it is a golden"),
    ]:
        result = run("check", "--junit-xml", output, "cassettes", "lone")
        assert (result.code, result.out) == (2, "")  # refused before any case was replayed
        assert result.err == (f"dsh-replay: error: refusing to write JUnit XML to {output}: {reason} "
                              "(use --force to overwrite)\n")
    assert {path: path.read_bytes() for path in kept} == kept
    result = run("check", "--junit-xml", str(UMLAUTS_GOLDEN), "--force", "cassettes/my-provider/greeting.yaml")
    assert result.code == 0, result.err
    assert ET.parse(project / UMLAUTS_GOLDEN).getroot().tag == "testsuites"
