"""A YAML alias bomb is refused at once, with the file and the line, by every command that loads a cassette.

libyaml composes an alias as the node its anchor names, shared; building the
data from those nodes visits the shared node once per alias, so the nine
lines of :data:`BOMB` stand for 9**9 strings. Each entry point runs in a child
process with a time limit and an address-space limit: on a loader that
expands the bomb, the test fails instead of the machine running out of memory.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from vcr.request import Request as VcrRequest

from dsh_replay import GenerateOptions, Message
from dsh_replay.cassette import yaml_file as reading
from dsh_replay.cassette.store import Cassette, Interaction
from dsh_replay.errors import CassetteError
from dsh_replay.protocol.options import ToolDefinition

GUARD = 20.0  # seconds: a hang guard, never a timing assertion (a refusal takes milliseconds)
MEMORY = 3 << 30  # bytes of address space for a guarded run: a bomb that goes off fails it, not the machine

_LEVELS = "abcdefghi"
#: the report's repro: under 400 bytes that stand for 387,420,489 strings
BOMB = "".join([
    "dsh_replay: {format: 1, route: openai}\n",
    'a: &a ["x","x","x","x","x","x","x","x","x"]\n',
    *(f"{name}: &{name} [{','.join(['*' + below] * 9)}]\n" for below, name in itertools.pairwise(_LEVELS)),
    "interactions: [*i]\nversion: 1\n",
])

CASE = Path("cassettes", "openai", "bomb.yaml")  # relative: the commands name a file as they were given it

_LIMIT = f"""\
try:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, ({MEMORY}, {MEMORY}))
except (ImportError, ValueError, OSError):  # no such limit here: the time limit still holds
    pass
"""


def assert_refused(message: str, path: Path | str = CASE) -> None:
    """The refusal names the file, the first alias and its anchor, and says why no cassette has one."""
    assert f"cassette {path}: line 3 has the YAML alias *a (the anchor &a of line 2); " in message, message
    assert "cassettes written by dsh-replay or vcrpy never use aliases" in message
    assert "so this file was edited by hand or is hostile" in message


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / CASE).parent.mkdir(parents=True)
    (tmp_path / CASE).write_text(BOMB, encoding="utf-8")
    return tmp_path


def guarded(body: str, *argv: str, cwd: Path) -> dict[str, Any]:
    """Run ``body`` in a child Python with the limits; it prints its findings as JSON on its last line."""
    script = _LIMIT + "import json, sys\n" + textwrap.dedent(body)
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    process = subprocess.Popen([sys.executable, "-c", script, *argv], cwd=cwd, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)  # check -n's workers too
        else:
            process.kill()
        process.communicate()
        pytest.fail(f"still loading after {GUARD:.0f} s: the aliases were expanded, not refused")
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.splitlines()[-1])


LOADING = """
from pathlib import Path
from dsh_replay.errors import CassetteError
from {module} import {name}
try:
    {call}
    print(json.dumps({{"raised": None}}))
except CassetteError as exc:
    print(json.dumps({{"raised": "CassetteError", "message": str(exc), "path": exc.path}}))
