"""SDKs users run on aiohttp and requests-era stacks, recorded and replayed offline.

- google-genai: its async client sends with aiohttp whenever aiohttp is
  installed (and reads the stream with ``content.iter_any()``), its sync client
  with httpx2;
- litellm: its async path is an httpx client over an aiohttp transport, so one
  request passes two intercepted clients and must be recorded once; two
  completions at once, each in its own block, must not cross.

Each SDK talks to the loopback emulator while recording; the replay runs after
the emulator has stopped, and sockets may reach nothing but 127.0.0.1 throughout.
Skipped when the SDK is not installed (``.[dev]`` installs them).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_replay import use_cassette
from dsh_replay.cassette.store import Cassette
from dsh_replay.testing import ProviderEmulator, ScriptedResponse

GEMINI_KEY = "AIza" + "SyDshReplayGenaiRecordingKey01234"
OPENAI_KEY = "sk-proj-" + "LitellmRecordingKey0123456789abcd"
MODEL = "gemini-2.0-flash"
STREAM_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent"


def _gemini_chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": MODEL,
            "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 3, "totalTokenCount": 7}}


GEMINI_SSE = b"".join(
    b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\r\n\r\n"
    for chunk in (_gemini_chunk("Hello"), _gemini_chunk(" from"), _gemini_chunk(" Gemini", "STOP"))
)


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-lite", "object": "chat.completion.chunk", "created": 1741569952, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _chat_sse(answer: str) -> bytes:
    first, rest = answer.split(" ", 1)
    chunks = (_chat_chunk({"role": "assistant", "content": ""}), _chat_chunk({"content": first}),
              _chat_chunk({"content": " " + rest}), _chat_chunk({}, "stop"))
    return b"".join(b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection beyond 127.0.0.1 fails the test (an SDK's telemetry or lookup would show here)."""
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"a connection to {address!r} left the machine")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        yield emulator


def _fragments(path: Path) -> list[int]:
    return [size for size in Cassette.load(path).interactions[0].fragment_sizes()]


# -- google-genai -------------------------------------------------------------------------------


def _genai_client(base_url: str) -> Any:
    genai = pytest.importorskip("google.genai")
    return genai.Client(api_key=GEMINI_KEY, http_options={"base_url": base_url, "api_version": "v1beta"})


async def _genai_async(base_url: str) -> list[str]:
    client = _genai_client(base_url)
    assert client._api_client._use_aiohttp()  # the SDK's own choice: aiohttp, since it is installed
    stream = await client.aio.models.generate_content_stream(model=MODEL, contents="Say hello")
    texts = [chunk.text async for chunk in stream]
    await client.aio.aclose()
    return texts


def _genai_sync(base_url: str) -> list[str]:
    client = _genai_client(base_url)
    texts = [chunk.text for chunk in client.models.generate_content_stream(model=MODEL, contents="Say hello")]
    client.close()
    return texts


@pytest.mark.asyncio
# google-genai subclasses aiohttp.ClientSession, which aiohttp warns about: theirs, not ours
@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning")
async def test_google_genai_async_over_aiohttp_is_recorded_and_replayed(emu: ProviderEmulator, tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    emu.add("POST", STREAM_PATH, ScriptedResponse.streaming(GEMINI_SSE, delay=0.005))
    path, base_url = tmp_path / "genai-async.yaml", emu.base_url
    async with use_cassette(path, "once") as recording:
        live = await _genai_async(base_url)
    assert "".join(live) == "Hello from Gemini"
    assert recording.recorded == 1
    assert emu.requests[0].headers["x-goog-api-key"] == GEMINI_KEY
    assert GEMINI_KEY not in path.read_text(encoding="utf-8")
    assert len(_fragments(path)) == 3
    emu.stop()
    async with use_cassette(path) as replay:
        assert await _genai_async(base_url) == live
    assert replay.played == 1


@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning")
async def test_google_genai_sync_and_async_replay_each_others_cassettes(emu: ProviderEmulator, tmp_path: Path) -> None:
    # the sync client sends with httpx2, the async one with aiohttp: a cassette names no client
    pytest.importorskip("aiohttp")
    emu.add("POST", STREAM_PATH, ScriptedResponse.streaming(GEMINI_SSE, delay=0.005))
    by_sync, by_async, base_url = tmp_path / "sync.yaml", tmp_path / "async.yaml", emu.base_url
    with use_cassette(by_sync, "once"):
        live = await asyncio.to_thread(_genai_sync, base_url)  # in a copy of this context, as to_thread runs it
    async with use_cassette(by_async, "once"):
        assert await _genai_async(base_url) == live
    assert "".join(live) == "Hello from Gemini"
    emu.stop()
    async with use_cassette(by_sync) as replay:
        assert await _genai_async(base_url) == live
    with use_cassette(by_async) as replay_sync:
        assert await asyncio.to_thread(_genai_sync, base_url) == live
    assert (replay.played, replay_sync.played) == (1, 1)


# -- litellm ----------------------------------------------------------------------------------


class _Gate:
    """Opens when ``parties`` tasks wait on it (asyncio.Barrier is 3.11+)."""

    def __init__(self, parties: int) -> None:
        self.parties, self.opened = parties, asyncio.Event()

    async def wait(self) -> None:
        self.parties -= 1
        if self.parties == 0:
            self.opened.set()
        await self.opened.wait()


@pytest.mark.asyncio
# pydantic warns about a TypedDict of litellm's (ReadOnly items) while building its models: theirs, not ours
@pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier:UserWarning")
async def test_concurrent_litellm_completions_are_each_recorded_once_in_their_own_cassette(
    emu: ProviderEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # its model price list comes from the network unless told to use the copy it ships
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = pytest.importorskip("litellm")
    answers = {"hi": "Hello there", "bye": "Bye now"}
    for prompt, answer in answers.items():
        emu.add("POST", f"/{prompt}/v1/chat/completions", ScriptedResponse.streaming(_chat_sse(answer), delay=0.005))
    started, finished, base_url = _Gate(2), _Gate(2), emu.base_url

    async def complete(prompt: str, mode: str) -> str:
        async with use_cassette(tmp_path / f"{prompt}.yaml", mode):
            await started.wait()  # both blocks are open before either request, and until both are done
            response = await litellm.acompletion(
                model="openai/gpt-4o-mini", api_base=f"{base_url}/{prompt}/v1", api_key=OPENAI_KEY,
                messages=[{"role": "user", "content": prompt}], stream=True,
            )
            text = "".join([chunk.choices[0].delta.content or "" async for chunk in response])
            await finished.wait()
        return text

    assert await asyncio.gather(complete("hi", "once"), complete("bye", "once")) == list(answers.values())
    for prompt in answers:
        cassette = tmp_path / f"{prompt}.yaml"
        assert len(Cassette.load(cassette).interactions) == 1  # not once per client it passed
        assert OPENAI_KEY not in cassette.read_text(encoding="utf-8")
    emu.stop()
    assert await asyncio.gather(complete("hi", "none"), complete("bye", "none")) == list(answers.values())
