"""``dsh-replay check``: the main job — replay every cassette, check rules and goldens, print a table."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_replay.cli.main import main

from .conftest import SEED_GOLDEN, run
from .unlistable import AS_ROOT, refuse_listing


def table(output: str) -> list[str]:
    """The output with the time column dropped (it is the only thing that varies between runs)."""
    lines = output.splitlines()
    assert all(re.search(r"  \d+ ms$", line) for line in lines[2:lines.index("")]), output
    return [re.sub(r"  +(time|-+|\d+ ms)$", "", line) for line in lines]


def test_a_clean_tree_passes_with_a_stable_table(project: Path) -> None:
    shutil.copytree(SEED_GOLDEN.parent, project / "cassettes" / "seed")
    result = run("check", "cassettes")
    assert result.code == 0, result.out
    assert table(result.out) == [
        "case      route        fragments  chunks  blocks  verdict",
        "--------  -----------  ---------  ------  ------  -----------------------------------------",
        "greeting  my-provider  3          6       1       ok",
        "umlauts   my-provider  3          6       1       ok",
        "example   -            0          9       2       golden only: rules hold, nothing replayed",
        "",
        "3 case(s), 21 chunks: 2 passed, 0 failed, 1 golden(s) only (rules checked, nothing replayed)",
    ]
    assert result.err == ""  # progress is shown on a terminal only


def test_every_kind_of_broken_case_fails_with_its_file_and_what_to_do(project: Path) -> None:
    cassettes = project / "cassettes" / "my-provider"
    greeting = (cassettes / "greeting.yaml").read_text(encoding="utf-8")
    # a golden that no longer matches the adapter's chunks
    golden = cassettes / "umlauts.chunks.jsonl"
    golden.write_bytes(golden.read_bytes().replace(b" aus K\xc3\xb6ln", b" aus Bonn"))
    # corrupt YAML, an unknown route, a missing golden, a lone golden that breaks P10
    (cassettes / "corrupt.yaml").write_text("dsh_replay:\n  route: my-provider\ninteractions: [\n", encoding="utf-8")
    (cassettes / "elsewhere.yaml").write_text(greeting.replace("route: my-provider", "route: my-providr"), encoding="utf-8")
    (cassettes / "no-golden.yaml").write_text(greeting, encoding="utf-8")
    lines = SEED_GOLDEN.read_text(encoding="utf-8").splitlines()
    lines[-1] = '{"type":"finish","reason":{"kind":"stop"}}'
    (project / "cassettes" / "seed").mkdir()
    (project / "cassettes" / "seed" / "bad-finish.chunks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")

    result = run("check", "cassettes")
    assert result.code == 1
    assert table(result.out)[:9] == [
        "case        route        fragments  chunks  blocks  verdict",
        "----------  -----------  ---------  ------  ------  -------------------",
        "corrupt     -            0          0       0       FAIL CassetteError",
        "elsewhere   my-providr   3          0       0       FAIL ConfigError",
        "greeting    my-provider  3          6       1       ok",
        "no-golden   my-provider  3          6       1       FAIL golden missing",
        "umlauts     my-provider  3          6       1       FAIL golden differs",
        "bad-finish  -            0          9       2       FAIL P10 (line 9)",
        "",
    ]
    assert "6 case(s), 27 chunks: 1 passed, 5 failed" in result.out
    problems = result.out.split("failed\n", 1)[1]
    corrupt = cassettes / "corrupt.yaml"
    assert f"cassette {Path('cassettes/my-provider/corrupt.yaml')} is not valid YAML (line 4, column 1); fix it or re-record it" in problems
    assert "unknown route 'my-providr'. Did you mean 'my-provider'? Known routes: " in problems
    assert "golden cassettes/my-provider/no-golden.chunks.jsonl is missing; write it with --update-golden (dsh-replay check --update)" in problems
    assert '- {"type":"text-delta","index":0,"text":" aus Bonn"}' in problems
    assert '+ {"type":"text-delta","index":0,"text":" aus Köln"}' in problems
    assert "accept them with: dsh-replay check --update" in problems
    assert "cassettes/seed/bad-finish.chunks.jsonl:9: P10 finish at position 8 has kind 'stop'" in problems
    assert corrupt.exists()  # nothing is deleted or rewritten without --update


def test_json_output_has_the_counts(project: Path) -> None:
    (project / "cassettes" / "my-provider" / "umlauts.chunks.jsonl").unlink()
    result = run("check", "--json", "cassettes")
    assert result.code == 1
    data = json.loads(result.out)
    assert (data["passed"], data["failed"]) == (1, 1)
    rows = {row["case"]: row for row in data["cases"]}
    assert rows["greeting"] | {"seconds": 0} == {
        "case": "greeting", "route": "my-provider", "path": str(Path("cassettes/my-provider/greeting.yaml")),
        "fragments": 3, "chunks": 6, "blocks": 1, "ok": True, "verdict": "ok", "problem": "", "seconds": 0,
    }
    assert rows["umlauts"]["ok"] is False
    assert rows["umlauts"]["verdict"] == "FAIL golden missing"
    assert "umlauts.chunks.jsonl is missing" in rows["umlauts"]["problem"]


def test_update_writes_a_missing_golden_and_fixes_a_differing_one(project: Path) -> None:
    folder = project / "cassettes" / "my-provider"
    missing, differing = folder / "greeting.chunks.jsonl", folder / "umlauts.chunks.jsonl"
    expected = {missing: missing.read_bytes(), differing: differing.read_bytes()}
    missing.unlink()
    differing.write_bytes(b'{"type":"finish","reason":{"kind":"stop"}}\n')
    assert run("check", "cassettes").code == 1

    result = run("check", "--update", "cassettes")
    assert result.code == 0, result.out
    assert "greeting  my-provider  3          6       1       ok, golden written" in result.out
    assert "umlauts   my-provider  3          6       1       ok, golden updated" in result.out
    assert {path: path.read_bytes() for path in expected} == expected
    assert run("check", "cassettes").code == 0


def test_update_is_refused_in_ci(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    golden = project / "cassettes" / "my-provider" / "greeting.chunks.jsonl"
    golden.unlink()
    monkeypatch.setenv("CI", "true")
    result = run("check", "--update", "cassettes")
    assert result.code == 2
    assert "check --update is refused because CI is set" in result.err
    assert not golden.exists()


@pytest.mark.parametrize("fragmentation", ["single", "bytes", "random:7"])
def test_goldens_hold_whatever_the_fragmentation(project: Path, fragmentation: str) -> None:
    result = run("check", "--fragmentation", fragmentation, "cassettes")
    assert result.code == 0, result.out
    assert "2 case(s), 12 chunks: 2 passed, 0 failed" in result.out


def test_single_files_and_cassettes_without_metadata(project: Path) -> None:
    folder = project / "cassettes" / "my-provider"
    text = (folder / "greeting.yaml").read_text(encoding="utf-8")
    plain = folder / "plain.yaml"
    plain.write_text(text[text.index("interactions:"):], encoding="utf-8")  # a plain vcrpy cassette

    # in a folder it is skipped, and the summary says so and why
    result = run("check", "cassettes")
    assert result.code == 0
    assert "2 passed, 0 failed; skipped 1 YAML file(s) without dsh_replay metadata" in result.out
    # named on the command line it is a case, which fails with what to do
    result = run("check", str(plain), str(folder / "greeting.yaml"))
    assert result.code == 1
    assert f"cassette {plain} has no dsh_replay route/options metadata" in result.out
    assert "record it through the dsh_replay fixture or `dsh-replay record`" in result.out


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda text: "", "expected a mapping with an 'interactions' list"),  # emptied
        (lambda text: "- a list\n", "expected a mapping with an 'interactions' list"),
        (lambda text: text[text.index("interactions:"):], "is a plain vcrpy cassette with a golden beside it"),
    ],
    ids=["emptied", "not-a-mapping", "metadata-cut-off"],
)
def test_a_cassette_damaged_beside_its_golden_fails_its_row(project: Path, damage: object, problem: str) -> None:
    cassette = project / "cassettes" / "my-provider" / "greeting.yaml"
    assert cassette.with_suffix(".chunks.jsonl").is_file()
    cassette.write_text(damage(cassette.read_text(encoding="utf-8")), encoding="utf-8")  # type: ignore[operator]
    result = run("check", "cassettes")
    assert result.code == 1
    assert re.search(r"^greeting +- +0 +0 +0 +FAIL CassetteError", result.out, re.M), result.out
    assert "golden only" not in result.out and "skipped" not in result.out
    assert problem in result.out


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("route: my-provider", "route: 5", "dsh_replay.route must be a route name, not int (5)"),
        ("route: my-provider", "route: [my-provider, other]", "dsh_replay.route must be a route name, not list"),
        ("  options:\n", "  options: x\n  old_options:\n", "dsh_replay.options must be a mapping, not str ('x')"),
    ],
    ids=["route-int", "route-list", "options-str"],
)
def test_metadata_of_the_wrong_type_is_named_not_called_missing(project: Path, old: str, new: str, problem: str) -> None:
    cassette = project / "cassettes" / "my-provider" / "greeting.yaml"
    text = cassette.read_text(encoding="utf-8")
    assert old in text
    cassette.write_text(text.replace(old, new, 1), encoding="utf-8")
    result = run("check", str(cassette))
    assert result.code == 1
    assert f"cassette {cassette}: {problem}" in result.out
    assert "has no dsh_replay route/options metadata" not in result.out


def test_a_cassette_in_another_encoding_beside_its_golden_is_replayed(project: Path) -> None:
    cassette = project / "cassettes" / "my-provider" / "greeting.yaml"
    cassette.write_bytes(cassette.read_text(encoding="utf-8").encode("utf-16"))  # with its byte order mark
    result = run("check", "cassettes")
    assert result.code == 0, result.out
    assert re.search(r"^greeting +my-provider .* ok", result.out, re.M), result.out


def test_metadata_anywhere_in_the_file_makes_a_case(project: Path) -> None:
    # A cassette rewritten by another YAML tool may keep its keys in another order;
    # it is still a case, so its golden is compared, not only checked by the rules.
    cassette = project / "cassettes" / "my-provider" / "greeting.yaml"
    text = cassette.read_text(encoding="utf-8")
    start = text.index("interactions:")
    cassette.write_text(text[start:] + text[:start], encoding="utf-8")
    golden = cassette.with_name("greeting.chunks.jsonl")
    golden.write_text(golden.read_text(encoding="utf-8").replace("Hello", "Hallo"), encoding="utf-8")
    result = run("check", "cassettes")
    assert result.code == 1
    assert re.search(r"greeting\s+my-provider\s+3\s+6\s+1\s+FAIL", result.out), result.out
    assert "skipped" not in result.out


def test_a_folder_named_like_a_cassette_is_not_a_case(project: Path) -> None:
    (project / "cassettes" / "odd.yaml").mkdir()
    result = run("check", "cassettes")
    assert result.code == 0, result.out
    assert "2 case(s)" in result.out and "skipped" not in result.out


def test_a_golden_that_cannot_be_read_fails_its_case_only(project: Path) -> None:
    golden = project / "cassettes" / "my-provider" / "greeting.chunks.jsonl"
    golden.unlink()
    golden.mkdir()
    result = run("check", "cassettes")
    assert result.code == 1
    assert re.search(r"greeting\s+my-provider\s+3\s+6\s+1\s+FAIL", result.out), result.out
    assert re.search(r"umlauts\s+my-provider\s+3\s+6\s+1\s+ok", result.out), result.out
    assert f"golden {Path('cassettes/my-provider/greeting.chunks.jsonl')} cannot be read (Is a directory)" in result.out


def test_update_does_not_turn_a_finished_golden_into_a_crash(project: Path) -> None:
    cassette = project / "cassettes" / "my-provider" / "greeting.yaml"
    text = cassette.read_text(encoding="utf-8")
    assert '{"text": "Hello"}' in text
    cassette.write_text(text.replace('{"text": "Hello"}', '{"text": "Hello"]'), encoding="utf-8")  # same length
    golden = cassette.with_name("greeting.chunks.jsonl")
    before = golden.read_bytes()
    result = run("check", "--update", "cassettes")
    assert result.code == 1
    assert re.search(r"greeting\s+my-provider\s+.*golden kept", result.out), result.out
    assert "was not updated: the adapter now raises" in result.out
    assert "where the golden finished; if that error is intended, delete the golden" in result.out
    assert golden.read_bytes() == before


def test_missing_paths_and_empty_folders(project: Path) -> None:
    result = run("check", "nowhere")
    assert (result.code, result.out) == (2, "")
    assert result.err == "dsh-replay: error: nowhere: no such file or folder\n"
    (project / "loop").symlink_to(project / "loop")
    result = run("check", "loop")
    assert (result.code, result.err) == (2, "dsh-replay: error: loop: a link to nothing that exists (its target is "
                                            "missing, or the links make a loop)\n")
    result = run("check", os.devnull)
    assert (result.code, result.err) == (2, f"dsh-replay: error: {os.devnull}: not a file or a folder (a device, a pipe "
                                            "or a socket); name cassette files or folders\n")
    (project / "empty").mkdir()
    result = run("check", "empty")
    assert result.code == 1
    assert result.out == "no cassettes with dsh_replay metadata and no goldens under empty\n"


def test_a_broken_route_configuration_is_one_line(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.dsh_replay.routes]\n"my-provider" = "no_such_module:Adapter"\n')
    result = run("check", "cassettes")
    assert result.code == 2
    assert result.err.startswith("dsh-replay: error: pyproject.toml [tool.dsh_replay.routes]: route 'my-provider': "
                                 "cannot import 'no_such_module'")
    assert result.err.count("\n") == 1


def test_routes_from_a_plugin_yaml(project: Path) -> None:
    (project / "pyproject.toml").unlink()
    assert run("check", "cassettes").code == 1  # my-provider is unknown without configuration
    result = run("check", "--plugins", str(Path(__file__).parents[2] / "examples" / "dsh.yml"), "cassettes")
    assert result.code == 0, result.out
    assert "2 case(s), 12 chunks: 2 passed, 0 failed" in result.out


def test_piped_output_is_plain_and_repeatable(project: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    runs = [subprocess.run([sys.executable, "-m", "dsh_replay", "check", "cassettes"], capture_output=True,
                           text=True, env=env, check=False) for _ in range(2)]
    assert [done.returncode for done in runs] == [0, 0]
    assert [done.stderr for done in runs] == ["", ""]  # no progress line when stderr is not a terminal
    assert "\x1b" not in runs[0].stdout
    assert table(runs[0].stdout) == table(runs[1].stdout)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_goes_to_stderr_and_is_cleared(project: Path) -> None:
    out, err = io.StringIO(), _Terminal()
    assert main(["check", "cassettes"], out=out, err=err) == 0
    # the first case is always drawn; the last one always, whatever the redraw interval skipped
    first = re.escape(str(Path("cassettes/my-provider/greeting.yaml")))
    last = re.escape(str(Path("cassettes/my-provider/umlauts.yaml")))
    assert re.fullmatch(rf"\r\x1b\[K\[1/2\][^\r]* {first}(\r\x1b\[K\[2/2\][^\r]* {last})\r\x1b\[K", err.getvalue()), \
        err.getvalue()
    assert "\x1b" not in out.getvalue()


WARM_UP_PROBE = """
import sys

