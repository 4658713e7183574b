"""A test's cassette path, built on text for speed, is the path pathlib's operators give."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dsh_replay.pytest_plugin.marker import MarkerOptions, cassette_path_for

NAMES = ["case", "case.yaml", "case.yml", "case.", "a.b", ".hidden", "sub/case", "sub//case.yaml", "./case",
         "sub/./x.yml", "/abs/x", "/abs/x.yaml", "a..yaml", "x.YAML", "s/t.json", "Class.test_x[1-2]"]


def by_pathlib(module: Path, folder: Path | None, name: str) -> Path:
    """The rule as pathlib spells it: ``<folder or module's cassettes/>/<module stem>/<name>[.yaml]``."""
    base = (folder or module.parent / "cassettes") / module.stem
    path = Path(name) if Path(name).is_absolute() else base / name
    return path if path.suffix in (".yaml", ".yml") else path.with_name(path.name + ".yaml")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("folder", [None, Path("/data/cassettes"), Path("relative/dir")])
def test_the_path_is_the_one_pathlib_builds(name: str, folder: Path | None) -> None:
    module = Path("/repo/tests/test_api.py")
    item: Any = SimpleNamespace(path=module, name="test_x", cls=None)
    settings: Any = SimpleNamespace(cassette_dir=folder)
    built = cassette_path_for(item, settings, MarkerOptions(cassette=name))
    assert built == by_pathlib(module, folder, name)
    assert str(built) == str(by_pathlib(module, folder, name))


def test_a_derived_name_is_the_test_name_made_file_safe() -> None:
    item: Any = SimpleNamespace(path=Path("/repo/tests/test_api.py"), name="test_x[a/b:c]", cls=None)
    settings: Any = SimpleNamespace(cassette_dir=None)
    assert cassette_path_for(item, settings, MarkerOptions()) == Path("/repo/tests/cassettes/test_api/test_x[a-b-c].yaml")
