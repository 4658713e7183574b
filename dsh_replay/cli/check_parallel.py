"""``dsh-replay check -n N``: the cassette cases spread over worker processes.

Each worker is a fork of the checking process (the route table, the imported
adapters and the warmed-up state come with it, nothing is pickled but paths
and rows). Workers take small batches from the parent, two at a time so that
none waits for the next, and write back one row per case as it finishes, a
line of JSON on a pipe of their own; so a worker that dies costs one FAIL row
— the case it was replaying — and a fresh worker takes over the rest of its
batches. The parent reads whatever rows a pipe holds in one go, so it wakes a
few hundred times a run, not once per row. Every case is replayed by exactly
one worker, so ``--update`` writes each golden once.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

import orjson

__all__ = ["check_in_workers", "crash_row"]

Row = dict[str, Any]


class RunBatch(Protocol):
    """Replays a batch of cases in order, calling back with each case's row; ``aclose`` when done."""

    async def __call__(self, batch: list[Path], report: Callable[[Path, Row], None]) -> None: ...

    async def aclose(self) -> None: ...


#: small enough to balance the workers at the end of a run, big enough that messages cost little
_BATCH = 8
#: batches sent to a worker ahead: it starts the next one without waiting for the parent
_IN_FLIGHT = 2

#: the most bytes of rows taken from a pipe at once: all it holds (a pipe holds 64 KiB)
_READ = 1 << 16

#: seconds the parent waits between taking rows: a pipe holds far more rows than two workers write meanwhile
_PAUSE = 0.002

#: seconds without a row from any busy worker before they count as hung (a replay takes milliseconds)
HANG_SECONDS = 120.0


def crash_row(path: Path, label: str, exitcode: int | None, *, hung: bool = False) -> Row:
    how = f"exit code {exitcode}" if exitcode is not None and exitcode >= 0 else f"signal {-(exitcode or 0)}"
    if hung:
        return {**crash_row(path, label, exitcode), "verdict": "FAIL worker hung", "problem": (
            f"the worker process replaying {path} gave no result for {HANG_SECONDS:.0f} s and was stopped; "
            "run it alone with dsh-replay check -n 1 to see where it waits")}
    return {
        "case": label, "route": None, "path": str(path), "fragments": 0, "chunks": 0, "blocks": 0, "ok": False,
        "verdict": "FAIL worker crashed", "seconds": 0.0, "where": None,
        "problem": (f"the worker process replaying {path} died ({how}) before it finished the case; "
                    "run it alone with dsh-replay check -n 1 to see why"),
    }


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a row longer than the pipe holds goes in several writes
        view = view[os.write(fd, view):]


def _worker(connection: Connection, rows: int, run_batch: RunBatch) -> None:
    """Replay the batches the parent sends; each row is one line on ``rows``, an empty line ends a batch."""
    async def serve() -> None:
        while True:
            batch: list[str] | None = connection.recv()
            if batch is None:
                break
            await run_batch([Path(name) for name in batch],
                            lambda path, row: _write_all(rows, orjson.dumps(row) + b"\n"))
            _write_all(rows, b"\n")  # the batch is done: ready for the next
        await run_batch.aclose()

    try:
        asyncio.run(serve())
    except (EOFError, BrokenPipeError, KeyboardInterrupt):  # the parent is gone or interrupted
        pass
    finally:
        connection.close()
        os.close(rows)


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection
    #: the read end of the worker's row pipe, and what it holds of a row not yet ended
    rows: int
    partial: bytes = b""
    #: indexes of the cases sent and not yet reported, in order
    pending: deque[int] = field(default_factory=deque)
    #: batches sent whose end is not yet reported
    batches: int = 0
    #: a batch could not be sent: it is dead, and what its pipe still holds is read before it counts as lost
    gone: bool = False

    @property
    def busy(self) -> bool:
        return self.batches > 0 or self.gone

    def close(self) -> None:
        """Close the parent's ends of the worker's two pipes."""
        self.connection.close()
        os.close(self.rows)


