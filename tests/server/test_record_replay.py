"""A cassette recorded through the proxy replays like one recorded in pytest: through ``serve``, through
``use_cassette``, and as a case of its own (``dsh-replay check``), with the chunks the live run gave."""

from __future__ import annotations

from pathlib import Path

import httpx

from dsh_replay import GenerateOptions, dump_jsonl, use_cassette
from dsh_replay.adapters import OpenAIChatAdapter
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.replay import replay_case
from dsh_replay.cassette.store import Cassette
from dsh_replay.server.http import HttpServer
from dsh_replay.server.replay import CassetteServer
from dsh_replay.testing import ProviderEmulator, ScriptedResponse, split_by_sizes

from .proxying import CHAT, GUARD, KEY, TEXT, proxying, run, text_case

GOLDEN = TEXT.with_name("text.chunks.jsonl")


async def chunks(adapter: OpenAIChatAdapter, options: GenerateOptions) -> bytes:
    return dump_jsonl([chunk async for chunk in adapter.stream(options)])


def test_recorded_through_the_proxy_then_replayed_three_ways_the_chunks_are_the_same(tmp_path: Path) -> None:
    _, body = text_case()
    options = GenerateOptions.from_json(Cassette.load(TEXT).metadata["options"])
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body, fragment_sizes=[41, 3, 250], delay=0.002))

        async def record() -> bytes:
            async with proxying(tmp_path, emu) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                adapter = OpenAIChatAdapter(KEY, base_url=proxy.base("openai/text") + "/v1", client=client)
                return await chunks(adapter, options)

        live = run(record)
    cassette = tmp_path / "openai" / "text.yaml"

    async def through_serve() -> bytes:
        server = HttpServer(CassetteServer.load([cassette]))
        port = await server.start("127.0.0.1", 0)
        try:
            async with httpx.AsyncClient(timeout=GUARD) as client:
                return await chunks(OpenAIChatAdapter(KEY, base_url=f"http://127.0.0.1:{port}/v1", client=client),
                                    options)
        finally:
            await server.close()

    async def through_use_cassette() -> bytes:
        async with use_cassette(cassette, "none", route="openai"):
            return await chunks(OpenAIChatAdapter(KEY), options)

    assert live == GOLDEN.read_bytes()
    assert run(through_serve) == live
    assert run(through_use_cassette) == live
    # its own case: the options were read back from the recorded request, so no test function is needed
    result = run(lambda: replay_case(cassette, RouteTable.load(), update_golden=True))
    assert result.ok, result.problem
    assert cassette.with_name("text.chunks.jsonl").read_bytes() == live
    sent = [len(piece) for piece in split_by_sizes(body, [41, 3, 250])]
    assert Cassette.load(cassette).interactions[0].fragment_sizes() == sent
