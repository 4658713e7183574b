"""The built wheel works outside this repository: a fresh environment, the main job, an example's tests.

The wheel is built as ``make dist`` builds it and installed into a new virtual
environment in a temporary folder, with no index (nothing is downloaded): the
dependencies come from this environment's site-packages, added to the new one's
path, where this project's own editable install is not importable (its ``.pth``
is not read there). So what runs is what the wheel holds — the package, its
``py.typed``, its console script and its pytest entry points.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", out, ROOT, cwd=ROOT)
    [built] = out.glob("dsh_replay-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A new environment outside the repository with the wheel installed; returns its bin folder."""
    home = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=False).create(home)
    bin_dir = home / ("Scripts" if os.name == "nt" else "bin")
    site = Path(_run(bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                     cwd=home).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(sys.executable, "-m", "pip", "--python", bin_dir / "python", "install", "--no-index", "--no-deps",
         "--quiet", wheel, cwd=home)
    return bin_dir


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_wheel_is_what_the_fresh_environment_imports(fresh: Path) -> None:
    where = _run(fresh / "python", "-c", "import dsh_replay, pathlib; print(pathlib.Path(dsh_replay.__file__).parent)",
                 cwd=fresh, env=_clean_env()).stdout.strip()
    assert Path(where).is_relative_to(fresh.parent)
    assert not Path(where).is_relative_to(ROOT)
    assert (Path(where) / "py.typed").is_file()


def test_the_installed_command_runs_the_main_job(fresh: Path) -> None:
    result = _run(fresh / "dsh-replay", "check", ROOT / "cassettes", cwd=fresh, env=_clean_env())
    assert "failed" in result.stdout and " 0 failed" in result.stdout


@pytest.mark.parametrize("example", ["cohere", "acme_adapter"])
def test_an_example_project_passes_against_the_installed_wheel(fresh: Path, tmp_path: Path, example: str) -> None:
    project = tmp_path / example
    shutil.copytree(ROOT / "examples" / example, project, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    result = _run(fresh / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                  cwd=project, env=_clean_env())
    assert " passed" in result.stdout and "failed" not in result.stdout
