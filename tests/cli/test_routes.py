"""``dsh-replay routes``: the built-in routes, then the ones configured in pyproject or a plugin YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.adapters import BUILTIN_ROUTES

from .conftest import EXAMPLES, run


def listing(output: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in output.splitlines())


def test_built_in_routes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no pyproject here
    result = run("routes")
    assert result.code == 0
    assert listing(result.out) == {route: f"built-in ({cls})" for route, (_, cls, _) in BUILTIN_ROUTES.items()}
    assert result.out.splitlines()[0].startswith("anthropic  ")  # sorted


def test_pyproject_routes(project: Path) -> None:
    routes = listing(run("routes").out)
    assert routes["my-provider"] == "pyproject.toml: my_llm_adapter:_MyAdapter"
    assert routes["openai"] == "built-in (OpenAIChatAdapter)"


def test_the_hosts_table_is_listed_after_the_routes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.dsh_replay.hosts]\n"vllm.internal:8000" = "openai-compatible"\n"llm-proxy.internal" = "openai"\n',
        encoding="utf-8")
    result = run("routes")
    assert result.code == 0
    routes, hosts = result.out.split("\n\n")
    assert listing(routes).keys() == BUILTIN_ROUTES.keys()
    assert hosts.splitlines() == ["hosts ([tool.dsh_replay.hosts] in pyproject.toml):",
                                  "llm-proxy.internal  openai", "vllm.internal:8000  openai-compatible"]


def test_plugin_routes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MY_PROVIDER_API_KEY", raising=False)  # the YAML has a default
    result = run("routes", "--plugins", str(EXAMPLES / "dsh.yml"))
    assert result.code == 0
    routes = listing(result.out)
    assert routes["my-provider"] == routes["my-provider-backup"] == f"plugin {EXAMPLES / 'dsh.yml'}"


@pytest.mark.parametrize(
    ("yaml", "message"),
    [
        ("plugins:\n  my_llm_adapter:\n    apiKey: k\n    providers: my-provider\n",
         "plugin 'my-llm-adapter': field 'providers' must be a list; got a string ('my-provider')"),
        ("plugins:\n  my_llm_adapter:\n    providers: [p]\n", "plugin 'my-llm-adapter': field 'apiKey' is required"),
        ("plugins:\n  no_such_plugin: {}\n", "plugin 'no_such_plugin': cannot import it"),
        ("plugins: [\n", "is not valid YAML"),
    ],
)
def test_a_bad_plugin_yaml_names_the_plugin_and_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, yaml: str,
                                                      message: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    (tmp_path / "dsh.yml").write_text(yaml, encoding="utf-8")
    result = run("routes", "--plugins", "dsh.yml")
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith("dsh-replay: error: ")
    assert message in result.err


def test_a_missing_plugin_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("routes", "--plugins", "absent.yml")
    assert (result.code, result.err) == (2, "dsh-replay: error: cannot read plugin config absent.yml: No such file or directory\n")


def test_a_route_that_names_no_class(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.dsh_replay.routes]\n"x" = "my_llm_adapter"\n', encoding="utf-8")
    result = run("routes")
    assert result.code == 2
    assert "route 'x' must name 'package.module:AdapterClass'; got 'my_llm_adapter'" in result.err
