"""The recording proxy: a stream goes through to the client fragment by fragment and into a cassette.

The upstream is a :class:`ProviderEmulator` on loopback; the proxy runs in this
process. Waits are bounded by ``asyncio.wait_for`` (hang guards), never timed.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import orjson
import pytest
import yaml

from dsh_replay.cassette import store
from dsh_replay.cassette.store import Cassette, RecordMode
from dsh_replay.server.record import RecordingProxy
from dsh_replay.testing import ProviderEmulator, ScriptedResponse, split_by_sizes

from .proxying import CHAT, GUARD, KEY, TEXT, proxying, run, stream, text_case

SIZES = [7, 64, 1, 300, 33]


def test_each_fragment_reaches_the_client_as_it_came_and_is_recorded_with_its_size(tmp_path: Path) -> None:
    request, body = text_case()
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body, fragment_sizes=SIZES, delay=0.002))

        async def scenario() -> tuple[int, list[bytes], list[str]]:
            async with proxying(tmp_path, emu) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                status, pieces = await stream(client, proxy.base("openai/text") + CHAT, request)
            return status, pieces, proxy.log

        status, pieces, log = run(scenario)
    sent = split_by_sizes(body, SIZES)
    assert status == 200 and pieces == sent
    recorded = Cassette.load(tmp_path / "openai" / "text.yaml")
    interaction = recorded.interactions[0]
    assert interaction.body == body and interaction.fragment_sizes() == [len(p) for p in sent]
    assert interaction.complete and interaction.error is None
    assert log == [f"recorded openai/text (200, {len(sent)} fragments, {len(body):,} B)"]
    # the request read back as the options replay needs, as dsh-replay import reads them
    assert recorded.metadata["route"] == "openai"
    assert recorded.metadata["options"]["messages"][1] == {"role": "user", "content": "Say hello."}


def test_credentials_in_headers_query_and_body_go_upstream_and_never_to_disk(tmp_path: Path) -> None:
    request, _ = text_case()
    echo = orjson.dumps({"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}})
    data = orjson.loads(request)
    data["api_key"] = "sk-test-bodyKey0123456789abcdefgh"
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.json(orjson.loads(echo), status=401))

        async def scenario() -> int:
            async with proxying(tmp_path, emu) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                url = proxy.base("openai/denied") + CHAT + "?key=sk-test-queryKey0123456789abcdef"
                status, _ = await stream(client, url, orjson.dumps(data), **{"x-api-key": "sk-test-xKey0123456789"})
            return status

        assert run(scenario) == 401
        got = emu.requests[0]
    # the provider got the real credentials
    assert got.headers["authorization"] == f"Bearer {KEY}" and got.query["key"].startswith("sk-test-queryKey")
    assert got.json()["api_key"] == "sk-test-bodyKey0123456789abcdefgh"  # type: ignore[index]
    text = (tmp_path / "openai" / "denied.yaml").read_text()
    for secret in (KEY, "queryKey", "bodyKey", "xKey"):
        assert secret not in text
    assert text.count("REDACTED") >= 5  # authorization, x-api-key, ?key=, body field, the 401's echo


def test_a_cassette_the_scan_refuses_is_not_written_and_the_client_gets_its_answer(tmp_path: Path) -> None:
    request, _ = text_case()
    leaked = b'data: {"note":"AKIAIOSFODNN7EXAMPLQ"}\n\ndata: [DONE]\n\n'  # a key the request never sent
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(leaked))

        async def scenario() -> tuple[list[bytes], list[str]]:
            async with proxying(tmp_path, emu) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                _, pieces = await stream(client, proxy.base("openai/leak") + CHAT, request)
            return pieces, proxy.log

        pieces, log = run(scenario)
    assert b"".join(pieces) == leaked
    assert not (tmp_path / "openai" / "leak.yaml").exists()
    assert any(line.startswith(f"warning: {tmp_path / 'openai' / 'leak.yaml'} was not written: refusing to write")
               for line in log), log


@pytest.mark.parametrize(("end", "client_error", "kind"), [
    ("reset", httpx.ReadError, "ReadError"),
    ("truncate", httpx.RemoteProtocolError, "RemoteProtocolError"),
    ("stall", httpx.ReadTimeout, "ReadTimeout"),
])
def test_an_upstream_failure_is_recorded_at_its_offset_and_reaches_the_client_as_the_same_kind(
    tmp_path: Path, end: str, client_error: type[Exception], kind: str,
) -> None:
    request, body = text_case()
    head = body[:700]
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(head, fragment_sizes=350, delay=0.002, end=end))  # type: ignore[arg-type]

        async def scenario() -> bytes:
            got = bytearray()
            async with proxying(tmp_path, emu, timeout=1.0) as proxy, \
                    httpx.AsyncClient(timeout=httpx.Timeout(GUARD, read=3.0)) as client:
                with pytest.raises(client_error):
                    async with client.stream("POST", proxy.base("openai/cut") + CHAT, content=request) as response:
                        async for piece in response.aiter_raw():
                            got += piece
            return bytes(got)

        got = run(scenario)
    assert got == head
    interaction = Cassette.load(tmp_path / "openai" / "cut.yaml").interactions[0]
    assert interaction.body == head and interaction.error is not None
    assert (interaction.error.kind, interaction.error.offset) == (kind, len(head))


def test_a_client_that_goes_away_is_recorded_as_it_saw_the_stream_and_the_upstream_is_closed(tmp_path: Path) -> None:
    request, body = text_case()
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body, fragment_sizes=100, delay=0.05))

        async def scenario() -> tuple[bytes, list[str]]:
            async with proxying(tmp_path, emu) as proxy:
                async with httpx.AsyncClient(timeout=GUARD) as client, \
                        client.stream("POST", proxy.base("openai/left") + CHAT, content=request) as response:
                    pieces = response.aiter_raw()
                    seen = await pieces.__anext__() + await pieces.__anext__()
                # the client is gone; the proxy notices while the upstream is between two fragments
                assert await asyncio.to_thread(emu.exchanges[0].wait_client_closed, GUARD)
                for _ in range(int(GUARD / 0.01)):
                    if (tmp_path / "openai" / "left.yaml").exists():
                        break
                    await asyncio.sleep(0.01)
                return seen, proxy.log

        seen, log = run(scenario)
    interaction = Cassette.load(tmp_path / "openai" / "left.yaml").interactions[0]
    assert interaction.complete is False and interaction.error is None
    assert interaction.body.startswith(seen) and len(interaction.body) < len(body)
    assert log[-1].startswith("recorded openai/left (200, ") and log[-1].endswith("cut: the client went away)")


def test_a_recording_the_shutdown_cuts_is_dropped_and_the_one_that_ended_before_it_is_kept(tmp_path: Path) -> None:
    request, body = text_case()
    other = request.replace(b"Say hello.", b"Say goodbye.")
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body), ScriptedResponse.streaming(body, fragment_sizes=64,
                                                                                          delay=0.2))

        async def scenario() -> tuple[list[str], RecordingProxy]:
            async with httpx.AsyncClient(timeout=GUARD) as client, \
                    proxying(tmp_path, emu, mode=RecordMode.REWRITE) as proxy:
                status, _ = await stream(client, proxy.base("openai/mix") + CHAT, request)
                assert status == 200
                async with client.stream("POST", proxy.base("openai/mix") + CHAT, content=other) as response:
                    pieces = response.aiter_raw()
                    await pieces.__anext__()  # streaming when the server stops
                    await proxy.stop()
                    with pytest.raises(httpx.TransportError):  # reset: never taken for a whole response
                        async for _ in pieces:
                            pass
            return proxy.log, proxy.proxy

        log, stopped = run(scenario)
    recorded = Cassette.load(tmp_path / "openai" / "mix.yaml")
    assert [(bytes(i.request.body), i.body, i.complete) for i in recorded.interactions] == [(request, body, True)]
    assert (stopped.dropped, stopped.cut) == (["openai/mix"], 1)
    assert log[-1].startswith("recorded openai/mix (200, ") and log[-1].endswith("cut: the server stopped; not written)")
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []


def test_fifty_clients_at_once_each_get_their_bytes_and_a_stalled_upstream_holds_none(tmp_path: Path) -> None:
    request, body = text_case()
    bodies = {n: body.replace(b"Hello", f"Hi{n:02d}!".encode()) for n in range(50)}
    with ProviderEmulator() as emu:
        for n, streamed in bodies.items():
            emu.add("POST", f"/c{n}{CHAT}", ScriptedResponse.streaming(streamed, fragment_sizes=97, delay=0.001))
        emu.add("POST", f"/stalled{CHAT}", ScriptedResponse.streaming(body[:200], end="stall"))

        async def scenario() -> dict[int, bytes]:
            async with proxying(tmp_path, emu, timeout=GUARD * 2) as proxy, \
                    httpx.AsyncClient(timeout=GUARD * 2, limits=httpx.Limits(max_connections=60)) as client:
                stalled = asyncio.create_task(stream(client, proxy.base("openai/stalled") + f"/stalled{CHAT}", request))
                got = await asyncio.gather(*(stream(client, proxy.base(f"openai/c{n}") + f"/c{n}{CHAT}", request)
                                             for n in bodies))
                assert not stalled.done()  # still waiting on its upstream, and nobody else waited for it
                stalled.cancel()
                await asyncio.gather(stalled, return_exceptions=True)
            return {n: b"".join(pieces) for n, (_, pieces) in zip(bodies, got, strict=True)}

        got = run(scenario, guard=GUARD * 6)  # a hang guard: fifty streams on a loaded machine
    assert got == bodies
    for n, streamed in bodies.items():
        interaction = Cassette.load(tmp_path / "openai" / f"c{n}.yaml").interactions[0]
        assert (interaction.body, interaction.complete) == (streamed, True)
        assert interaction.fragment_sizes() == [len(p) for p in split_by_sizes(streamed, 97)]


def test_requests_to_one_name_are_its_interactions_in_order_and_its_calls(tmp_path: Path) -> None:
    request, body = text_case()
    follow_up = orjson.loads(request)
    follow_up["messages"].append({"role": "assistant", "content": "Hello!"})
    follow_up["messages"].append({"role": "user", "content": "Again."})
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.json({"error": {"message": "slow down"}}, status=429),
                ScriptedResponse.streaming(body))

        async def scenario() -> None:
            async with proxying(tmp_path, emu) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                for sent in (request, request, orjson.dumps(follow_up)):
                    await stream(client, proxy.base("openai/turns") + CHAT, sent)

        run(scenario)
    recorded = Cassette.load(tmp_path / "openai" / "turns.yaml")
    assert [i.status for i in recorded.interactions] == [429, 200, 200]
    # the 429 and its retry are one call; the follow-up is a second
    assert recorded.metadata["options"]["messages"][-1]["content"] == "Say hello."
    assert [m["content"] for m in recorded.metadata["follow_ups"][0]["messages"][-2:]] == ["Hello!", "Again."]


def test_record_mode_once_replays_a_name_that_exists_and_new_episodes_records_what_it_lacks(tmp_path: Path) -> None:
    request, body = text_case()
    other = orjson.loads(request)
    other["messages"][1]["content"] = "Say goodbye."
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body))

        async def scenario(mode: str, *sent: bytes) -> tuple[list[int], list[str]]:
            async with proxying(tmp_path, emu, mode=mode) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                statuses = [(await stream(client, proxy.base("openai/modes") + CHAT, s))[0] for s in sent]
            return statuses, proxy.log

        run(lambda: scenario("once", request))
        fragments = len(Cassette.load(tmp_path / "openai" / "modes.yaml").interactions[0].fragment_sizes())
        statuses, log = run(lambda: scenario("once", request, orjson.dumps(other)))
        assert statuses == [200, 404] and len(emu.requests) == 1
        assert log[0] == f"replayed openai/modes (200, {fragments} fragments, {len(body):,} B)"
        assert log[1].startswith("refused openai/modes (404 no match")
        statuses, log = run(lambda: scenario("new_episodes", request, orjson.dumps(other)))
        assert statuses == [200, 200] and len(emu.requests) == 2
        assert [line.split(" ")[0] for line in log] == ["replayed", "recorded"]
    assert len(Cassette.load(tmp_path / "openai" / "modes.yaml").interactions) == 2
    assert RecordMode.parse("all") is RecordMode.ALL


@pytest.mark.parametrize(("target", "header"), [
    ("/_dsh/../escape/-/v1/chat/completions", None),
    ("/_dsh/%2e%2e/x/-/v1/chat/completions", None),
    ("/v1/chat/completions", "../../escape"),
    ("/v1/chat/completions", "/etc/passwd"),
    ("/_dsh/outside/x/-/v1/chat/completions", None),  # a link in the folder to a folder outside it
])
def test_a_name_that_would_leave_the_folder_is_refused_with_400(
    tmp_path: Path, target: str, header: str | None,
) -> None:
    folder, outside = tmp_path / "cassettes", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    (folder / "outside").symlink_to(outside)
    request, _ = text_case()
    with ProviderEmulator() as emu:

        async def scenario() -> httpx.Response:
            async with proxying(folder, emu) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                headers = {"x-dsh-replay-cassette": header} if header else {}
                return await client.post(proxy.url + target, content=request, headers=headers)

        response = run(scenario)
        assert emu.requests == []
    assert response.status_code == 400
    assert response.json()["error"]["type"] in ("dsh_replay_bad_name", "dsh_replay_no_cassette_name")
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape.yaml").exists()


def test_a_request_that_names_no_cassette_is_replayed_from_the_served_ones_or_refused(tmp_path: Path) -> None:
    from dsh_replay.server.replay import CassetteServer

    served = TEXT.with_name("rate-limited-then-recovers.yaml")
    recorded = Cassette.load(served)
    with ProviderEmulator() as emu:

        async def scenario() -> tuple[list[int], list[str]]:
            core = CassetteServer.load([served])
            async with proxying(tmp_path, emu, replay=core) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                statuses = [(await stream(client, proxy.url + CHAT, recorded.interactions[0].request.body))[0]
                            for _ in range(2)]
                statuses.append((await stream(client, proxy.url + CHAT, b'{"model":"other"}'))[0])
            return statuses, proxy.log

        statuses, log = run(scenario)
        assert emu.requests == []
    # in recorded order, as serve plays them: the 429, then the 200 that followed it
    assert statuses == [429, 200, 400]
    assert log[0].startswith(f"replayed {served.with_suffix('').as_posix()} (429, ")
    assert log[2].startswith("refused - (400: name the cassette to record this request in")


def test_a_name_s_next_requests_are_answered_while_its_cassette_is_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    request, body = text_case()
    held, release = threading.Event(), threading.Event()
    written: list[int] = []  # the interactions of each write, in the order the writes happened
    atomic_write = store.atomic_write

    def write(path: Path, data: bytes) -> None:  # the first write waits until the test lets it go
        if not written:
            held.set()
            release.wait(GUARD)
        written.append(len(yaml.safe_load(data)["interactions"]))
        atomic_write(path, data)

    monkeypatch.setattr(store, "atomic_write", write)
    with ProviderEmulator() as emu:
        emu.add("POST", CHAT, ScriptedResponse.streaming(body))

        async def scenario() -> tuple[list[tuple[int, bytes]], list[int]]:
            async with proxying(tmp_path, emu) as proxy, httpx.AsyncClient(timeout=GUARD) as client:
                url = proxy.base("openai/turns") + CHAT
                got = [await stream(client, url, request)]
                assert await asyncio.to_thread(held.wait, GUARD)  # its cassette is being written, and stays so
                try:
                    # the same connection, then a new one: neither waits for the write
                    got.append(await asyncio.wait_for(stream(client, url, request), GUARD))
                    async with httpx.AsyncClient(timeout=GUARD) as other:
                        got.append(await asyncio.wait_for(stream(other, url, request), GUARD))
                    during = list(written)
                finally:
                    release.set()
            return [(status, b"".join(pieces)) for status, pieces in got], during

        answers, during = run(scenario)
    assert answers == [(200, body)] * 3
    assert during == []  # all three were answered while the first write was held
    # one write at a time, in order: the first as it was, then one with all three, the file whole
    assert written == [1, 3]
    assert len(Cassette.load(tmp_path / "openai" / "turns.yaml").interactions) == 3
