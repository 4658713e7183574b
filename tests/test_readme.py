"""The README cannot rot: its commands, snippets and tables are checked here."""

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
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, re.S)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCKS if lang == language]


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
    snippets = blocks("jsonl")
    assert len(snippets) >= 2
    example = [orjson.loads(line) for line in snippets[0].splitlines()]
    assert check_chunk_sequence(example) == []
    golden = load_golden(snippets[1].encode())
    assert golden.raised is not None and check_chunk_sequence(golden.chunks, complete=False) == []


def test_every_documented_command_exists() -> None:
    documented = set(re.findall(r"^\| `(\w+)[ `]", README.split("## Command line", 1)[1].split("\n## ", 1)[0], re.M))
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert documented == set(subparsers.choices)  # type: ignore[attr-defined]


def test_every_documented_option_exists(pytestconfig: pytest.Config) -> None:
    section = README.split("## pytest options and marker", 1)[1].split("\n## ", 1)[0]
    options = set(re.findall(r"`(--[a-z-]+)", section))
    fixtures = {"dsh_replay_config", "dsh_replay_record_mode"}
    inis = set(re.findall(r"`(dsh_replay_\w+)`", section)) - fixtures
    assert options == {"--record-mode", "--update-golden", "--prune-unused", "--replay-fragmentation", "--replay-speed"}
    for option in options:
        assert pytestconfig.getoption(option.lstrip("-").replace("-", "_"), default="missing") != "missing"
    for name in inis:
        pytestconfig.getini(name)  # raises ValueError for an unknown ini name
    for name in fixtures:
        assert f"`{name}`" in section
        assert name in pytestconfig.pluginmanager.get_plugin("dsh_replay").__dict__  # a fixture of the plugin


def test_every_dependency_is_explained() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = [re.split(r"[<>=;\[ ]", dep)[0] for dep in pyproject["project"]["dependencies"]]
    names += [re.split(r"[<>=;\[ ]", dep)[0] for dep in pyproject["project"]["optional-dependencies"]["dev"]]
    table = README.split("## Dependencies", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in names if name not in table and name != "types-PyYAML"]
    assert missing == []
