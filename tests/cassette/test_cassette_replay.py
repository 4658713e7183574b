"""Replaying cassettes: fragmentation, pacing, matching, recorded and injected failures."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from vcr.request import Request as VcrRequest

from dsh_replay import CassetteError, Fault, use_cassette
from dsh_replay.cassette.store import Cassette, Interaction, RecordedError
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from tests.clocks import RecordingClock

URL = "http://127.0.0.1:9/v1/chat/completions"  # nothing listens: a replay must not need it
BODY = (
    b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":"Hello"}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":", w\xc3\xb6rld"}}]}\n\n'
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
SIZES = [40, 3, 61, 1, len(BODY) - 105]  # cut anywhere, even inside "ö"
TIMES = [0.0, 100.0, 200.0, 250.0, 300.0]
REQUEST = {
    "model": "gpt-4o-mini",
    "stream": True,
    "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
}


def _interaction(
    body: bytes = BODY,
    *,
    request: object = REQUEST,
    url: str = URL,
    sizes: Sequence[int] = SIZES,
    times: Sequence[float] = TIMES,
) -> Interaction:
    raw = json.dumps(request).encode()
    return Interaction(
        request=VcrRequest("POST", url, raw, {"content-type": "application/json"}),
        status=200,
        reason="OK",
        headers=[("content-type", "text/event-stream"), ("content-length", str(len(body)))],
        body=body,
        fragments=list(zip(times, sizes, strict=True)),
    )


@pytest.fixture
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "chat.yaml"
    Cassette(path=path, interactions=[_interaction()]).save()
    return path


async def _pieces(path: Path, request: object = REQUEST, **kwargs: object) -> list[bytes]:
    async with (
        use_cassette(path, **kwargs) as session,  # type: ignore[arg-type]
        httpx.AsyncClient() as client,
        client.stream("POST", URL, json=request) as response,
    ):
        pieces = [piece async for piece in response.aiter_raw()]
    assert session.played == 1
    return pieces


# -- fragmentation ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_recorded_fragmentation_is_byte_identical(cassette: Path) -> None:
    pieces = await _pieces(cassette)
    assert [len(p) for p in pieces] == SIZES
    assert b"".join(pieces) == BODY


def test_sync_replay_keeps_recorded_fragments(cassette: Path) -> None:
    with use_cassette(cassette), httpx.Client() as client, client.stream("POST", URL, json=REQUEST) as response:
        pieces = list(response.iter_raw())
        assert response.headers.get("content-length") is None  # re-cut bodies lose their framing
    assert [len(p) for p in pieces] == SIZES


@pytest.mark.asyncio
async def test_bytes_fragmentation_serves_one_byte_pieces(cassette: Path) -> None:
    pieces = await _pieces(cassette, fragmentation="bytes")
    assert len(pieces) == len(BODY)
    assert {len(p) for p in pieces} == {1}
    assert b"".join(pieces) == BODY


@pytest.mark.asyncio
async def test_random_fragmentation_is_a_different_reproducible_cut(cassette: Path) -> None:
    pieces = await _pieces(cassette, fragmentation="random:7")
    sizes = [len(p) for p in pieces]
    assert b"".join(pieces) == BODY
    assert sizes != SIZES and len(pieces) > 1
    assert [len(p) for p in await _pieces(cassette, fragmentation="random:7")] == sizes
    assert [len(p) for p in await _pieces(cassette, fragmentation="random:8")] != sizes


@pytest.mark.asyncio
async def test_single_fragmentation_serves_one_piece(cassette: Path) -> None:
    assert await _pieces(cassette, fragmentation="single") == [BODY]


def test_unknown_fragmentation_lists_the_valid_ones(cassette: Path) -> None:
    with pytest.raises(CassetteError, match="valid: recorded, single, bytes, random"):
        use_cassette(cassette, fragmentation="chunky").__enter__()


# -- pacing -------------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> RecordingClock:
    """The pacing clock, faked: the tests read the sleeps a replay asked for, not wall time."""
    fake = RecordingClock()
    monkeypatch.setattr("dsh_replay.cassette.pacing.CLOCK", fake)
    return fake


GAPS = [(b - a) / 1000.0 for a, b in itertools.pairwise(TIMES)]  # none before the first piece, at 0 ms


@pytest.mark.asyncio
async def test_speed_one_replays_at_the_recorded_pace(cassette: Path, clock: RecordingClock) -> None:
    pieces = await _pieces(cassette, speed=1.0)
    assert [len(p) for p in pieces] == SIZES
    assert clock.waits == pytest.approx([gap for gap in GAPS])
    assert clock.libraries == {"asyncio"}
    assert sum(clock.waits) == pytest.approx(TIMES[-1] / 1000.0)


@pytest.mark.asyncio
async def test_speed_zero_never_sleeps_async(cassette: Path, clock: RecordingClock) -> None:
    assert b"".join(await _pieces(cassette, speed=0)) == BODY
    assert clock.sleeps == []
    # the same cassette at speed 1 does sleep (so the fake clock does catch the sleeps)
    await _pieces(cassette, speed=1)
    assert sum(clock.waits) == pytest.approx(TIMES[-1] / 1000.0)


def test_speed_zero_never_sleeps_sync(cassette: Path, clock: RecordingClock) -> None:
    def replay(speed: float) -> bytes:
        with use_cassette(cassette, speed=speed), httpx.Client() as client:
            return client.post(URL, json=REQUEST).content

    assert replay(0) == BODY
    assert clock.sleeps == []
    assert replay(2.0) == BODY
    assert clock.waits == pytest.approx([2.0 * gap for gap in GAPS])
    assert clock.libraries == {"sync"}


@pytest.mark.parametrize("speed", [-1, math.inf, math.nan, 1e308, 100.5])
def test_a_speed_that_is_negative_or_not_a_finite_factor_is_refused(cassette: Path, speed: float) -> None:
    with pytest.raises(CassetteError, match=r"replay speed must be a number from 0 to 100 .*; got "):
        use_cassette(cassette, speed=speed).__enter__()


def test_the_largest_speed_is_accepted(cassette: Path) -> None:
    with use_cassette(cassette, speed=100) as session:
        assert session.speed == 100.0


# -- matching -----------------------------------------------------------------------


def test_changed_request_body_fails_with_the_field_and_a_diff(cassette: Path) -> None:
    changed = json.loads(json.dumps(REQUEST))
    changed["messages"][1]["content"] = "hello"
    with use_cassette(cassette), httpx.Client() as client, pytest.raises(CassetteError) as caught:
        client.post(URL, json=changed)
    message = str(caught.value)
    assert str(cassette) in message
    assert "differs in: body" in message
    assert "changed JSON fields: messages[1].content" in message
    assert "--- recorded request\n+++ this request" in message
    assert '-      "content": "hi",' in message or '-      "content": "hi"' in message
    assert '+      "content": "hello"' in message
    assert "--record-mode=rewrite" in message


def test_json_key_order_does_not_matter(cassette: Path) -> None:
    reordered = {"messages": REQUEST["messages"], "stream": True, "model": "gpt-4o-mini"}
    raw = json.dumps(reordered, indent=4).encode()
    assert raw != json.dumps(REQUEST).encode()
    with use_cassette(cassette) as session, httpx.Client() as client:
        response = client.post(URL, content=raw, headers={"content-type": "application/json"})
    assert response.content == BODY
    assert session.played == 1


def test_repeated_identical_requests_play_in_recorded_order(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    first = _interaction(b"data: first\n\n", sizes=[13], times=[0.0])
    second = _interaction(b"data: second\n\n", sizes=[14], times=[0.0])
    Cassette(path=path, interactions=[first, second]).save()
    with use_cassette(path) as session, httpx.Client() as client:
        bodies = [client.post(URL, json=REQUEST).content for _ in range(2)]
        with pytest.raises(CassetteError, match="already played"):
            client.post(URL, json=REQUEST)
    assert bodies == [b"data: first\n\n", b"data: second\n\n"]
    assert session.played == 2


def test_a_different_path_is_reported(cassette: Path) -> None:
    with use_cassette(cassette), httpx.Client() as client, pytest.raises(CassetteError) as caught:
        client.post("http://127.0.0.1:9/v1/completions", json=REQUEST)
    message = str(caught.value)
    assert "differs in: path" in message
    assert f"closest recorded request (interaction 0): POST {URL}" in message


def test_a_different_query_is_reported(cassette: Path) -> None:
    with use_cassette(cassette), httpx.Client() as client, pytest.raises(CassetteError, match="differs in: query"):
        client.post(URL + "?alt=sse", json=REQUEST)


def test_host_and_port_do_not_take_part_in_matching(cassette: Path) -> None:
    with use_cassette(cassette), httpx.Client() as client:
        response = client.post("https://api.example.test/v1/chat/completions", json=REQUEST)
    assert response.content == BODY


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        emulator.add("POST", "/v1/chat/completions", ScriptedResponse.streaming(BODY))
        yield emulator


def test_missing_cassette_in_none_mode_names_the_file_and_the_command(
    emu: ProviderEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(CassetteError) as caught, use_cassette(path, "none"), httpx.Client() as client:
        client.post(emu.url("/v1/chat/completions"), json=REQUEST)
    assert caught.value.path == str(path)
    assert str(path) in str(caught.value)
    assert "--record-mode=once" in str(caught.value)
    assert emu.requests == []
    assert not path.exists()


def test_an_unmatched_request_in_none_mode_never_reaches_the_network(
    emu: ProviderEmulator, cassette: Path
) -> None:
    changed = dict(REQUEST, model="gpt-4o")
    with use_cassette(cassette), httpx.Client() as client, pytest.raises(CassetteError, match="model"):
        client.post(emu.url("/v1/chat/completions"), json=changed)
    assert emu.requests == []


# -- failures --------------------------------------------------------------------------


def _read(path: Path, fault: Fault | None, timeout: float = 5.0) -> tuple[bytes, BaseException | None]:
    received = b""
    with use_cassette(path, fault=fault), httpx.Client(timeout=timeout) as client:
        try:
            with client.stream("POST", URL, json=REQUEST) as response:
                for piece in response.iter_raw():
                    received += piece
        except httpx.TransportError as exc:
            return received, exc
    return received, None


async def _aread(path: Path, fault: Fault | None, timeout: float = 5.0) -> tuple[bytes, BaseException | None]:
    received = b""
    async with use_cassette(path, fault=fault), httpx.AsyncClient(timeout=timeout) as client:
        try:
            async with client.stream("POST", URL, json=REQUEST) as response:
                async for piece in response.aiter_raw():
                    received += piece
        except httpx.TransportError as exc:
            return received, exc
    return received, None


@pytest.mark.parametrize("at", [0, 10, 44, len(BODY) - 1])
def test_fault_truncate_ends_cleanly_after_n_bytes(cassette: Path, at: int) -> None:
    received, error = _read(cassette, Fault("truncate", at=at))
    assert error is None
    assert received == BODY[:at]


def test_a_reset_right_after_the_last_byte_strikes_a_reader_of_the_whole_body(cassette: Path) -> None:
    received, error = _read(cassette, Fault("reset", at=len(BODY)))
    assert type(error) is httpx.ReadError
    assert received == BODY


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault("truncate", at=len(BODY)), f"truncate fault at byte {len(BODY)} can never strike: .* have {len(BODY)} bytes"),
        (Fault("reset", at=10**9), f"reset fault at byte 1000000000 can never strike: .* have {len(BODY)} bytes"),
        (Fault("stall", at=5, interaction=1), "fault targets interaction 1 but cassette .* has 1 \\(numbered from 0\\)"),
    ],
)
def test_a_fault_that_can_never_strike_is_refused(cassette: Path, fault: Fault, message: str) -> None:
    with pytest.raises(CassetteError, match=message):
        use_cassette(cassette, fault=fault).__enter__()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"at": 1.5}, r"byte offset \(at\) must be an integer >= 0, got 1.5"),
        ({"at": "5"}, r"byte offset \(at\) must be an integer >= 0, got '5'"),
        ({"at": True}, r"byte offset \(at\) must be an integer >= 0, got True"),
        ({"at": 3, "interaction": -1}, r"interaction must be an interaction number \(from 0\) or None, got -1"),
    ],
)
def test_a_fault_of_the_wrong_shape_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CassetteError, match=message):
        Fault("reset", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("at", [0, 44])
def test_fault_reset_raises_read_error_after_n_bytes(cassette: Path, at: int) -> None:
    received, error = _read(cassette, Fault("reset", at=at))
    assert type(error) is httpx.ReadError
    assert received == BODY[:at]


def test_fault_stall_raises_read_timeout_after_the_read_timeout(cassette: Path, clock: RecordingClock) -> None:
    received, error = _read(cassette, Fault("stall", at=50), timeout=0.2)
    assert type(error) is httpx.ReadTimeout
    assert "reset" not in str(error)
    assert received == BODY[:50]
    assert clock.sleeps == [("sync", 0.2)]  # the client's read timeout, nothing before it at speed 0


@pytest.mark.asyncio
async def test_async_faults(cassette: Path, clock: RecordingClock) -> None:
    assert await _aread(cassette, Fault("truncate", at=7)) == (BODY[:7], None)
    received, error = await _aread(cassette, Fault("reset", at=7))
    assert (received, type(error)) == (BODY[:7], httpx.ReadError)
    assert clock.sleeps == []
    received, error = await _aread(cassette, Fault("stall", at=7), timeout=0.2)
    assert (received, type(error)) == (BODY[:7], httpx.ReadTimeout)
    assert clock.sleeps == [("asyncio", 0.2)]  # the client's read timeout


def test_fault_limited_to_one_interaction(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    Cassette(path=path, interactions=[_interaction(), _interaction()]).save()
    with use_cassette(path, fault=Fault("truncate", at=5, interaction=1)), httpx.Client() as client:
        bodies = [client.post(URL, json=REQUEST).content for _ in range(2)]
    assert bodies == [BODY, BODY[:5]]


@pytest.mark.parametrize(("kind", "at"), [("explode", 1), ("reset", -1)])
def test_bad_faults_are_refused(kind: str, at: int) -> None:
    with pytest.raises(CassetteError, match="fault"):
        Fault(kind, at=at)  # type: ignore[arg-type]


def test_recorded_error_replays_with_its_type_after_the_same_bytes(tmp_path: Path) -> None:
    path = tmp_path / "reset.yaml"
    text = Cassette(path=path, interactions=[_interaction()]).dumps()
    # a recording that broke at byte 44 with a protocol error, written by hand
    text = text.replace("complete: true", "complete: true\n      error: {kind: RemoteProtocolError, "
                        "message: peer closed connection, offset: 44, at_ms: 120.0}")
    path.write_text(text)
    received, error = _read(path, None)
    assert type(error) is httpx.RemoteProtocolError
    assert "peer closed connection" in str(error)
    assert received == BODY[:44]


def test_recorded_error_keeps_its_timing_at_speed_one(tmp_path: Path, clock: RecordingClock) -> None:
    path = tmp_path / "late-reset.yaml"
    interaction = _interaction()
    interaction.error = RecordedError("ReadError", "connection reset", len(BODY), 450.0)
    Cassette(path=path, interactions=[interaction]).save()
    with use_cassette(path, speed=1), httpx.Client() as client, pytest.raises(httpx.ReadError):
        client.post(URL, json=REQUEST)
    # the recorded gaps, then the 150 ms from the last byte (300 ms) to the reset (450 ms)
    assert clock.waits == pytest.approx([*GAPS, 0.15])
    clock.sleeps.clear()
    with use_cassette(path, speed=0), httpx.Client() as client, pytest.raises(httpx.ReadError):
        client.post(URL, json=REQUEST)
    assert clock.sleeps == []
