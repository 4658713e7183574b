"""Cassettes that never cross: the active block is per task (a context variable), not per process.

Every test opens all its blocks before any request is made, and closes none
before every request is done (two gates), so the blocks are all active while
any of them serves; with a pacing clock that yields at every piece, the
replays also interleave piece by piece. Each stream must still equal the
golden of its own cassette.
"""

from __future__ import annotations

import asyncio
import contextvars
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest

from dsh_replay import CassetteError, use_cassette
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.golden import golden_path_for
from dsh_replay.cassette.intercept import active_handlers
from dsh_replay.cassette.pacing import Clock
from dsh_replay.cassette.replay import AdapterCache, case_options, run_adapter
from dsh_replay.cassette.store import Cassette

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"
ROUTES = RouteTable.load()
TEXT, TOOL_CALL = CASSETTES / "openai" / "text.yaml", CASSETTES / "openai" / "tool-call.yaml"
#: ten cases of five routes, each with a golden of its own
TEN = [CASSETTES / route / f"{case}.yaml" for route in ("openai", "anthropic", "gemini", "ollama", "deepseek")
       for case in ("text", "tool-call")]

T = TypeVar("T")


class YieldingClock(Clock):
    """A pacing clock whose time stands still and whose every sleep is a checkpoint: paced at speed 1,
    a replay hands control to the other tasks at every piece, without waiting."""

    def now(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        pass

    async def async_sleep(self, seconds: float) -> None:
        await anyio.sleep(0)


@pytest.fixture
def interleaving(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr("dsh_replay.cassette.pacing.CLOCK", YieldingClock())
    return 1.0  # the speed that makes replays sleep (through the clock above) between pieces


class Gate:
    """Opens when ``parties`` tasks wait on it (asyncio or trio)."""

    def __init__(self, parties: int) -> None:
        self.parties, self.arrived = parties, 0
        self.opened: anyio.Event | None = None

    async def wait(self) -> None:
        if self.opened is None:
            self.opened = anyio.Event()
        self.arrived += 1
        if self.arrived == self.parties:
            self.opened.set()
        await self.opened.wait()


def goldens(path: Path) -> list[bytes]:
    count = 1 + len(Cassette.load(path).metadata.get("follow_ups") or [])
    return [golden_path_for(path, call).read_bytes() for call in range(1, count + 1)]


async def replay_calls(path: Path, adapters: AdapterCache | None = None) -> list[bytes]:
    """Run the adapter of ``path``'s route for each recorded call; no block is opened here."""
    cassette = Cassette.load(path)
    route, calls, base_url = case_options(cassette)
    if adapters is not None:
        adapter = adapters.adapter(route, base_url=base_url, drop_reasoning=False)
    else:
        adapter = ROUTES.adapter(route, base_url=base_url)
    return [(await run_adapter(adapter, options)).golden_bytes() for options in calls]


async def replay_in_block(path: Path, gates: tuple[Gate, Gate], *, speed: float = 0.0,
                          adapters: AdapterCache | None = None) -> list[bytes]:
    opened, done = gates
    async with use_cassette(path, "none", speed=speed) as session:
        await opened.wait()  # every block is open before any request is made
        chunks = await replay_calls(path, adapters)
        await done.wait()  # and stays open until every request is done
    assert session.unplayed == []
    return chunks


def gates(parties: int) -> tuple[Gate, Gate]:
    return Gate(parties), Gate(parties)


def in_bare_thread(work: Callable[[], T]) -> T | BaseException:
    """``work()`` in a new thread that does not run in a copy of this context."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    return out[0]  # type: ignore[no-any-return]


# -- tasks --------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_two_concurrent_blocks_each_replay_their_own_cassette() -> None:
    # the repro of the issue: the innermost block entered used to answer every task
    both = gates(2)
    text, tool_call = await asyncio.gather(replay_in_block(TEXT, both), replay_in_block(TOOL_CALL, both))
    assert text == goldens(TEXT)
    assert tool_call == goldens(TOOL_CALL)


@pytest.mark.asyncio
async def test_ten_gathered_blocks_over_one_shared_replay_client_match_their_goldens(interleaving: float) -> None:
    adapters = AdapterCache(ROUTES)  # one _ReplayClient for every task, as `dsh-replay check` shares it
    every = gates(len(TEN))
    try:
        results = await asyncio.gather(*(replay_in_block(path, every, speed=interleaving, adapters=adapters)
                                         for path in TEN))
    finally:
        await adapters.aclose()
    assert results == [goldens(path) for path in TEN]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_anyio_task_group_of_blocks_matches_the_goldens(backend: str, interleaving: float) -> None:
    async def main() -> dict[Path, list[bytes]]:
        every, results = gates(len(TEN)), {}

        async def one(path: Path) -> None:
            results[path] = await replay_in_block(path, every, speed=interleaving)

        async with anyio.create_task_group() as group:
            for path in TEN:
                group.start_soon(one, path)
        return results

    results = anyio.run(main, backend=backend)
    assert results == {path: goldens(path) for path in TEN}


@pytest.mark.asyncio
async def test_a_task_started_inside_a_block_inherits_it_and_a_sibling_block_stays_apart() -> None:
    opened, done = both = gates(2)

    async def spawner() -> list[bytes]:
        async with use_cassette(TEXT, "none"):
            await opened.wait()
            chunks = await asyncio.create_task(replay_calls(TEXT))
            await done.wait()
            return chunks

    inherited, sibling = await asyncio.gather(spawner(), replay_in_block(TOOL_CALL, both))
    assert inherited == goldens(TEXT)
    assert sibling == goldens(TOOL_CALL)


@pytest.mark.asyncio
async def test_nested_blocks_the_inner_serves_inside_it_and_the_outer_again_after() -> None:
    third = CASSETTES / "anthropic" / "text.yaml"
    opened, done = both = gates(2)

    async def nested() -> list[list[bytes]]:
        async with use_cassette(TEXT, "none") as outer:
            async with use_cassette(TOOL_CALL, "none") as inner:
                await opened.wait()  # a sibling task's block opens after these two
                inside = await replay_calls(TOOL_CALL)
                assert active_handlers() == [outer, inner]
            assert active_handlers() == [outer]
            after = await replay_calls(TEXT)  # the outer serves again, not the sibling's newer block
            await done.wait()
        assert (outer.played, inner.played) == (1, 1)
        return [inside, after]

    (inside, after), sibling = await asyncio.gather(nested(), replay_in_block(third, both))
    assert (inside, after, sibling) == (goldens(TOOL_CALL), goldens(TEXT), goldens(third))
    assert active_handlers() == []


# -- threads --------------------------------------------------------------------------------


def test_threads_run_under_copy_context_see_the_block_of_their_context() -> None:
    paths = TEN[:4]
    barrier = threading.Barrier(len(paths))

    def work(path: Path) -> list[bytes]:
        barrier.wait(timeout=30)  # every thread replays while all four blocks are active
        return asyncio.run(replay_calls(path))

    with ExitStack() as stack:
        contexts = []
        for path in paths:
            stack.enter_context(use_cassette(path, "none"))
            contexts.append(contextvars.copy_context())  # its innermost block is this path's
        with ThreadPoolExecutor(len(paths)) as pool:
            futures = [pool.submit(context.run, work, path) for context, path in zip(contexts, paths, strict=True)]
            results = [future.result(timeout=60) for future in futures]
    assert results == [goldens(path) for path in paths]


def test_a_bare_thread_has_no_block_of_its_own_and_is_served_by_the_only_active_one() -> None:
    def work() -> tuple[list[Any], list[bytes]]:
        return active_handlers(), asyncio.run(replay_calls(TEXT))

    with use_cassette(TEXT, "none") as session:
        result = in_bare_thread(work)
    assert result == ([], goldens(TEXT))
    assert session.played == 1


def test_a_bare_thread_is_refused_while_several_blocks_are_active_elsewhere() -> None:
    with use_cassette(TEXT, "none"), use_cassette(TOOL_CALL, "none"):
        result = in_bare_thread(lambda: asyncio.run(replay_calls(TEXT)))
    assert isinstance(result, CassetteError)
    assert "no cassette block is active, while 2 are active elsewhere" in str(result)
    assert "contextvars.copy_context()" in str(result)


# -- patching --------------------------------------------------------------------------------


def test_clients_stay_patched_while_any_block_anywhere_is_active() -> None:
    original = httpx.AsyncClient._transport_for_url
    first, second = use_cassette(TEXT, "none"), use_cassette(TOOL_CALL, "none")
    first.__enter__()
    patched = httpx.AsyncClient._transport_for_url
    assert patched is not original
    entered = in_bare_thread(lambda: (second.__enter__(), active_handlers())[1])
    assert entered == [second.session]  # another context, its own block only
    assert active_handlers() == [first.session]
    first.__exit__(None, None, None)
    assert httpx.AsyncClient._transport_for_url is patched  # the other block still needs it
    assert in_bare_thread(lambda: second.__exit__(None, None, None)) is None
    assert httpx.AsyncClient._transport_for_url is original


# vcrpy (whose matchers the cassette engine uses) imports every client it knows when it is first
# imported; these runs import it while aiohttp and requests look absent, so that only the cassette
# engine itself could import them afterwards
_PREAMBLE = (
    "import sys\n"
    "sys.modules.update(aiohttp=None, requests=None, httpx2=None)\n"
    "import vcr.matchers\n"
    "del sys.modules['aiohttp'], sys.modules['requests'], sys.modules['httpx2']\n"
    "from dsh_replay import use_cassette\n"
)


def _run_python(tmp_path: Path, code: str) -> list[str]:
    path = tmp_path / "empty.yaml"
    Cassette(path=path, interactions=[]).save()
    done = subprocess.run([sys.executable, "-c", _PREAMBLE + code, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_library_that_is_not_imported_is_neither_imported_nor_patched(tmp_path: Path) -> None:
    lines = _run_python(tmp_path, (
        "with use_cassette(sys.argv[1]):\n"
        "    print(sorted(name for name in sys.modules if name.split('.')[0] in ('aiohttp', 'requests', 'httpx2')"
        " or name.startswith('dsh_replay.cassette.clients_a') or name.startswith('dsh_replay.cassette.clients_r')))\n"
    ))
    assert lines == ["[]"]


def test_a_library_imported_inside_a_block_is_patched_until_the_block_ends(tmp_path: Path) -> None:
    lines = _run_python(tmp_path, (
        "with use_cassette(sys.argv[1]):\n"
        "    import aiohttp, requests\n"
        "    print(hasattr(aiohttp.ClientSession._request, '__wrapped__'),"
        " hasattr(requests.adapters.HTTPAdapter.send, '__wrapped__'))\n"
        "print(hasattr(aiohttp.ClientSession._request, '__wrapped__'),"
        " hasattr(requests.adapters.HTTPAdapter.send, '__wrapped__'))\n"
    ))
    assert lines == ["True True", "False False"]