import dsh_replay.cli.check as check
from dsh_replay.cli.main import main
from dsh_replay.wire.transport import _tls_context

starts = []
replay = check.replay_streamed


async def probe(path, *args, **kwargs):
    # the state when each replay starts: the dry run's, then each row's
    starts.append({"httpcore": "httpcore" in sys.modules, "TLS context": _tls_context.cache_info().currsize,
                   "anthropic adapter": "dsh_replay.adapters.anthropic" in sys.modules,
                   "vcrpy": "vcr.request" in sys.modules})
    return await replay(path, *args, **kwargs)


check.replay_streamed = probe
code = main(["check", "cassettes"])
print(code, len(starts), starts[1])
"""


def test_start_up_is_paid_before_the_first_row_is_timed(project: Path) -> None:
    # A fresh interpreter, as a user runs it: the first row must not carry the imports
    # (~200 ms) that every later row gets for free. The row's
    # replay is the last one of its cassette (a dry run before it may pay them).
    bundled = SEED_GOLDEN.parents[1] / "anthropic"
    (project / "cassettes" / "anthropic").mkdir()
    for name in ("text.yaml", "text.chunks.jsonl"):
        shutil.copy(bundled / name, project / "cassettes" / "anthropic" / name)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    done = subprocess.run([sys.executable, "-c", WARM_UP_PROBE], capture_output=True, text=True, env=env, check=False)
    # the built-in adapters replay through one offline client: no connection pool, no TLS context
    assert done.stdout.splitlines()[-1] == (
        "0 4 {'httpcore': False, 'TLS context': 0, 'anthropic adapter': True, 'vcrpy': True}"
    ), done.stdout + done.stderr


def test_a_folder_that_cannot_be_listed_fails_as_a_row_naming_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # os.walk passes over a folder it cannot list unless asked; check said "2 passed" and exit 0
    locked = Path("cassettes", "locked")
    shutil.copytree(project / "cassettes" / "my-provider", locked)
    refuse_listing(monkeypatch, locked)
    result = run("check", "cassettes")
    assert result.code == 1
    assert table(result.out) == [
        "case      route        fragments  chunks  blocks  verdict",
        "--------  -----------  ---------  ------  ------  ---------------",
        "greeting  my-provider  3          6       1       ok",
        "umlauts   my-provider  3          6       1       ok",
        "locked    -            0          0       0       FAIL unreadable",
        "",
        "3 case(s), 12 chunks: 2 passed, 1 failed",
        "",
        f"{locked}:",
        f"cannot read folder {locked}: Permission denied",
    ]
    rows = json.loads(run("check", "--json", str(locked)).out)["cases"]
    assert [(row["path"], row["ok"], row["problem"]) for row in rows] == [
        (str(locked), False, f"cannot read folder {locked}: Permission denied")]


def test_find_cases_refuses_a_folder_it_cannot_list(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what serve and report read their cassettes with: a missed folder is an error there too
    from dsh_replay.cli.check import find_cases
    from dsh_replay.errors import DshReplayError

    refuse_listing(monkeypatch, Path("cassettes", "my-provider"))
    with pytest.raises(DshReplayError, match=re.escape(
            f"cannot read folder {Path('cassettes', 'my-provider')}: Permission denied")):
        find_cases(["cassettes"])


@pytest.mark.skipif(AS_ROOT, reason="chmod 000 does not stop root")
def test_a_folder_without_read_permission_fails_as_a_row(project: Path) -> None:
    locked = project / "cassettes" / "my-provider"
    locked.chmod(0)
    try:
        result = run("check", "cassettes")
    finally:
        locked.chmod(0o755)
    assert result.code == 1
    assert result.out.endswith(f"\n{Path('cassettes', 'my-provider')}:\n"
                               f"cannot read folder {Path('cassettes', 'my-provider')}: Permission denied\n")


def test_goldens_alone_and_unreadable_cassettes_have_no_route(project: Path) -> None:
    shutil.copytree(SEED_GOLDEN.parent, project / "cassettes" / "seed")
    (project / "cassettes" / "my-provider" / "corrupt.yaml").write_text("dsh_replay:\n  route: [\n", encoding="utf-8")
    result = run("check", "--json", "cassettes")
    routes = {row["case"]: row["route"] for row in json.loads(result.out)["cases"]}
    assert routes == {"corrupt": None, "greeting": "my-provider", "umlauts": "my-provider", "example": None}
    assert re.search(r"^example +- +0 +9 +2 +golden only: rules hold, nothing replayed", run("check", "cassettes").out,
                     re.M)


def test_goldens_alone_are_not_counted_as_passed_and_a_run_of_only_them_fails(project: Path, tmp_path: Path) -> None:
    shutil.copytree(SEED_GOLDEN.parent, project / "cassettes" / "seed")
    mixed = run("check", "cassettes")
    assert mixed.code == 0
    assert mixed.out.splitlines()[-1].endswith(
        ": 2 passed, 0 failed, 1 golden(s) only (rules checked, nothing replayed)")
    report = json.loads(run("check", "--json", "cassettes").out)
    assert (report["passed"], report["failed"], report["golden_only"]) == (2, 0, 1)
    junit = tmp_path / "check.xml"
    run("check", "--junit-xml", str(junit), "cassettes")
    assert 'skipped="1"' in junit.read_text() and '<skipped message="golden only: rules hold, nothing replayed"' in junit.read_text()

    alone = run("check", str(project / "cassettes" / "seed"))
    assert alone.code == 1
    assert alone.out.splitlines()[-2].endswith(": 0 passed, 0 failed, 1 golden(s) only (rules checked, nothing replayed)")
    assert alone.out.splitlines()[-1].startswith("nothing was replayed: ")


def test_cases_are_found_in_path_order_without_following_linked_folders(tmp_path: Path) -> None:
    from dsh_replay.cli.check_cases import _files_under

    for name in ("a/b.yaml", "a-b/c.yml", "a/z/y.yaml", "b.yaml", "a/b.chunks.jsonl", "a-b/c.chunks.jsonl",
                 "a.chunks.jsonl/inside.txt", "A.yaml", "a/.hidden.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x: 1\n")
    (tmp_path / "linked").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "nowhere.yaml")
    (tmp_path / "odd.yaml").mkdir()
    unreadable: list[tuple[Path, str]] = []
    yamls, goldens = _files_under(tmp_path, unreadable)
    assert unreadable == []
    # what the three globs gave before, in Path order
    assert yamls == sorted(p for suffix in ("*.yaml", "*.yml") for p in tmp_path.rglob(suffix) if p.is_file())
    assert goldens == sorted(tmp_path.rglob("*.chunks.jsonl"))
    assert [p.relative_to(tmp_path).as_posix() for p in yamls] == [
        "A.yaml", "a/.hidden.yaml", "a/b.yaml", "a/z/y.yaml", "a-b/c.yml", "b.yaml"]
    assert tmp_path / "a.chunks.jsonl" in goldens  # a folder named like a golden: its row says it cannot be read


def test_a_golden_line_that_is_not_json_is_named_not_diffed(project: Path) -> None:
    golden = project / "cassettes" / "my-provider" / "greeting.chunks.jsonl"
    lines = golden.read_text(encoding="utf-8").split("\n")
    lines[2] = lines[2][:-3]  # a line cut short, as a bad merge leaves it
    golden.write_text("\n".join(lines), encoding="utf-8")
    result = run("check", "cassettes")
    assert result.code == 1
    assert f"golden {golden.relative_to(project)}: line 3 is not valid JSON (" in result.out
    assert "differs from the adapter's chunks" not in result.out
