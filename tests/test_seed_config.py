from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from dsh_replay import ConfigError, LlmRegistry, load_plugins

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

PLUGIN = '''
from dataclasses import dataclass
from collections.abc import AsyncIterator
from dsh_replay import LlmAdapter

CALLS = []

class _Adapter(LlmAdapter):
    def __init__(self, api_key):
        self.api_key = api_key
    async def stream(self, options) -> AsyncIterator:
        return
        yield

@dataclass(frozen=True)
class Config:
    api_key: str
    providers: list[str]
    timeout: float = 30.0
    region: str | None = None

name = "fake-plugin"
inject = ["llm"]

def apply(ctx, config):
    CALLS.append(config)
    ctx.llm.register_adapter(config.providers, _Adapter(config.api_key))
'''


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    module_name = f"fake_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module_name}.py").write_text(PLUGIN)
    monkeypatch.setattr("sys.dont_write_bytecode", True)
    return tmp_path


def _write(folder: Path, body: str) -> Path:
    module = next(folder.glob("fake_plugin_*.py")).stem
    path = folder / "dsh.yml"
    path.write_text(textwrap.dedent(body).replace("MODULE", module))
    return path


def test_the_example_plugin_registers_both_routes() -> None:
    ctx = load_plugins(EXAMPLES / "dsh.yml", environ={"MY_PROVIDER_API_KEY": "sk-test-abc"})
    assert ctx.llm.routes() == ["my-provider", "my-provider-backup"]
    assert ctx.llm.resolve("my-provider") is ctx.llm.resolve("my-provider-backup")
    assert ctx.llm.resolve("my-provider")._api_key == "sk-test-abc"  # type: ignore[attr-defined]


def test_apply_is_called_once_with_a_validated_config(plugin_dir: Path) -> None:
    path = _write(plugin_dir, """
        plugins:
          MODULE:
            apiKey: ${KEY}
            providers: [a, b]
            timeout: 5
    """)
    registry = LlmRegistry()
    ctx = load_plugins(path, registry=registry, environ={"KEY": "sk-test-123"})
    assert ctx.llm is registry
    import importlib
    module = importlib.import_module(next(plugin_dir.glob("fake_plugin_*.py")).stem)
    assert len(module.CALLS) == 1
    config = module.CALLS[0]
    assert (config.api_key, config.providers, config.timeout, config.region) == ("sk-test-123", ["a", "b"], 5, None)
    assert registry.routes() == ["a", "b"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("providers: [a]", "plugin 'fake-plugin': field 'apiKey' is required"),
        ("apiKey: k", "plugin 'fake-plugin': field 'providers' is required"),
        ("apiKey: k\n            providers: []", "field 'providers' must not be empty"),
        ("apiKey: k\n            providers: my-provider", "field 'providers' must be a list; got a string"),
        ("apiKey: 12\n            providers: [a]", "field 'apiKey' must be str; got int"),
        ("apiKey: k\n            providers: [a, 3]", r"field 'providers\[1\]' must be str"),
        ("apiKey: k\n            providers: [a]\n            timeout: fast", "field 'timeout' must be float"),
        ("apiKey: k\n            providers: [a]\n            colour: red", "unknown field 'colour'; known fields: apiKey, providers, region, timeout"),
        ("apiKey: ${NOT_SET_ANYWHERE}\n            providers: [a]", r"refers to \$\{NOT_SET_ANYWHERE\}, which is not set"),
        ("apiKey: ''\n            providers: [a]", "field 'apiKey' must not be empty"),
    ],
)
def test_config_errors_name_plugin_and_field(plugin_dir: Path, config: str, message: str) -> None:
    path = _write(plugin_dir, f"""
        plugins:
          MODULE:
            {config}
    """)
    registry = LlmRegistry()
    with pytest.raises(ConfigError, match=message) as excinfo:
        load_plugins(path, registry=registry, environ={})
    assert str(excinfo.value).startswith(f"{path}: plugin 'fake-plugin': ")
    assert registry.routes() == []


