"""The shared replay client of a run of many cases answers exactly what a client of the adapter's own would.

``AdapterCache`` hands the built-in adapters one client that skips what
``AsyncClient.send`` does around a transport (auth, redirects, cookies). These
tests hold it to the same results as the full httpx path through the
intercepted transport, and to never reaching the network.
"""

from __future__ import annotations

import gc
import io
from pathlib import Path

import httpx
import pytest

from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.replay import AdapterCache, replay_case
from dsh_replay.cli.check import run_check
from dsh_replay.errors import CassetteError, ConfigError
from dsh_replay.wire.transport import StreamRequest, _refuse_credentials_in_url

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted((ROOT / "cassettes").rglob("*.yaml"))


@pytest.mark.asyncio
async def test_every_bundled_case_replays_the_same_through_the_shared_client() -> None:
    routes = RouteTable.load()
    adapters = AdapterCache(routes)
    try:
        for path in BUNDLED:
            own = await replay_case(path, routes)  # the adapter's own client, through httpx's send
            shared = await replay_case(path, routes, adapters=adapters)
            assert shared.ok == own.ok and shared.problem == own.problem, path
            assert [o.golden_bytes() for o in shared.outcomes] == [o.golden_bytes() for o in own.outcomes], path
            assert [repr(o.raised) for o in shared.outcomes] == [repr(o.raised) for o in own.outcomes], path
    finally:
        await adapters.aclose()
    assert len(BUNDLED) > 50  # the comparison covered the bundled set, not an empty folder


@pytest.mark.asyncio
async def test_the_shared_client_outside_a_cassette_refuses_instead_of_sending() -> None:
    adapters = AdapterCache(RouteTable.load())
    adapter = adapters.adapter("openai", base_url="http://127.0.0.1:9/v1", drop_reasoning=False)
    client = adapter.client  # type: ignore[attr-defined]
    try:
        with pytest.raises(CassetteError, match=r"POST http://127\.0\.0\.1:9/v1/chat was not answered by a cassette"):
            await client.send(client.build_request("POST", "http://127.0.0.1:9/v1/chat", json={}), stream=True)
    finally:
        await adapters.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await client.send(httpx.Request("GET", "http://127.0.0.1:9/"))


def test_a_credential_in_the_url_is_refused_every_time_not_only_the_first() -> None:
    # the verdict on a URL is kept; a refusal must not be, or the second request would go out
    request = StreamRequest(route="gemini", url="https://example.test/v1?key=sk-test-abcdef0123456789", headers={})
    for _ in range(2):
        with pytest.raises(ConfigError, match="query parameter"):
            _refuse_credentials_in_url(request)
    fine = StreamRequest(route="gemini", url="https://example.test/v1?alt=sse", headers={})
    assert _refuse_credentials_in_url(fine) is _refuse_credentials_in_url(fine)


@pytest.mark.parametrize("host_froze", [False, True])
def test_check_leaves_the_collector_as_it_found_it(host_froze: bool) -> None:
    if host_froze:
        gc.freeze()  # a host program's own frozen objects: check must not release them
    try:
        before = gc.get_freeze_count()
        assert (before > 0) == host_froze
        out = io.StringIO()
        assert run_check([str(ROOT / "cassettes" / "openai")], out, progress=io.StringIO()) == 0, out.getvalue()
        assert gc.get_freeze_count() == before
        assert gc.isenabled()
    finally:
        if host_froze:
            gc.unfreeze()
