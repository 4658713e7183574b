"""Every bundled cassette, for every route: present, secret-free, and replaying to its golden
whatever the network fragmentation (SPEC §11: the chunks never depend on where the body is cut)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_replay.adapters import BUILTIN_ROUTES
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.replay import replay_case
from dsh_replay.cassette.secrets import find_secrets
from dsh_replay.cassette.store import Cassette
from tests.make_cassettes import RECORDING_KEY

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
COMMON = {
    "text", "tool-call", "parallel-tool-calls", "tool-call-no-args", "text-then-tool-call",
    "non-ascii-split", "error-mid-stream", "rate-limited", "length-stop",
}
#: per route: the cases the adapter issues ask for, under the route's own names where they differ
REQUIRED = {
    "openai": COMMON,
    "openai-compatible": COMMON | {"reasoning"},
    "deepseek": COMMON | {"reasoning"},
    "openai-responses": COMMON | {"reasoning"},
    "anthropic": COMMON - {"error-mid-stream", "length-stop"} | {"error-event", "max-tokens", "thinking"},
    "gemini": COMMON - {"error-mid-stream", "length-stop"} | {"error-event", "max-tokens", "thought-parts"},
    "ollama": COMMON - {"error-mid-stream", "length-stop", "rate-limited"} | {"error-event", "length", "thinking", "server-busy"},
}
PATHS = sorted(CASSETTES.glob("*/*.yaml"))
FRAGMENTATIONS = ["recorded", "bytes", "random:1", "random:7", "random:42"]


def test_every_route_has_every_required_case() -> None:
    assert set(REQUIRED) == set(BUILTIN_ROUTES)
    for route, wanted in REQUIRED.items():
        names = {path.stem for path in (CASSETTES / route).glob("*.yaml")}
        assert wanted <= names, (route, sorted(wanted - names))


@pytest.mark.asyncio
@pytest.mark.parametrize("fragmentation", FRAGMENTATIONS)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_cassette_replays_to_its_golden(path: Path, fragmentation: str) -> None:
    result = await replay_case(path, ROUTES, fragmentation=fragmentation)
    assert result.ok, result.problem
    assert result.golden == "matched"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_cassette_holds_the_recording_key_or_any_credential(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert RECORDING_KEY not in text
    assert list(find_secrets(text)) == []


@pytest.mark.parametrize("route", sorted(REQUIRED))
def test_non_ascii_cassettes_are_cut_inside_a_character(route: str) -> None:
    (interaction,) = Cassette.load(CASSETTES / route / "non-ascii-split.yaml").interactions
    edges, position = [], 0
    for size in interaction.fragment_sizes()[:-1]:
        position += size
        edges.append(position)
    # a continuation byte right after a fragment edge: a character was split by the network
    assert any(interaction.body[edge] & 0xC0 == 0x80 for edge in edges)


ROUTES = RouteTable.load()
