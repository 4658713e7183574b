"""The cassette server under load: no client holds it for the others.

A request nothing matches is diagnosed off the event loop and at a bounded
cost; idle and half-sent connections are closed after the idle timeout;
connections over the limit get a 503. Every assertion is on outcomes and the
order of events, never on wall time; waits are hang guards.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import orjson
import pytest

from dsh_replay.cassette.matching import DIFF_CHARS, DIFF_LINES, describe_mismatch
from dsh_replay.server.replay import CassetteServer, NoMatch, Unmatched

from .test_replay import (
    BODY,
    GUARD,
    PIECES,
    REQUEST,
    cassette,
    chunks_of,
    interaction,
    raw_exchange,
    run,
    serving,
)

# a chat history of some 4 MB, 40,000 messages: it matches nothing recorded
HISTORY = {"model": "m1", "stream": True, "messages": [
    {"role": "user" if n % 2 else "assistant", "content": f"turn {n}: " + "and then we talked some more " * 3}
    for n in range(40_000)
]}


def several_cassettes() -> list[Any]:
    other = {"model": "m1", "messages": [{"role": "user", "content": "bye"}]}
    return [cassette(f"p/c{n}", interaction(), interaction(request=other)) for n in range(3)]


# -- the diagnosis of a request nothing matches ------------------------------------------


def test_a_big_request_is_parsed_once_whatever_the_number_of_recorded_interactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = orjson.dumps(HISTORY)
    parses = []
    loads = orjson.loads

    def counting(data: Any) -> Any:
        parses.append(data is big or data == big)
        return loads(data)

    core = CassetteServer(several_cassettes())
    monkeypatch.setattr(orjson, "loads", counting)
    answer = core.answer("POST", "/v1/chat/completions", [("host", "x")], big)
    assert isinstance(answer, NoMatch)
    assert parses.count(True) == 1


def test_a_big_diff_is_cut_and_says_so() -> None:
    core = CassetteServer(several_cassettes())
    answer = core.answer("POST", "/v1/chat/completions", [("host", "x")], orjson.dumps(HISTORY))
    assert isinstance(answer, NoMatch)
    assert answer.nearest is not None and answer.nearest.name == "c0.yaml"
    assert (f"(the diff compares only the start of this request's body: {DIFF_LINES:,} lines, {DIFF_CHARS:,} "
            "characters at most)") in answer.message
    assert len(answer.message) < 20_000
    # 40,000 messages where 1 was recorded: the fields that differ are named up to a point, then counted
    assert len(answer.diff) == 50 and answer.diff[:3] == ["body.messages[0].content", "body.messages[0].role",
                                                           "body.messages[1]"]
    more = answer.diff[-1].removeprefix("... and ").removesuffix(" more")
    assert more.isdigit() and 40_000 - 49 <= int(more) <= 40_000


def test_a_request_of_normal_size_is_diagnosed_in_full() -> None:
    # a long prompt on one line, and a long conversation: each whole in the diff
    prompt = [{"role": "system", "content": "x" * 50_000}] + [{"role": "user", "content": f"{n}"} for n in range(150)]
    recorded = [interaction(request={"model": "m1", "messages": prompt})]
    wanted = interaction(request={"model": "m2", "messages": prompt}).request
    message = describe_mismatch(wanted, recorded, CassetteServer([cassette("p/x", *recorded)]).matchers)
    assert "changed JSON fields: model" in message
    assert '-  "model": "m1"' in message and '+  "model": "m2"' in message
    assert "only the start" not in message


def test_a_big_request_being_diagnosed_holds_no_other_stream() -> None:
    diagnosing, small_done = threading.Event(), threading.Event()
    answered_meanwhile: list[bool] = []

    class SlowDiagnosis(CassetteServer):
        def diagnose(self, unmatched: Unmatched) -> NoMatch:
            diagnosing.set()
            # the diagnosis lasts until the small request is answered: on the event loop, that
            # could never happen, and this would wait out its guard
            answered_meanwhile.append(small_done.wait(GUARD / 2))
            return super().diagnose(unmatched)

    async def small(port: int, order: list[str]) -> bytes:
        raw = await raw_exchange(port)
        order.append("small answered")
        small_done.set()
        return raw

    async def big(port: int, order: list[str]) -> httpx.Response:
        async with httpx.AsyncClient(timeout=GUARD) as client:
            response = await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=orjson.dumps(HISTORY))
        order.append("big answered")
        return response

    async def scenario() -> tuple[list[str], httpx.Response, bytes]:
        order: list[str] = []
        async with serving(SlowDiagnosis([cassette("p/text", interaction())])) as (port, _):
            missing = asyncio.ensure_future(big(port, order))
            assert await asyncio.to_thread(diagnosing.wait, GUARD / 2), "the big request was never diagnosed"
            found = await small(port, order)
            return order, await missing, found

    order, missing, found = run(scenario)
    assert answered_meanwhile == [True]
    assert order == ["small answered", "big answered"]
    assert chunks_of(found)[1:] == (PIECES, True)
    error = missing.json()["error"]
    assert missing.status_code == 404 and error["nearest"] == "cassettes/p/text.yaml"
    assert "the diff compares only the start of this request's body" in error["message"]


# -- idle connections and the connection limit ------------------------------------------


async def read_to_end(port: int, sent: bytes = b"") -> bytes:
    """What the server sends on a new connection after ``sent``, up to its close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(sent)
    try:
        return await reader.read(-1)
    finally:
        writer.close()


