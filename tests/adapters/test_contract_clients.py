"""The contract over every client the cassette engine intercepts: each bundled cassette, replayed through
its route's mapping with the HTTP done by aiohttp and by requests, yields its golden byte for byte,
whatever the fragmentation (the recorded cuts, one byte at a time, random cuts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay import use_cassette
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.golden import golden_path_for
from dsh_replay.cassette.replay import case_options, run_adapter
from dsh_replay.cassette.store import Cassette
from tests.adapters.other_clients import OVER

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
PATHS = sorted(path for path in CASSETTES.glob("*/*.yaml"))
ROUTES = RouteTable.load()


@pytest.mark.asyncio
@pytest.mark.parametrize("client", sorted(OVER))
@pytest.mark.parametrize("fragmentation", ["recorded", "bytes", "random:7"])
@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_a_bundled_cassette_replays_to_its_golden_over_the_client(
    path: Path, fragmentation: str, client: str
) -> None:
    cassette = Cassette.load(path)
    route, calls, base_url = case_options(cassette)
    drop_reasoning = bool((cassette.metadata.get("adapter") or {}).get("drop_reasoning", False))
    adapter = OVER[client](ROUTES.adapter(route, base_url=base_url, drop_reasoning=drop_reasoning))
    async with use_cassette(path, "none", fragmentation=fragmentation, cassette=cassette) as session:
        outcomes = [await run_adapter(adapter, options) for options in calls]
    assert session.unplayed == []
    for call, outcome in enumerate(outcomes, start=1):
        assert outcome.violations == []
        assert outcome.golden_bytes() == golden_path_for(path, call).read_bytes()
