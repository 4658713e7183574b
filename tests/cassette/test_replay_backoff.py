"""A replay that does not pace never waits out a recorded 429's back-off; recording and pacing do."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_replay import GenerateOptions, Message, use_cassette
from dsh_replay.adapters import OpenAIChatAdapter
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from dsh_replay.wire.transport import RETRY_PAUSES_WAIT

SSE = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
       b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
       b'"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\ndata: [DONE]\n\n')
RATE_LIMITED = ScriptedResponse(
    status=429, headers={"retry-after": "0.25", "content-type": "application/json"},
    fragments=[json.dumps({"error": {"message": "slow down", "type": "rate_limit_error"}}).encode()],
)
OPTIONS = GenerateOptions(model="m", messages=[Message(role="user", content="hi")])


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every retry pause that really waited (anyio.sleep as the transport calls it), instead of waiting."""
    import anyio

    asked: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        asked.append(seconds)

    monkeypatch.setattr(anyio, "sleep", fake_sleep)
    return asked


@pytest.fixture
def recorded(tmp_path: Path, pauses: list[float]) -> Iterator[Path]:
    """A cassette of a 429 (Retry-After: 0.25) then the stream, recorded through the emulator."""
    path = tmp_path / "backoff.yaml"
    with ProviderEmulator() as emu:
        emu.add("POST", "/v1/chat/completions", RATE_LIMITED, ScriptedResponse.streaming(SSE))
        adapter = OpenAIChatAdapter(api_key="sk-test-backoff-0123456789abcd", base_url=emu.base_url + "/v1")

        async def go() -> None:
            async with use_cassette(path, "once"):
                assert [c async for c in adapter.stream(OPTIONS)]

        asyncio.run(go())
    assert pauses == [0.25]  # recording talks to a live provider: it waits as asked
    pauses.clear()
    yield path


@pytest.mark.parametrize(("speed", "waited"), [(0.0, []), (1.0, [0.25])], ids=["instant", "paced"])
@pytest.mark.asyncio
async def test_replay_waits_for_a_back_off_only_when_pacing(recorded: Path, pauses: list[float], speed: float,
                                                            waited: list[float]) -> None:
    adapter = OpenAIChatAdapter(api_key="sk-test-other-key-0123456789", base_url="http://replay.invalid/v1")
    async with use_cassette(recorded, speed=speed) as session:
        chunks = [c async for c in adapter.stream(OPTIONS)]
    assert session.played == 2 and chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    assert [p for p in pauses if p >= 0.25] == waited
    # outside the block, pauses wait again
    assert RETRY_PAUSES_WAIT.get() is True
