"""``check``'s own replay keeps no chunks, and judges every case as ``replay_case`` does, byte for byte."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.golden import golden_path_for
from dsh_replay.cassette.replay import AdapterCache, CaseResult, replay_case
from dsh_replay.cli.check_replay import StreamedOutcome, replay_streamed

from .big_case import ROOT

BUNDLED = sorted((ROOT / "cassettes").rglob("*.yaml"))


def both(path: Path, *, update: bool = False) -> tuple[CaseResult, CaseResult]:
    routes = RouteTable.load()

    async def replay() -> tuple[CaseResult, CaseResult]:
        adapters = AdapterCache(routes)
        try:
            kept = await replay_case(path, routes, update_golden=update, adapters=adapters)
            streamed = await replay_streamed(path, routes, update_golden=update, adapters=adapters)
        finally:
            await adapters.aclose()
        return kept, streamed

    return asyncio.run(replay())


def judged(result: CaseResult) -> tuple[object, ...]:
    return (result.route, result.fragments, result.chunks, result.blocks, result.golden, result.verdict,
            result.problem, result.short, result.where, [(type(o.raised), str(o.raised)) for o in result.outcomes],
            [o.violations for o in result.outcomes], [o.golden_bytes() for o in result.outcomes])


def test_every_bundled_case_is_judged_alike_and_no_chunk_is_kept() -> None:
    # the bundled cases hold error paths too: goldens that end with a raised line
    assert len(BUNDLED) > 50
    for path in BUNDLED:
        kept, streamed = both(path)
        assert judged(streamed) == judged(kept), path
        assert streamed.ok, (path, streamed.problem)
        assert all(isinstance(o, StreamedOutcome) and o.chunks == [] for o in streamed.outcomes)


@pytest.mark.parametrize("change", ["differs", "missing"])
def test_failing_cases_read_the_same(tmp_path: Path, change: str) -> None:
    folder = tmp_path / "openai"
    shutil.copytree(ROOT / "cassettes" / "openai", folder)
    path = folder / "parallel-tool-calls.yaml"
    golden = golden_path_for(path)
    if change == "differs":
        golden.write_bytes(golden.read_bytes().replace(b'"index":1', b'"index":7', 1))
    else:
        golden.unlink()
    kept, streamed = both(path)
    assert not streamed.ok
    assert judged(streamed) == judged(kept)


def test_update_writes_the_same_golden(tmp_path: Path) -> None:
    folder = tmp_path / "anthropic"
    shutil.copytree(ROOT / "cassettes" / "anthropic", folder)
    path = folder / "tool-call.yaml"
    golden = golden_path_for(path)
    expected = golden.read_bytes()
    golden.unlink()
    routes = RouteTable.load()
    result = asyncio.run(replay_streamed(path, routes, update_golden=True))
    assert (result.golden, result.ok, golden.read_bytes()) == ("written", True, expected)