@pytest.mark.parametrize(
    ("value", "field", "placeholder", "problem"),
    [
        ("${MY PROVIDER", "apiKey", "${MY PROVIDER", "is not closed"),
        ("'sk-${KEY'", "apiKey", "${KEY", "is not closed"),
        ("'${KEY}-${OTHER'", "apiKey", "${OTHER", "is not closed"),
        ("'${MY PROVIDER}'", "apiKey", "${MY PROVIDER}", "does not name a variable"),
        ("'${}'", "apiKey", "${}", "does not name a variable"),
    ],
)
def test_a_bad_placeholder_is_refused(plugin_dir: Path, value: str, field: str, placeholder: str,
                                      problem: str) -> None:
    path = _write(plugin_dir, f"""
        plugins:
          MODULE:
            apiKey: {value}
            providers: [a]
    """)
    with pytest.raises(ConfigError) as excinfo:
        load_plugins(path, environ={"KEY": "k", "OTHER": "o"})
    assert str(excinfo.value).startswith(
        f"{path}: plugin 'fake-plugin': field {field!r}: placeholder {placeholder!r} in "
    )
    assert f" {problem}; write ${{NAME}} or ${{NAME:-default}}" in str(excinfo.value)


def test_a_bad_placeholder_in_a_list_names_the_field(plugin_dir: Path) -> None:
    path = _write(plugin_dir, "plugins:\n  MODULE: {apiKey: k, providers: ['${ROUTE']}\n")
    with pytest.raises(ConfigError, match=r"field 'providers': placeholder '\$\{ROUTE' in '\$\{ROUTE' is not closed"):
        load_plugins(path, environ={"ROUTE": "r"})


def test_several_placeholders_in_one_value(plugin_dir: Path) -> None:
    path = _write(plugin_dir, "plugins:\n  MODULE: {apiKey: 'sk-${A}-${B:-b}-${C:-}', providers: [a]}\n")
    ctx = load_plugins(path, environ={"A": "a"})
    assert ctx.llm.resolve("a").api_key == "sk-a-b-"  # type: ignore[attr-defined]


def test_env_default(plugin_dir: Path) -> None:
    path = _write(plugin_dir, """
        plugins:
          MODULE:
            apiKey: ${MISSING_KEY:-sk-test-default}
            providers: [a]
    """)
    ctx = load_plugins(path, environ={})
    assert ctx.llm.resolve("a").api_key == "sk-test-default"  # type: ignore[attr-defined]


def test_disabled_entry_and_labelled_instances(plugin_dir: Path) -> None:
    path = _write(plugin_dir, """
        plugins:
          MODULE:one:
            apiKey: k1
            providers: [a]
          MODULE:two:
            apiKey: k2
            providers: [b]
          ~MODULE:three:
            apiKey: k3
            providers: [c]
    """)
    ctx = load_plugins(path, environ={})
    assert ctx.llm.routes() == ["a", "b"]


def test_inject_of_an_unknown_service(plugin_dir: Path) -> None:
    source = next(plugin_dir.glob("fake_plugin_*.py"))
    source.write_text(PLUGIN.replace('inject = ["llm"]', 'inject = ["llm", "database"]'))
    path = _write(plugin_dir, """
        plugins:
          MODULE:
            apiKey: k
            providers: [a]
    """)
    with pytest.raises(ConfigError, match="inject names 'database', which this context does not provide"):
        load_plugins(path, environ={})


def test_missing_exports(plugin_dir: Path) -> None:
    source = next(plugin_dir.glob("fake_plugin_*.py"))
    source.write_text(PLUGIN.replace("def apply(ctx, config):", "def setup(ctx, config):"))
    path = _write(plugin_dir, "plugins:\n  MODULE: {apiKey: k, providers: [a]}\n")
    with pytest.raises(ConfigError, match="lacks apply"):
        load_plugins(path, environ={})


