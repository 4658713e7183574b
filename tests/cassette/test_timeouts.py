"""``within``: a time limit on one await, run in the caller's task."""

from __future__ import annotations

import asyncio

import pytest

from dsh_replay.cassette.timeouts import within

pytestmark = pytest.mark.asyncio


async def _task_of_work() -> asyncio.Task[object] | None:
    return asyncio.current_task()


async def test_the_work_runs_in_the_callers_task_and_its_result_is_returned() -> None:
    assert await within(5.0, _task_of_work()) is asyncio.current_task()
    assert await within(None, _task_of_work()) is asyncio.current_task()


async def test_work_that_outlasts_the_limit_is_cancelled_with_a_timeout_error() -> None:
    never = asyncio.get_running_loop().create_future()
    with pytest.raises(asyncio.TimeoutError):
        await within(0.01, never)
    assert never.cancelled()


async def test_a_shielded_wait_that_times_out_leaves_what_it_waited_for() -> None:
    pending = asyncio.get_running_loop().create_future()
    with pytest.raises(asyncio.TimeoutError):
        await within(0.01, asyncio.shield(pending))
    assert not pending.done()
    pending.set_result(None)


async def test_bytes_already_there_are_read_at_a_limit_already_reached() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b"GET / HTTP/1.1\r\n")
    assert await within(0.0, reader.read(100)) == b"GET / HTTP/1.1\r\n"