def check_in_workers(
    cassettes: list[Path],
    jobs: int,
    run_batch: RunBatch,
    label: Callable[[Path], str],
    on_row: Callable[[int, Row], None],
) -> list[Row]:
    """The rows of ``cassettes``, in their order, replayed by up to ``jobs`` forked workers.

    Call it with the collector frozen (``gc.freeze()``): a collection in a worker
    would otherwise walk, and so copy page by page, the whole heap it inherits.
    """
    context = multiprocessing.get_context("fork")
    rows: list[Row | None] = [None] * len(cassettes)
    queue = deque(range(len(cassettes)))
    workers: list[_Worker] = []
    done = 0

    def start() -> None:
        parent, child = context.Pipe()
        rows_out, rows_in = os.pipe()
        process = context.Process(target=_worker, args=(child, rows_in, run_batch), daemon=True)
        process.start()
        # only the worker holds the write end: when it dies, its pipe ends and the parent sees it
        child.close()
        os.close(rows_in)
        workers.append(_Worker(process, parent, rows_out))

    def feed(worker: _Worker) -> None:
        if worker.gone:
            return
        batch = [queue.popleft() for _ in range(min(_BATCH, len(queue)))]
        try:
            worker.connection.send([str(cassettes[n]) for n in batch])
        except OSError:  # it died after its last row: the end of its pipe says so next; the batch waits
            queue.extendleft(reversed(batch))
            worker.gone = True
            return
        worker.pending.extend(batch)
        worker.batches += 1

    def record(index: int, row: Row) -> None:
        nonlocal done
        rows[index] = row
        done += 1
        on_row(done, row)

    def take(worker: _Worker) -> bool:
        """Every row the worker's pipe holds; False when the worker is gone."""
        try:
            data = os.read(worker.rows, _READ)
        except OSError:
            data = b""
        if not data:
            return False
        *lines, worker.partial = (worker.partial + data).split(b"\n")
        for line in lines:
            if line:
                record(worker.pending.popleft(), orjson.loads(line))
                continue
            worker.batches -= 1  # a batch finished
            if queue:
                feed(worker)
        return True

    for _ in range(min(jobs, len(cassettes))):
        start()
    try:
        for _ in range(_IN_FLIGHT):
            for worker in workers:
                if queue:
                    feed(worker)
        while any(worker.busy for worker in workers):
            busy = {worker.rows: worker for worker in workers if worker.busy}
            ready_now = multiprocessing.connection.wait(list(busy), timeout=HANG_SECONDS)
            if not ready_now:
                # nothing came back for that long: every busy worker is stuck; each fails its
                # current case and fresh workers take the rest, so the run always ends
                for worker in list(busy.values()):
                    worker.process.kill()
                    _lost(worker, cassettes, label, record, queue, hung=True)
                    workers.remove(worker)
                for _ in range(min(jobs - len(workers), len(queue))):
                    start()
                    feed(workers[-1])
                continue
            for ready in ready_now:
                worker = busy[ready]  # type: ignore[index]
                if not take(worker):
                    _lost(worker, cassettes, label, record, queue)
                    workers.remove(worker)
                    if queue:
                        start()
                        feed(workers[-1])
            # Rows pile up in the pipes meanwhile, and the next wake-up takes them all: woken for each
            # row, this process would take a core from a worker a thousand times a second.
            time.sleep(_PAUSE)
    finally:
        for worker in workers:
            _stop(worker)
    return [row for row in rows if row is not None]


def _lost(worker: _Worker, cassettes: list[Path], label: Callable[[Path], str],
          record: Callable[[int, Row], None], queue: deque[int], *, hung: bool = False) -> None:
    """A worker died: its current case fails, the rest of its batch goes back to the queue."""
    worker.process.join(timeout=5)
    worker.close()
    if worker.pending:  # empty: it died between its batch's last row and the batch's end
        current = worker.pending.popleft()
        record(current, crash_row(cassettes[current], label(cassettes[current]), worker.process.exitcode, hung=hung))
    queue.extendleft(reversed(worker.pending))
    worker.pending.clear()


def _stop(worker: _Worker) -> None:
    with contextlib.suppress(OSError, ValueError):  # already gone
        worker.connection.send(None)
    worker.process.join(timeout=5)
    if worker.process.is_alive():
        worker.process.kill()
        worker.process.join(timeout=5)
    worker.close()
