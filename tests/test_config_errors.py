"""Bad configuration is one ``ConfigError`` naming the file and the entry, never a traceback.

``[tool.dsh_replay.routes]`` in pyproject.toml through ``RouteTable.load``, then every kind of bad
input (pyproject and plugin YAML) through ``dsh-replay routes``, the way users meet it.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from dsh_replay import ConfigError
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cli.main import main

ROUTES = "[tool.dsh_replay.routes]\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder, the cwd; ``sys.path`` (which RouteTable extends) is given back afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    return tmp_path


def module_name(project: Path) -> str:
    """A module name no other test imports, so that sys.modules never serves a stale one."""
    return f"mod_{project.name.replace('-', '_')}"


def load_error(project: Path, pyproject: bytes) -> ConfigError:
    (project / "pyproject.toml").write_bytes(pyproject)
    with pytest.raises(ConfigError) as excinfo:
        RouteTable.load(pyproject=project / "pyproject.toml")
    return excinfo.value


@pytest.mark.parametrize(
    ("toml", "table"),
    [
        ('tool = "x"\n', "[tool]"),
        ('[tool]\ndsh_replay = "x"\n', "[tool.dsh_replay]"),
        ("[tool.dsh_replay]\nroutes = 3\n", "[tool.dsh_replay.routes]"),
    ],
)
def test_a_pyproject_key_that_is_not_a_table(project: Path, toml: str, table: str) -> None:
    message = str(load_error(project, toml.encode()))
    assert message.startswith(f"{project / 'pyproject.toml'}: {table} must be a table; got ")
    assert '[tool.dsh_replay.routes] "route" = "package.module:AdapterClass"' in message


def test_a_pyproject_that_is_not_utf8(project: Path) -> None:
    message = str(load_error(project, b'[tool.dsh_replay.routes]\n"my" = "\xff"\n'))
    assert message == f"{project / 'pyproject.toml'} is not UTF-8 text: byte 0xff at offset 33; save it as UTF-8"


def test_a_pyproject_that_is_not_toml(project: Path) -> None:
    message = str(load_error(project, b"a = \n"))
    assert message == f"{project / 'pyproject.toml'} is not valid TOML: Invalid value (at line 1, column 5)"


@pytest.mark.parametrize(
    ("source", "error", "failure"),
    [
        ('raise RuntimeError("boom")\n', RuntimeError, "RuntimeError: boom"),
        ("def (\n", SyntaxError, "SyntaxError: invalid syntax"),
    ],
)
def test_a_route_module_that_fails_on_import(project: Path, source: str, error: type[Exception],
                                             failure: str) -> None:
    name = module_name(project)
    (project / f"{name}.py").write_text(source)
    exc = load_error(project, f'{ROUTES}"my" = "{name}:X"\n'.encode())
    where = f"{project / 'pyproject.toml'} [tool.dsh_replay.routes]: route 'my'"
    assert str(exc).startswith(f"{where}: importing {name} failed: {failure}")
    assert "\n" not in str(exc)
    assert isinstance(exc.__cause__, error)  # kept for whoever catches it in code


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_while_importing_a_route_is_not_swallowed(project: Path,
                                                              interrupt: type[BaseException]) -> None:
    name = module_name(project)
    (project / f"{name}.py").write_text(f"raise {interrupt.__name__}\n")
    (project / "pyproject.toml").write_text(f'{ROUTES}"my" = "{name}:X"\n')
    with pytest.raises(interrupt):
        RouteTable.load(pyproject=project / "pyproject.toml")


def test_a_relative_route_module(project: Path) -> None:
    message = str(load_error(project, f'{ROUTES}"my" = ".x:Adapter"\n'.encode()))
    assert message.startswith(f"{project / 'pyproject.toml'} [tool.dsh_replay.routes]: route 'my': "
                              "'.x' is not an absolute module path")


APPLY_FAILS = """
from dataclasses import dataclass
name = "failing"
inject = ["llm"]
@dataclass
class Config:
    pass
def apply(ctx, config):
    raise ValueError("nope")
"""
PLUGIN_YML = b"plugins:\n  MOD: {}\n"
ROUTE_TOML = f'{ROUTES}"my" = "MOD:X"\n'.encode()
PROVIDER_PLUGIN = (Path(__file__).resolve().parents[1] / "examples" / "my_llm_adapter.py").read_bytes()


def provider_yml(api_key: str) -> bytes:
    return f"plugins:\n  MOD:\n    apiKey: {api_key}\n    providers: [p]\n".encode()


@pytest.mark.parametrize(
    ("files", "plugins", "message"),
    [
        ({"pyproject.toml": b'tool = "x"\n'}, False, "pyproject.toml: [tool] must be a table; got 'x'."),
        ({"pyproject.toml": b'[tool]\ndsh_replay = "x"\n'}, False,
         "pyproject.toml: [tool.dsh_replay] must be a table; got 'x'."),
        ({"pyproject.toml": b"\xff"}, False, "pyproject.toml is not UTF-8 text: byte 0xff at offset 0; save it as UTF-8"),
        ({"pyproject.toml": ROUTE_TOML, "MOD.py": b'raise RuntimeError("boom")\n'}, False,
         "pyproject.toml [tool.dsh_replay.routes]: route 'my': importing MOD failed: RuntimeError: boom"),
        ({"pyproject.toml": ROUTE_TOML, "MOD.py": b"def (\n"}, False,
         "pyproject.toml [tool.dsh_replay.routes]: route 'my': importing MOD failed: SyntaxError: invalid syntax"),
        ({"bad.yml": b"plugins:\n  ../x: {}\n"}, True, "bad.yml: plugin '../x': '../x' is not an absolute module path"),
        ({"bad.yml": b"plugins:\n  \xff: {}\n"}, True,
         "plugin config bad.yml is not UTF-8 text: byte 0xff at offset 11; save it as UTF-8"),
        ({"bad.yml": PLUGIN_YML, "MOD.py": b'raise RuntimeError("boom")\n'}, True,
         "bad.yml: plugin 'MOD': importing MOD failed: RuntimeError: boom"),
        ({"bad.yml": PLUGIN_YML, "MOD.py": APPLY_FAILS.encode()}, True,
         "bad.yml: plugin 'failing': apply failed: ValueError: nope"),
        ({"bad.yml": b"plugins: [\n"}, True,
         "bad.yml is not valid YAML (line 2, column 1): expected the node content, but found '<stream end>'"),
        ({"bad.yml": provider_yml("${MY PROVIDER"), "MOD.py": PROVIDER_PLUGIN}, True,
         "bad.yml: plugin 'my-llm-adapter': field 'apiKey': placeholder '${MY PROVIDER' in '${MY PROVIDER' "
         "is not closed"),
    ],
    ids=["tool", "dsh_replay", "pyproject-utf8", "route-raises", "route-syntax", "plugin-relative",
         "plugin-utf8", "plugin-raises", "apply-raises", "yaml", "placeholder"],
)
def test_the_cli_reports_bad_configuration_in_one_line(project: Path, files: dict[str, bytes], plugins: bool,
                                                      message: str) -> None:
    name = module_name(project)
    for file, content in files.items():
        (project / file.replace("MOD", name)).write_bytes(content.replace(b"MOD", name.encode()))
    out, err = io.StringIO(), io.StringIO()
    code = main(["routes", *(["--plugins", "bad.yml"] if plugins else [])], out=out, err=err)
    assert (code, out.getvalue()) == (2, "")
    assert err.getvalue().startswith(f"dsh-replay: error: {message.replace('MOD', name)}")
    assert err.getvalue().count("\n") == 1
