"""``complete`` says exactly whether the recorded body reached its end.

Every client the engine intercepts — httpx sync and async, the ``openai`` and
``anthropic`` SDKs sync and async — is recorded twice against the loopback
emulator: once read to the end (``complete: true``, even when the client stops
at the terminal event and closes without reading the body's last chunk, as the
sync ``openai`` client does), once abandoned mid-stream while the server still
has more to send (``complete: false``, and the body holds only what was read).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import yaml

from dsh_replay import use_cassette
from dsh_replay.cassette import drain
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from tests.cassette.test_sdk_clients import ANTHROPIC_KEY, ANTHROPIC_SSE, OPENAI_KEY, OPENAI_SSE

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def recorded(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    (interaction,) = data["interactions"]
    response: dict[str, Any] = interaction["response"]
    return response


def body_of(response: dict[str, Any]) -> bytes:
    body = response["body"]["string"]
    return body.encode() if isinstance(body, str) else bytes(body)


def read(stream: Any, stop_after: int | None) -> int:
    seen = 0
    for _ in stream:
        seen += 1
        if seen == stop_after:
            break
    stream.close()
    return seen


async def aread(stream: Any, stop_after: int | None) -> int:
    seen = 0
    async for _ in stream:
        seen += 1
        if seen == stop_after:
            break
    await stream.close()
    return seen


CHAT_ARGS: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stream": True}
MESSAGE_ARGS: dict[str, Any] = {**CHAT_ARGS, "model": "claude-sonnet-4-5", "max_tokens": 16}


def openai_sync(base: str, stop_after: int | None) -> int:
    client = openai.OpenAI(api_key=OPENAI_KEY, base_url=base + "/v1", max_retries=0)
    return read(client.chat.completions.create(**CHAT_ARGS), stop_after)


def openai_async(base: str, stop_after: int | None) -> int:
    async def run() -> int:
        client = openai.AsyncOpenAI(api_key=OPENAI_KEY, base_url=base + "/v1", max_retries=0)
        return await aread(await client.chat.completions.create(**CHAT_ARGS), stop_after)

    return asyncio.run(run())


def anthropic_sync(base: str, stop_after: int | None) -> int:
    client = anthropic.Anthropic(api_key=ANTHROPIC_KEY, base_url=base, max_retries=0)
    return read(client.messages.create(**MESSAGE_ARGS), stop_after)


def anthropic_async(base: str, stop_after: int | None) -> int:
    async def run() -> int:
        client = anthropic.AsyncAnthropic(api_key=ANTHROPIC_KEY, base_url=base, max_retries=0)
        return await aread(await client.messages.create(**MESSAGE_ARGS), stop_after)

    return asyncio.run(run())


def httpx_sync(base: str, stop_after: int | None) -> int:
    seen = 0
    with httpx.Client() as client, client.stream("POST", base + CHAT, json={"stream": True}) as response:
        for _ in response.iter_lines():
            seen += 1
            if seen == stop_after:
                break
    return seen


def httpx_async(base: str, stop_after: int | None) -> int:
    async def run() -> int:
        seen = 0
        async with httpx.AsyncClient() as client, client.stream("POST", base + CHAT, json={"stream": True}) as response:
            async for _ in response.aiter_lines():
                seen += 1
                if seen == stop_after:
                    break
        return seen

    return asyncio.run(run())


CLIENTS: dict[str, tuple[Callable[[str, int | None], int], str, bytes]] = {
    "openai-sync": (openai_sync, CHAT, OPENAI_SSE),
    "openai-async": (openai_async, CHAT, OPENAI_SSE),
    "anthropic-sync": (anthropic_sync, MESSAGES, ANTHROPIC_SSE),
    "anthropic-async": (anthropic_async, MESSAGES, ANTHROPIC_SSE),
    "httpx-sync": (httpx_sync, CHAT, OPENAI_SSE),
    "httpx-async": (httpx_async, CHAT, OPENAI_SSE),
}


@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_body_read_to_its_terminal_event_is_complete(name: str, emu: ProviderEmulator, tmp_path: Path) -> None:
    run, path, body = CLIENTS[name]
    emu.add("POST", path, ScriptedResponse.streaming(body, delay=0.005))
    cassette = tmp_path / "c.yaml"
    with use_cassette(cassette, "once"):
        assert run(emu.base_url, None) > 0
    response = recorded(cassette)
    assert response["dsh_replay"]["complete"] is True
    assert body_of(response) == body


@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_body_abandoned_while_the_server_still_sends_is_incomplete(
    name: str, emu: ProviderEmulator, tmp_path: Path
) -> None:
    run, path, body = CLIENTS[name]
    # the rest keeps coming for longer than the drain waits, one piece at a time
    emu.add("POST", path, ScriptedResponse.streaming(body * 40, delay=0.1))
    cassette = tmp_path / "c.yaml"
    with use_cassette(cassette, "once"):
        assert run(emu.base_url, 2) == 2
    response = recorded(cassette)
    assert response["dsh_replay"]["complete"] is False
    # what the reader did not read is not recorded
    assert len(body_of(response)) < len(body * 40)


@pytest.mark.parametrize("name", ["openai-sync", "httpx-sync", "openai-async", "httpx-async"])
def test_a_body_abandoned_before_a_stall_is_incomplete(name: str, emu: ProviderEmulator, tmp_path: Path) -> None:
    run, path, body = CLIENTS[name]
    first_two = body.split(b"\n\n")[:2]
    emu.add("POST", path, ScriptedResponse(
        headers={"content-type": "text/event-stream"},
        fragments=[piece + b"\n\n" for piece in first_two], end="stall"))
    cassette = tmp_path / "c.yaml"
    with use_cassette(cassette, "once"):
        assert run(emu.base_url, 1) == 1
    response = recorded(cassette)
    assert response["dsh_replay"]["complete"] is False
    sent = b"".join(piece + b"\n\n" for piece in first_two)
    assert body_of(response) and sent.startswith(body_of(response))


def test_a_stream_of_no_known_transport_is_never_called_complete() -> None:
    pieces = iter([b"more"])
    assert drain.ended_sync(object(), pieces) is False
    assert next(pieces) == b"more"  # nothing was read from it


def test_more_content_after_the_reader_stopped_is_not_an_end() -> None:
    class Connection:
        _h11_state = object()

        class _network_stream:
            @staticmethod
            def read(max_bytes: int, timeout: float | None = None) -> bytes:
                return b""

    class Stream:
        class _httpcore_stream:
            class _stream:
                _connection = Connection()

    assert drain.ended_sync(Stream(), iter([b"", b"data: more\n\n"])) is False
    assert drain.ended_sync(Stream(), iter([b""])) is True
    assert drain.ended_sync(Stream(), iter([])) is True


def test_a_body_whose_reading_task_is_cancelled_mid_read_is_incomplete(emu: ProviderEmulator, tmp_path: Path) -> None:
    # the stream goes on, a piece at a time, long after the reader is cancelled
    emu.add("POST", CHAT, ScriptedResponse.streaming(OPENAI_SSE * 40, delay=0.05))
    cassette = tmp_path / "c.yaml"

    async def run() -> bytes:
        seen: list[bytes] = []
        first = asyncio.Event()
        async with httpx.AsyncClient() as client, client.stream("POST", emu.base_url + CHAT, json={"stream": True}) \
                as response:

            async def reader() -> None:
                async for piece in response.aiter_raw():
                    seen.append(piece)
                    first.set()  # then straight back into the next read, which waits for the server

            task = asyncio.create_task(reader())
            await asyncio.wait_for(first.wait(), 10)
            task.cancel()  # lands in the read under way
            with pytest.raises(asyncio.CancelledError):
                await task
        return b"".join(seen)

    with use_cassette(cassette, "once"):
        seen = asyncio.run(run())
    response = recorded(cassette)
    assert response["dsh_replay"]["complete"] is False
    assert body_of(response) == seen and len(seen) < len(OPENAI_SSE * 40)


def test_a_body_whose_sync_read_is_interrupted_mid_read_is_incomplete(
    emu: ProviderEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from httpcore._backends.sync import SyncStream

    emu.add("POST", CHAT, ScriptedResponse.streaming(OPENAI_SSE * 40, delay=0.05))
    armed = False
    read = SyncStream.read

    def interrupted(self: SyncStream, max_bytes: int, timeout: float | None = None) -> bytes:
        if armed:  # Ctrl-C lands in the socket read under way
            raise KeyboardInterrupt
        return read(self, max_bytes, timeout)

    monkeypatch.setattr(SyncStream, "read", interrupted)
    cassette = tmp_path / "c.yaml"
    seen: list[bytes] = []
    with use_cassette(cassette, "once"), httpx.Client() as client, \
            client.stream("POST", emu.base_url + CHAT, json={"stream": True}) as response:
        pieces = response.iter_raw()
        seen.append(next(pieces))
        armed = True
        with pytest.raises(KeyboardInterrupt):
            seen.extend(pieces)  # what h11 already holds, then the next read
    recording = recorded(cassette)
    assert recording["dsh_replay"]["complete"] is False
    assert body_of(recording) == b"".join(seen) and len(b"".join(seen)) < len(OPENAI_SSE * 40)
