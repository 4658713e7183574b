"""Shared set-up of the CLI tests: a project folder with a configured route and recorded cassettes.

The route is the seed's example plugin (``examples/my_llm_adapter.py``, a tiny
NDJSON provider), registered as ``my-provider`` through ``[tool.dsh_replay.routes]``
in the project's ``pyproject.toml``. Its cassettes are recorded once per session
against a ``ProviderEmulator`` with ``use_cassette(..., "once")`` and copied into
each test's folder.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import io
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import dsh_replay
from dsh_replay import GenerateOptions, Message, dump_jsonl
from dsh_replay.cassette.replay import run_adapter
from dsh_replay.cli.main import main
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SEED_GOLDEN = ROOT / "cassettes" / "seed" / "example.chunks.jsonl"
ROUTE = "my-provider"
PYPROJECT = '[tool.dsh_replay.routes]\n"my-provider" = "my_llm_adapter:_MyAdapter"\n'


def ndjson(*texts: str, stop: str = "end", usage: tuple[int, int] = (3, 2)) -> bytes:
    """A body of the example provider: one line per text piece, then the done line."""
    lines = [f'{{"text": "{text}"}}\n' for text in texts]
    lines.append(f'{{"done": true, "stop": "{stop}", "usage": {{"in": {usage[0]}, "out": {usage[1]}}}}}\n')
    return "".join(lines).encode()


#: case name -> (prompt, body the emulated provider streams)
CASES: dict[str, tuple[str, bytes]] = {
    "greeting": ("say hello", ndjson("Hello", ", world")),
    "umlauts": ("greet in German", ndjson("Grüße", " aus Köln")),
}


def options(prompt: str) -> GenerateOptions:
    return GenerateOptions(model="m1", messages=[Message(role="user", content=prompt)])


@dataclass
class Result:
    code: int
    out: str
    err: str


def run(*argv: str) -> Result:
    """``dsh-replay ARGV`` in-process; a traceback on stderr is always a failure."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    result = Result(code, out.getvalue(), err.getvalue())
    assert "Traceback" not in result.err
    return result


def _load_example_adapter() -> type:
    module = sys.modules.get("my_llm_adapter")
    if module is None:
        spec = importlib.util.spec_from_file_location("my_llm_adapter", EXAMPLES / "my_llm_adapter.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["my_llm_adapter"] = module
        spec.loader.exec_module(module)
    return module._MyAdapter  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``my-provider/<case>.yaml`` + golden for every case, recorded against the emulator."""
    folder = tmp_path_factory.mktemp("recorded") / ROUTE
    adapter_class = _load_example_adapter()

    async def record(emu: ProviderEmulator, name: str, prompt: str) -> None:
        cassette = folder / f"{name}.yaml"
        async with dsh_replay.use_cassette(cassette, "once", route=ROUTE, options=options(prompt)) as session:
            session.cassette.metadata["base_url"] = emu.base_url
            outcome = await run_adapter(adapter_class("sk-test-0123456789abcdefghijkl", base_url=emu.base_url),
                                        options(prompt))
        assert outcome.raised is None and not outcome.violations
        cassette.with_name(f"{name}.chunks.jsonl").write_bytes(dump_jsonl(outcome.chunks))

    for name, (prompt, body) in CASES.items():
        with ProviderEmulator() as emu:
            emu.add("POST", "/v1/generate", streaming(body))
            asyncio.run(record(emu, name, prompt))
    return folder.parent


def streaming(body: bytes) -> ScriptedResponse:
    """The example provider's response: one NDJSON line per fragment, a few ms apart."""
    return ScriptedResponse.streaming(body, content_type="application/x-ndjson", delay=0.002)


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI runs this suite with CI=true; tests that need it set it themselves
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorded: Path) -> Iterator[Path]:
    """A project folder (the cwd) whose pyproject routes ``my-provider``, with ``cassettes/`` recorded."""
    monkeypatch.chdir(tmp_path)
    # RouteTable puts the project folder on sys.path; give the list back afterwards
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    shutil.copy(EXAMPLES / "my_llm_adapter.py", tmp_path / "my_llm_adapter.py")
    shutil.copytree(recorded, tmp_path / "cassettes")
    yield tmp_path


def file_digests(folder: Path) -> dict[str, str]:
    """Each file under ``folder`` (by its relative path) and the SHA-256 of its bytes: what a command must not touch."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}
