"""The README and the pages of docs/ cannot rot: their commands, snippets and tables are checked here."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from dsh_replay import check_chunk_sequence, load_golden
from dsh_replay.cli.main import build_parser

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
         for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
BLOCKS = [(page, lang, body) for page, text in PAGES.items()
          for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S)]


def blocks(language: str) -> list[str]:
    """The snippets in ``language``, README first, then docs/ in name order."""
    return [body for _, lang, body in BLOCKS if lang == language]


def test_the_readme_stays_a_first_hour_read() -> None:
    # the reference lives in docs/; the README is what a newcomer reads first
    assert len(README.splitlines()) <= 400
    for page in ("protocol", "workflow", "cassettes", "clients", "pytest", "cli", "adapters", "performance",
                 "architecture", "import", "other-languages", "coverage", "ci"):
        assert f"(docs/{page}.md)" in README, f"the README does not link docs/{page}.md"


def test_documented_commands_and_their_options_exist(pytestconfig: pytest.Config) -> None:
    """Every ``dsh-replay``, ``pytest`` and ``make`` line in a shell snippet names what exists."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    commands = subparsers.choices  # type: ignore[attr-defined]
    makefile = (ROOT / "Makefile").read_text()
    checked = 0
    for page, lang, body in BLOCKS:
        if lang in ("sh", "bash", ""):
            lines = body.splitlines()
        elif lang == "yaml":  # the commands a CI workflow runs (``run:``), folded lines joined
            lines = _run_steps(yaml.safe_load(body))
        else:
            continue
        for line in lines:
            words = line.split("#", 1)[0].replace("&&", "\n").replace("|", "\n").split("\n")
            for command in (w.split() for w in words):
                if not command:
                    continue
                if command[0] == "dsh-replay":
                    assert command[1] in commands, f"{page}: {line}"
                    known = {o for a in commands[command[1]]._actions for o in a.option_strings}
                    flags = {w.split("=")[0] for w in command[2:] if w.startswith("-") and w != "-"}
                    assert flags <= known, f"{page}: {line}: unknown {sorted(flags - known)}"
                    checked += 1
                elif command[0] == "pytest" or command[:3] == [".venv/bin/python", "-m", "pytest"]:
                    for flag in (w.split("=")[0] for w in command if w.startswith("--")):
                        name = flag.lstrip("-").replace("-", "_")
                        assert pytestconfig.getoption(name, default="missing") != "missing", f"{page}: {line}"
                    checked += 1
                elif command[0] == "make":
                    for target in command[1:]:
                        if not target.startswith("-"):
                            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{page}: {line}"
                    checked += 1
    assert checked >= 20


def _run_steps(value: object) -> list[str]:
    """The ``run:`` commands of a parsed GitHub Actions workflow, in document order."""
    if isinstance(value, dict):
        return [text for key, item in value.items()
                for text in ([item] if key == "run" and isinstance(item, str) else _run_steps(item))]
    if isinstance(value, list):
        return [text for item in value for text in _run_steps(item)]
    return []


def test_opens_with_the_two_fresh_machine_commands() -> None:
    first_block = README.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands == ["make check", "make test"]
    assert README.index("```sh") < 40  # right under the title
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^check: ", makefile, re.M) and re.search(r"^test: ", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_python_snippets_are_valid_python() -> None:
    assert blocks("python")
    for body in blocks("python"):
        ast.parse(body)


def test_toml_and_yaml_snippets_parse() -> None:
    for body in blocks("toml"):
        assert tomllib.loads(body)
    for body in blocks("yaml"):
        assert isinstance(yaml.safe_load(body), dict)


def test_jsonl_snippets_are_valid_streams() -> None:
    snippets = [body for page, lang, body in BLOCKS if lang == "jsonl" and page == "docs/protocol.md"]
    assert len(snippets) >= 2
    example = [orjson.loads(line) for line in snippets[0].splitlines()]
    assert check_chunk_sequence(example) == []
    golden = load_golden(snippets[1].encode())
    assert golden.raised is not None and check_chunk_sequence(golden.chunks, complete=False) == []
    for body in blocks("jsonl"):  # every other one parses, line by line
        assert all(orjson.loads(line) for line in body.splitlines())


@pytest.mark.parametrize(("page", "heading"), [("README.md", "## Command line"), ("docs/cli.md", "# Command line")])
def test_every_documented_command_exists(page: str, heading: str) -> None:
    section = PAGES[page].split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)[ `]", section, re.M))
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert documented == set(subparsers.choices)  # type: ignore[attr-defined]


def test_every_documented_option_exists(pytestconfig: pytest.Config) -> None:
    section = README.split("## pytest options and marker", 1)[1].split("\n## ", 1)[0]
    options = set(re.findall(r"`(--[a-z-]+)", section))
    fixtures = {"dsh_replay_config", "dsh_replay_record_mode", "dsh_replay_emulator"}
    inis = set(re.findall(r"`(dsh_replay_\w+)`", section)) - fixtures
    assert options == {"--record-mode", "--update-golden", "--prune-unused", "--replay-fragmentation", "--replay-speed",
                       "--dsh-shard", "--dsh-strict-coverage"}
    for option in options:
        assert pytestconfig.getoption(option.lstrip("-").replace("-", "_"), default="missing") != "missing"
    for name in inis:
        pytestconfig.getini(name)  # raises ValueError for an unknown ini name
    for name in fixtures:
        assert f"`{name}`" in section
        # a fixture of one of our plugins (the emulator's has an entry point of its own)
        assert any(name in getattr(plugin, "__dict__", {}) for plugin in pytestconfig.pluginmanager.get_plugins()
                   if getattr(plugin, "__name__", "").startswith("dsh_replay."))


def test_every_dependency_is_explained() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = [re.split(r"[<>=;\[ ]", dep)[0] for dep in pyproject["project"]["dependencies"]]
    names += [re.split(r"[<>=;\[ ]", dep)[0] for dep in pyproject["project"]["optional-dependencies"]["dev"]]
    table = README.split("## Dependencies", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in names if name not in table and name != "types-PyYAML"]
    assert missing == []