"""

CLI = """
import io
from dsh_replay.cli.main import main
out, err = io.StringIO(), io.StringIO()
code = main(sys.argv[1:], out=out, err=err)
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}))
"""


@pytest.mark.parametrize(("module", "name", "call"), [
    ("dsh_replay.cassette.yaml_file", "load_yaml", "load_yaml(Path(sys.argv[1]).read_bytes(), sys.argv[1])"),
    ("dsh_replay.cassette.store", "Cassette", "Cassette.load(sys.argv[1])"),
    ("dsh_replay.server.replay", "CassetteServer", "CassetteServer.load([Path(sys.argv[1])])"),
], ids=["load_yaml", "Cassette.load", "CassetteServer.load"])
def test_loading_refuses_the_bomb(project: Path, module: str, name: str, call: str) -> None:
    found = guarded(LOADING.format(module=module, name=name, call=call), str(CASE), cwd=project)
    assert found["raised"] == "CassetteError"
    assert found["path"] == str(CASE)
    assert_refused(found["message"])


@pytest.mark.parametrize("jobs", [[], ["-n", "2"]], ids=["check", "check -n 2"])
def test_check_fails_the_case_and_says_why(project: Path, jobs: list[str]) -> None:
    found = guarded(CLI, "check", *jobs, "cassettes", cwd=project)
    assert found["code"] == 1, found
    row = next(line for line in found["out"].splitlines() if line.startswith("bomb "))
    assert "FAIL CassetteError" in row
    assert "1 case(s), 0 chunks: 0 passed, 1 failed" in found["out"]
    assert_refused(found["out"])


@pytest.mark.parametrize("command", ["show", "serve"])
def test_show_and_serve_stop_with_a_one_line_error(project: Path, command: str) -> None:
    found = guarded(CLI, command, str(CASE), cwd=project)
    assert (found["code"], found["out"]) == (2, ""), found
    assert found["err"].startswith("dsh-replay: error: ") and found["err"].count("\n") == 1
    assert_refused(found["err"])


def test_report_shows_a_failed_section(project: Path) -> None:
    found = guarded(CLI, "report", "cassettes", "-o", "report.html", cwd=project)
    assert found["code"] == 0, found
    page = (project / "report.html").read_text(encoding="utf-8")
    assert "FAIL CassetteError" in page
    assert "line 3 has the YAML alias *a" in page and "cassettes written by dsh-replay or vcrpy never use aliases" in page


def test_a_collected_cassette_fails_its_item(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndsh_replay_collect = true\nasyncio_mode = strict\n"
                     "asyncio_default_fixture_loop_scope = function\nfilterwarnings = error\n")
    pytester.makeconftest(_LIMIT)
    (pytester.path / CASE).parent.mkdir(parents=True)
    (pytester.path / CASE).write_text(BOMB, encoding="utf-8")
    result = pytester.runpytest_subprocess(timeout=GUARD)
    result.assert_outcomes(failed=1)
    assert_refused(result.stdout.str(), pytester.path / CASE)


# -- the loader itself ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "where"), [
    (b"a: &x 1\nb: *x\n", "line 2 has the YAML alias *x (the anchor &x of line 1)"),  # a scalar's alias
    (b"loop: &l [1, *l]\n", "line 1 has the YAML alias *l (the anchor &l of line 1)"),  # a recursive one
    (b"base: &b {x: 1}\nmerged: {<<: *b, y: 2}\n", "line 2 has the YAML alias *b"),  # in a merge key
    (b"a: !!set &s {x}\nb: *s\n", "line 2 has the YAML alias *s"),  # under a tag left to the stock constructor
    (b"a: *nowhere\n", "is not valid YAML (line 1, column 4)"),  # an alias of no anchor: libyaml's own error
    (b'a: "**bold** and *italic*"\nb: &c [a *b]\nd: [*c]\n', "line 3 has the YAML alias *c (the anchor &c of line 2)"),
])
def test_every_alias_is_refused_with_its_line(text: bytes, where: str) -> None:
    with pytest.raises(CassetteError) as refused:
        reading.load_yaml(text, "case.yaml")
    assert where in str(refused.value)


def test_an_alias_after_a_big_body_is_refused_with_the_line_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    body = b"data: x\n\n" * (reading.BIG_BODY // 8)
    interaction = Interaction(request=VcrRequest("POST", "http://127.0.0.1:9/v1", b"{}", {}), status=200,
                              reason="OK", headers=[], body=body, fragments=[(0.0, len(body))])
    Cassette(path=path, interactions=[interaction], metadata={"route": "openai"}).save()
    text = path.read_bytes()
    assert b"string: |" in text  # the body is read past the YAML parser
    lines = text.count(b"\n")
    path.write_bytes(text + b"extra: &e [1]\nagain: *e\n")
    with pytest.raises(CassetteError) as refused:
        Cassette.load(path)
    assert f"cassette {path}: line {lines + 2} has the YAML alias *e (the anchor &e of line {lines + 1})" in str(refused.value)


def _nested(depth: int) -> bytes:
    return b"a: " + b"[" * depth + b"x" + b"]" * depth + b"\n"


def test_nesting_is_capped() -> None:
    deepest = _nested(reading.MAX_DEPTH - 1)  # and the mapping around it
    assert reading.load_yaml(deepest) == yaml.load(deepest, Loader=reading._Loader)
    with pytest.raises(CassetteError) as refused:
        reading.load_yaml(_nested(reading.MAX_DEPTH), "deep.yaml")
    assert str(refused.value).startswith(
        f"cassette deep.yaml: line 1 nests collections more than {reading.MAX_DEPTH} deep; cassettes written by "
        "dsh-replay or vcrpy nest fewer than ten, so this file was edited by hand or is hostile")


@pytest.mark.parametrize(("text", "may"), [
    (b"a: b\n", False),
    (b"body: '**bold** x*y \"*q\" _*u'\n", False),  # inside words, after "*" or a quote: never an alias
    (b"b: *x\n", True),
    (b"*x\n", True),
    (b"[a,*x]\n", True),
    (b"{a:*x}\n", True),
    (b"a: say *italic* once\n", True),  # it could be one: the nodes are walked, at a small cost
    ("b: *x\n".encode("utf-16"), True),
])
def test_only_a_text_that_may_hold_an_alias_has_its_scalars_checked(text: bytes, may: bool) -> None:
    assert reading._may_have_alias(text) is may


def test_a_value_shared_in_memory_is_written_twice_and_loads_back(tmp_path: Path) -> None:
    # a tool reused in a follow-up: the two option dicts share the schema's inner dicts
    tool = ToolDefinition(name="weather", parameters={"type": "object", "properties": {"city": {"type": "string"}},
                                                      "required": ["city"]})
    options = GenerateOptions(model="m", messages=[Message(role="user", content="hi")], tools=[tool])
    path = tmp_path / "shared.yaml"
    cassette = Cassette(path=path, metadata={"route": "openai", "options": options.to_json(),
                                             "follow_ups": [options.to_json()]})
    cassette.save()
    assert not any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(path.read_bytes(), Loader=reading._Loader))
    assert Cassette.load(path).metadata == cassette.metadata