def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    async def scenario() -> tuple[bytes, list[str]]:
        async with serving(CassetteServer([cassette("p/text", interaction())]), idle_timeout=0.2) as (port, log):
            return await read_to_end(port), log

    assert run(scenario) == (b"", [])


@pytest.mark.parametrize("sent", [
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"model\"",
], ids=["half a head", "half a body"])
def test_a_half_sent_request_gets_a_408_after_the_idle_timeout(sent: bytes) -> None:
    async def scenario() -> bytes:
        async with serving(CassetteServer([cassette("p/text", interaction())]), idle_timeout=0.2) as (port, _):
            return await read_to_end(port, sent)

    raw = run(scenario)
    assert raw.startswith(b"HTTP/1.1 408 ") and b"dsh_replay_timeout" in raw


def test_a_connection_kept_alive_is_closed_when_idle_after_its_answer() -> None:
    async def scenario() -> bytes:
        async with serving(CassetteServer([cassette("p/text", interaction())]), idle_timeout=0.2) as (port, _):
            body = orjson.dumps(REQUEST)
            return await read_to_end(port, b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: "
                                     + str(len(body)).encode() + b"\r\n\r\n" + body)

    head, chunks, ended = chunks_of(run(scenario))
    assert head.startswith(b"HTTP/1.1 200 ") and chunks == PIECES and ended


def test_connections_over_the_limit_get_a_503_and_a_request_is_answered_once_idle_ones_close() -> None:
    async def scenario() -> tuple[list[bytes], httpx.Response, list[str]]:
        core = CassetteServer([cassette("p/text", interaction())])
        async with serving(core, idle_timeout=0.2, max_connections=5) as (port, log):
            idle = await asyncio.gather(*(read_to_end(port) for _ in range(8)))
            async with httpx.AsyncClient(timeout=GUARD) as client:
                answer = await client.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=REQUEST)
            return idle, answer, log

    idle, answer, log = run(scenario)
    assert sorted(raw[:12] for raw in idle) == [b""] * 5 + [b"HTTP/1.1 503"] * 3
    assert all(b"dsh_replay_busy" in raw for raw in idle if raw)
    assert answer.status_code == 200 and answer.content == BODY
    assert [line for line in log if "connections open" in line] == [
        "5 connections open, the most served at once: further ones are answered 503 until one closes (logged once)"
    ]
    assert len(log) == 2 and log[1].endswith("(complete)")


def test_a_body_that_trickles_in_gets_a_408_at_the_body_deadline_however_often_it_sends() -> None:
    async def scenario() -> tuple[bytes, int]:
        # each byte comes well within the idle timeout: only the deadline of the whole body can end it
        async with serving(CassetteServer([cassette("p/text", interaction())]), idle_timeout=GUARD,
                           body_timeout=0.3) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100000\r\n\r\n")
            sent = 0
            answer = asyncio.ensure_future(reader.read(-1))
            try:
                while not answer.done() and sent < 10_000:  # a hang guard: the whole body is never sent
                    writer.write(b"a")
                    sent += 1
                    await asyncio.sleep(0.01)
                return await answer, sent
            finally:
                writer.close()

    raw, sent = run(scenario)
    assert raw.startswith(b"HTTP/1.1 408 ") and b"dsh_replay_timeout" in raw and sent < 10_000
    assert b"request body did not arrive within 0.3 s" in raw


def test_a_client_over_the_limit_reads_its_503_rather_than_a_reset_though_its_request_is_unread() -> None:
    async def scenario() -> bytes:
        async with serving(CassetteServer([cassette("p/text", interaction())]), idle_timeout=GUARD,
                           max_connections=1) as (port, _):
            _, holder = await asyncio.open_connection("127.0.0.1", port)  # accepted first: it holds the one place
            try:
                body = orjson.dumps(REQUEST)
                return await read_to_end(port, b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: "
                                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            finally:
                holder.close()

    raw = run(scenario)
    assert raw.startswith(b"HTTP/1.1 503 ") and b"dsh_replay_busy" in raw