def test_duplicate_route_across_plugins(plugin_dir: Path) -> None:
    path = _write(plugin_dir, """
        plugins:
          MODULE:one: {apiKey: k, providers: [a]}
          MODULE:two: {apiKey: k, providers: [a]}
    """)
    with pytest.raises(ConfigError, match="plugin 'fake-plugin': route 'a' is already registered"):
        load_plugins(path, environ={})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("plugins: [a, b]", "expected a top-level 'plugins:' mapping"),
        ("plugins:\n  : [", "is not valid YAML"),
        ("plugins:\n  no_such_module_xyz: {}", "cannot import it"),
    ],
)
def test_bad_documents(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "dsh.yml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_plugins(path, environ={})


@pytest.mark.parametrize("key", [".x", "../x", ".x:label"])
def test_a_relative_plugin_key(tmp_path: Path, key: str) -> None:
    path = tmp_path / "dsh.yml"
    path.write_text(f"plugins:\n  {key!r}: {{}}\n")
    module = key.split(":")[0]
    with pytest.raises(ConfigError) as excinfo:
        load_plugins(path, environ={})
    assert str(excinfo.value).startswith(f"{path}: plugin {module!r}: {module!r} is not an absolute module path")


def test_a_plugin_module_that_fails_on_import(plugin_dir: Path) -> None:
    source = next(plugin_dir.glob("fake_plugin_*.py"))
    source.write_text('raise RuntimeError("boom")\n')
    path = _write(plugin_dir, "plugins:\n  MODULE: {apiKey: k, providers: [a]}\n")
    with pytest.raises(ConfigError) as excinfo:
        load_plugins(path, environ={})
    assert str(excinfo.value) == f"{path}: plugin {source.stem!r}: importing {source.stem} failed: RuntimeError: boom"
    assert isinstance(excinfo.value.__cause__, RuntimeError)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_while_importing_a_plugin_is_not_swallowed(plugin_dir: Path,
                                                               interrupt: type[BaseException]) -> None:
    next(plugin_dir.glob("fake_plugin_*.py")).write_text(f"raise {interrupt.__name__}\n")
    path = _write(plugin_dir, "plugins:\n  MODULE: {apiKey: k, providers: [a]}\n")
    with pytest.raises(interrupt):
        load_plugins(path, environ={})


def test_an_apply_that_raises(plugin_dir: Path) -> None:
    source = next(plugin_dir.glob("fake_plugin_*.py"))
    source.write_text(PLUGIN.replace("CALLS.append(config)", "raise ValueError(f'no region {config.region}')"))
    path = _write(plugin_dir, "plugins:\n  MODULE: {apiKey: k, providers: [a]}\n")
    with pytest.raises(ConfigError) as excinfo:
        load_plugins(path, environ={})
    assert str(excinfo.value) == f"{path}: plugin 'fake-plugin': apply failed: ValueError: no region None"
    assert isinstance(excinfo.value.__cause__, ValueError)


def test_a_failing_apply_takes_back_the_routes_bound_before_it(plugin_dir: Path) -> None:
    # the second entry binds route 'a' again, which the registry refuses
    path = _write(
        plugin_dir, "plugins:\n  MODULE:one: {apiKey: k, providers: [a, b]}\n  MODULE:two: {apiKey: k, providers: [a]}\n"
    )
    registry = LlmRegistry()
    load_plugins(EXAMPLES / "dsh.yml", registry=registry, environ={"MY_PROVIDER_API_KEY": "sk-test-abc"})
    with pytest.raises(ConfigError, match="route 'a' is already registered"):
        load_plugins(path, registry=registry, environ={})
    assert registry.routes() == ["my-provider", "my-provider-backup"]


def test_a_plugin_config_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "dsh.yml"
    path.write_bytes(b"plugins:\n  \xff: {}\n")
    with pytest.raises(ConfigError) as excinfo:
        load_plugins(path, environ={})
    assert str(excinfo.value) == f"plugin config {path} is not UTF-8 text: byte 0xff at offset 11; save it as UTF-8"


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("plugins: [\n", "line 2, column 1", "expected the node content, but found '<stream end>'"),
        ("plugins:\n  a: {b: 1\n  c: d: e\n", "line 3, column 4", "expected ',' or '}', but got ':'"),
        ("plugins:\n  a\x01: {}\n", "line 2, column 4", "character #x0001: special characters are not allowed"),
    ],
)
def test_invalid_yaml_names_the_file_line_and_column(tmp_path: Path, text: str, where: str, problem: str) -> None:
    path = tmp_path / "dsh.yml"
    path.write_text(text)
    with pytest.raises(ConfigError) as excinfo:
        load_plugins(path, environ={})
    assert str(excinfo.value) == f"{path} is not valid YAML ({where}): {problem}"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read plugin config"):
        load_plugins(tmp_path / "absent.yml")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"registry": {}}, "registry must be an LlmRegistry or None, got {}"),
        ({"environ": {"MY_PROVIDER_API_KEY": 5}}, "environ must be a mapping of variable names to str values"),
        ({"environ": [("MY_PROVIDER_API_KEY", "x")]}, "environ must be a mapping of variable names to str values"),
    ],
)
def test_load_plugins_arguments_of_the_wrong_kind(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match="load_plugins: " + re.escape(message)):
        load_plugins(EXAMPLES / "dsh.yml", **kwargs)  # type: ignore[arg-type]
