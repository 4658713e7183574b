"""The command line's quick paths stay quick: ``--help`` and ``routes`` import
neither vcrpy nor the cassette engine nor any adapter (each command's module is
imported only when that command runs); ``check`` imports vcrpy's ``Request``
and matchers but not the rest of vcrpy (its ``VCR`` and its patches of every
HTTP client installed), which half its start-up used to be."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROBE = (
    "import io, sys\n"
    "from dsh_replay.cli.main import main\n"
    "code = main({argv!r}, out=io.StringIO(), err=io.StringIO())\n"
    "print(code)\n"
    "print(' '.join(sorted(sys.modules)))\n"
)


def imported_by(argv: list[str]) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          check=True, timeout=60)
    code, modules = done.stdout.splitlines()
    return int(code), set(modules.split())


@pytest.mark.parametrize("argv", [["--help"], ["routes"], ["--version"]])
def test_quick_paths_import_no_engine_and_no_adapter(argv: list[str]) -> None:
    code, modules = imported_by(argv)
    assert code == 0
    assert "vcr" not in modules
    assert not {m for m in modules if m.startswith("dsh_replay.cassette.")} - {"dsh_replay.cassette"}
    assert not {m for m in modules if m.startswith("dsh_replay.adapters.")} - {"dsh_replay.adapters.route_table"}


def test_top_level_help_builds_no_command_module() -> None:
    _, modules = imported_by(["--help"])
    assert not {m for m in modules if m.startswith("dsh_replay.cli.")} - {"dsh_replay.cli.main"}
    assert "httpx" not in modules


def test_a_command_imports_its_own_module_only() -> None:
    code, modules = imported_by(["diff", "--help"])
    assert code == 0
    commands = {m for m in modules if m.startswith("dsh_replay.cli.")}
    assert commands == {"dsh_replay.cli.main", "dsh_replay.cli.diff"}


#: what ``import vcr`` brings in beyond vcrpy's Request and matchers: its VCR and its patches of HTTP clients
VCR_HEAVY = ("vcr.config", "vcr.cassette", "vcr.patch", "vcr.stubs")
CASSETTE = str(Path(__file__).resolve().parents[2] / "cassettes" / "openai" / "text.yaml")


def test_check_imports_vcrpys_request_and_matchers_but_not_its_patches() -> None:
    code, modules = imported_by(["check", "-q", CASSETTE])
    assert code == 0
    assert {"vcr.request", "vcr.matchers"} <= modules  # the cassette was loaded and its request matched
    assert not {m for m in modules if m.startswith(VCR_HEAVY)}


LIGHT_THEN_FULL = (
    "import sys\n"
    "from dsh_replay.cassette.interaction import vcr_request_class\n"
    "request = vcr_request_class()\n"
    "print(' '.join(sorted(m for m in sys.modules if m.startswith({heavy!r}))))\n"
    "import vcr, vcr.request\n"
    "from vcr import VCR, use_cassette\n"
    "assert vcr.request.Request is request and vcr.Request is request, 'one vcr.request'\n"
    "assert vcr.__version__ and callable(use_cassette) and isinstance(vcr.default_vcr, VCR)\n"
    "print(' '.join(sorted(m for m in sys.modules if m.startswith({heavy!r}))))\n"
    "try:\n"
    "    vcr.not_a_name\n"
    "except AttributeError:\n"
    "    print('AttributeError')\n"
)


def test_vcrpys_request_comes_light_and_the_rest_of_vcrpy_on_first_use() -> None:
    done = subprocess.run([sys.executable, "-c", LIGHT_THEN_FULL.format(heavy=VCR_HEAVY)], capture_output=True,
                          text=True, check=True, timeout=60)
    light, full, missing = done.stdout.splitlines()
    assert light == ""
    assert {"vcr.config", "vcr.cassette", "vcr.patch"} <= set(full.split())
    assert missing == "AttributeError"


def test_lazy_package_names_resolve_and_unknown_names_fail() -> None:
    import dsh_replay

    assert dsh_replay.use_cassette.__name__ == "use_cassette"
    assert set(dsh_replay.__all__) <= set(dir(dsh_replay))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        dsh_replay.not_a_name  # noqa: B018


REPLAY_IN_PYTEST = '''
import sys

HEAVY = {heavy!r}


async def test_replay(dsh_replay):
    from dsh_replay import GenerateOptions, Message
    from dsh_replay.adapters import OpenAIChatAdapter

    chunks = await dsh_replay.stream(OpenAIChatAdapter(api_key="sk-test-0123456789abcdef", base_url="http://127.0.0.1:9/v1"),
                                     GenerateOptions(model="m", messages=[Message(role="user", content="hi")]))
    assert chunks
    assert {{"vcr.request", "vcr.matchers"}} <= set(sys.modules)
    assert not [m for m in sys.modules if m.startswith(HEAVY)]
'''


def test_a_pytest_replay_imports_vcrpys_matchers_without_its_patches(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_replay.testing import ProviderEmulator, ScriptedResponse

    monkeypatch.delenv("CI", raising=False)  # the plugin records nothing under CI

    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_light=REPLAY_IN_PYTEST.format(heavy=VCR_HEAVY))
    body = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(body))
        source = (pytester.path / "test_light.py").read_text().replace("http://127.0.0.1:9/v1", f"{emu.base_url}/v1")
        (pytester.path / "test_light.py").write_text(source)
        recorded = pytester.runpytest_subprocess("--record-mode=once", "-p", "no:recording")
    recorded.assert_outcomes(passed=1)
    replayed = pytester.runpytest_subprocess("-p", "no:recording")
    replayed.assert_outcomes(passed=1)
