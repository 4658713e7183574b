"""SPEC §11 fault injection, for every route: a stream cut, reset or stalled at any
point, an undecodable or non-JSON event — each gives its typed error after the
chunks already yielded, never a hang and never a forged ``finish``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dsh_replay import (
    Fault,
    Finish,
    MalformedStreamError,
    StreamInterruptedError,
    StreamTimeoutError,
    UsageChunk,
    check_chunk_sequence,
    use_cassette,
)
from dsh_replay.adapters import BUILTIN_ROUTES, adapter_class
from dsh_replay.cassette.replay import Outcome, case_options, run_adapter, trace_body
from dsh_replay.cassette.store import Cassette

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
ROUTES = sorted(BUILTIN_ROUTES)
READ_TIMEOUT = 0.2


def text_case(route: str) -> tuple[Path, Cassette]:
    path = CASSETTES / route / "text.yaml"
    return path, Cassette.load(path)


def last_event_start(body: bytes, route: str) -> int:
    """Where the provider's last needed event begins: cutting before it loses the end of the turn.

    Chat Completions streams end with ``data: [DONE]``, but a body that stops after
    the finish reason and the usage chunk has said everything (some servers never
    send ``[DONE]``), so for them the last needed event is the one before it.
    """
    if route == "ollama":
        return body.rstrip(b"\n").rfind(b"\n") + 1
    separator = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    end = body.rstrip(b"\r\n")
    if end.endswith(b"data: [DONE]"):
        end = end[: -len(b"data: [DONE]")].rstrip(b"\r\n")
    return end.rfind(separator) + len(separator)


async def replay_with(route: str, fault: Fault) -> Outcome:
    path, cassette = text_case(route)
    _, (options,), base_url = case_options(cassette)
    adapter = adapter_class(route)("dsh-replay-offline", base_url=base_url, read_timeout=READ_TIMEOUT)
    async with use_cassette(path, "none", fault=fault):
        return await run_adapter(adapter, options)


def assert_no_forged_finish(outcome: Outcome) -> None:
    assert not any(isinstance(chunk, (Finish, UsageChunk)) for chunk in outcome.chunks)
    # what was yielded before the failure still obeys the rules
    assert check_chunk_sequence(outcome.chunks, complete=False) == []


@pytest.mark.asyncio
@pytest.mark.parametrize("share", [0.0, 0.2, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("route", ROUTES)
async def test_a_body_cut_short_is_an_interrupted_stream(route: str, share: float) -> None:
    body = text_case(route)[1].interactions[0].body
    at = int(share * (last_event_start(body, route) - 1))
    outcome = await replay_with(route, Fault("truncate", at=at))
    assert isinstance(outcome.raised, StreamInterruptedError), (at, outcome.raised)
    assert outcome.raised.route == route
    assert_no_forged_finish(outcome)


@pytest.mark.asyncio
@pytest.mark.parametrize("route", ROUTES)
async def test_a_connection_reset_mid_stream_is_an_interrupted_stream(route: str) -> None:
    body = text_case(route)[1].interactions[0].body
    outcome = await replay_with(route, Fault("reset", at=last_event_start(body, route) // 2))
    assert isinstance(outcome.raised, StreamInterruptedError)
    assert "connection" in str(outcome.raised)
    assert_no_forged_finish(outcome)


@pytest.mark.asyncio
@pytest.mark.parametrize("route", ROUTES)
async def test_a_stalled_stream_times_out_instead_of_hanging(route: str) -> None:
    body = text_case(route)[1].interactions[0].body
    started = time.monotonic()
    outcome = await replay_with(route, Fault("stall", at=last_event_start(body, route) // 2))
    assert isinstance(outcome.raised, StreamTimeoutError)
    # a hang guard, not a speed check: the stall ends by the read timeout, not never
    assert time.monotonic() - started < max(30.0, 10 * READ_TIMEOUT)
    assert_no_forged_finish(outcome)


def first_payload(body: bytes, route: str) -> int:
    """Offset of the first JSON payload of the body."""
    return body.index(b"{") if route == "ollama" else body.index(b"data:") + len(b"data:")


@pytest.mark.asyncio
@pytest.mark.parametrize("route", ROUTES)
async def test_bytes_that_are_not_utf8_are_a_malformed_stream(route: str) -> None:
    body = text_case(route)[1].interactions[0].body
    at = first_payload(body, route)
    broken = body[:at] + b"\xff\xfe" + body[at:]
    outcome = await trace_body(broken, route=route)
    assert isinstance(outcome.raised, MalformedStreamError)
    assert outcome.raised.raw  # the offending bytes travel with the error
    assert_no_forged_finish(outcome)


@pytest.mark.asyncio
@pytest.mark.parametrize("route", ROUTES)
async def test_an_event_that_is_not_json_is_a_malformed_stream(route: str) -> None:
    body = text_case(route)[1].interactions[0].body
    at = first_payload(body, route)
    broken = body[:at] + b" {not json" + body[at:]
    outcome = await trace_body(broken, route=route)
    assert isinstance(outcome.raised, MalformedStreamError)
    assert outcome.raised.route == route
    assert_no_forged_finish(outcome)
