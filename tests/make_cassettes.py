"""Record the bundled cassettes from their scripted sources.

    python -m tests.make_cassettes [ROUTE | ROUTE/CASE ...]

``ROUTE/CASE`` records that one case only (``openai-compatible/gemini-compat-tool-call``),
leaving the route's other cassettes as they are.

For each case in ``tests/cassette_cases/<route>.py``: start the loopback
provider emulator, point the route's real adapter at it, record the exchange
with ``use_cassette(..., "rewrite")``, point the recorded URIs at the
provider's real host, then replay the cassette offline and write its golden.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from urllib.parse import urlsplit

from dsh_replay import use_cassette
from dsh_replay.adapters import BUILTIN_ROUTES, adapter_class
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.replay import replay_case, run_adapter
from dsh_replay.cassette.store import Cassette
from dsh_replay.testing import ProviderEmulator
from tests.cassette_cases import Case

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = ROOT / "cassettes"
#: a key shaped like a real one, so scrubbing is exercised on every recording
RECORDING_KEY = "sk-test-" + "R3c0rd1ngK3yF0rC4ss3tt3s"


def cases_for(route: str) -> list[Case]:
    module = importlib.import_module(f"tests.cassette_cases.{route.replace('-', '_')}")
    return list(module.CASES)


async def record(route: str, case: Case, folder: Path) -> Path:
    cls = adapter_class(route)
    real_base = (case.base_url or cls.default_base_url).rstrip("/")
    prefix = urlsplit(real_base).path
    path = folder / route / f"{case.name}.yaml"
    with ProviderEmulator() as emulator:
        emulator.add(case.method, case.path, *case.responses)
        adapter = cls(api_key=RECORDING_KEY, base_url=emulator.base_url + prefix, **case.adapter_kwargs)
        async with use_cassette(path, "rewrite", route=route, options=case.options):
            await run_adapter(adapter, case.options)
        fake_base = emulator.base_url
    cassette = Cassette.load(path)
    real = urlsplit(real_base)
    for interaction in cassette.interactions:
        interaction.request.uri = interaction.request.uri.replace(fake_base, f"{real.scheme}://{real.netloc}", 1)
        interaction.request.headers["host"] = real.netloc
        interaction.headers = [(k, v) for k, v in interaction.headers if k.lower() not in ("server", "date")]
    if case.base_url:
        cassette.metadata["base_url"] = case.base_url
    if case.adapter_kwargs:
        cassette.metadata["adapter"] = dict(case.adapter_kwargs)
    cassette.save()
    return path


def selected(targets: list[str]) -> list[tuple[str, Case]]:
    """The cases that ``ROUTE`` or ``ROUTE/CASE`` arguments name, in order; an unknown case is an error."""
    out: list[tuple[str, Case]] = []
    for target in targets:
        route, _, name = target.partition("/")
        cases = [case for case in cases_for(route) if not name or case.name == name]
        if not cases:
            known = ", ".join(case.name for case in cases_for(route))
            raise SystemExit(f"no case {name!r} for route {route!r}; its cases: {known}")
        out += [(route, case) for case in cases]
    return out


async def main(targets: list[str]) -> int:
    table = RouteTable.load()
    failed = 0
    for route, case in selected(targets):
        path = await record(route, case, CASSETTES)
        for golden in path.parent.glob(f"{case.name}*.chunks.jsonl"):
            golden.unlink()
        result = await replay_case(path, table, update_golden=True)
        failed += not result.ok
        print(f"{route:18} {case.name:32} {result.verdict}")
        if not result.ok:
            print(result.problem)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:] or list(BUILTIN_ROUTES))))
