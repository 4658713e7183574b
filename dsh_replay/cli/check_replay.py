"""One ``dsh-replay check`` case: replayed, judged as it streams, its chunks not kept.

``replay_case`` (the core the fixture and the report share) keeps every chunk
an adapter yields: a test is handed them. ``check`` only judges them, and for
that it needs, per call, the rules run chunk by chunk as they arrive, the
golden bytes compared chunk by chunk with the golden file (:class:`GoldenStream`),
and two counts. So this replay keeps those, and drops each chunk once it is
judged and written: a 200 MB body is about 1.5 M chunks, and a chunk object with
its golden line kept apart costs more than the body's bytes it came from.

The rest — reading the cassette, choosing the adapter, judging rules, golden and
unplayed interactions — is ``replay_case``'s own, so the verdicts are the same.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..adapters.route_table import RouteTable
from ..cassette.adapter_settings import adapter_settings
from ..cassette.golden import golden_path_for
from ..cassette.replay import AdapterCache, CaseResult, Outcome, _judge_case, case_options
from ..cassette.session import use_cassette
from ..cassette.store import Cassette
from ..errors import CassetteError, DshReplayError
from ..protocol.adapter import LlmAdapter
from ..protocol.chunks import BlockStart
from ..protocol.jsonl import JsonlWriter, raised_line
from ..protocol.options import GenerateOptions
from ..protocol.validator import SequenceValidator

__all__ = ["GoldenStream", "StreamedOutcome", "replay_streamed", "run_streamed"]

#: the bytes compared or copied at once (a long block's block-end line is several MB)
_STEP = 1 << 20


class GoldenStream(io.BytesIO):
    """Golden lines compared with the golden file as they come, and held whole only from a difference on.

    A 200 MB body's golden is ~80 MB: held whole until the case was judged, then
    compared with the file read whole, it was most of the peak beyond the body.
    Here the lines go into this buffer at a BytesIO's speed, and every so often
    (:meth:`drain`) they are compared with the golden's next bytes and let go:
    only their count is kept. At the first difference (or with no golden to read)
    the bytes matched so far are read back from the file and the buffer holds
    every line from then on, so that ``judge_golden`` has them all, to diff or
    to write. A case never drained (a few hundred chunks: nearly all) is judged
    as before, from the whole buffer.
    """

    def __init__(self, golden: Path) -> None:
        super().__init__()
        self.golden = golden
        self._file: io.BufferedReader | None = None  # the golden while the lines are compared with it
        self._matched = 0  # the bytes let go, all of them the golden's first bytes
        self.holding = False  # every line is in the buffer from now on
        self.equal = False  # the lines, and the tail given to end(), were the whole golden

    def drain(self) -> None:
        """Compare the lines written since the last drain with the golden, and let them go if they match it."""
        if self.holding:
            return
        if self._file is None:
            try:
                self._file = self.golden.open("rb")
            except OSError:  # missing, a folder...: judge_golden says which, with every line at hand
                self.holding = True
                return
        written = self.tell()
        with self.getbuffer() as lines:
            same = self._next_is(lines[:written])
        if same:  # let go: the next lines overwrite them, in a buffer that keeps its size (no regrowth)
            self._matched += written
            self.seek(0)
        else:
            self._hold()

    def _next_is(self, lines: memoryview) -> bool:
        assert self._file is not None
        read = self._file.read
        return all(read(len(part)) == part for part in (lines[at : at + _STEP] for at in range(0, len(lines), _STEP)))

    def _hold(self) -> None:
        """Hold every line from now on: first those let go, read back from the golden, then the buffer's."""
        file, self._file, self.holding = self._file, None, True
        self.truncate()  # what the last drain let go and the lines since did not overwrite
        if file is None:
            return
        with file:
            if not self._matched:
                return
            pending = super().getvalue()
            self.seek(0)
            self.truncate()
            file.seek(0)
            left = self._matched
            while left and (piece := file.read(min(left, _STEP))):
                self.write(piece)
                left -= len(piece)
        self.write(pending)

    def end(self, tail: bytes | None) -> None:
        """The last lines are written: ``tail`` (a ``raised`` line, or ``b""``) ends them; closes the golden.

        A ``None`` tail (a ``raised`` line that cannot be written) matches no golden.
        """
        if self._file is None:
            return  # never drained, or held: the buffer has every line
        self.drain()
        if self._file is not None:  # the lines matched, all of them let go
            if tail is not None and self._file.read(len(tail) + 1) == tail:
                self._file.close()
                self._file, self.equal = None, True
            else:
                self._hold()

    def getvalue(self) -> bytes:
        if self._file is not None:
            raise RuntimeError("GoldenStream.getvalue() before end(): the lines are still compared")
        if self.equal:  # the golden's first bytes, as they were let go
            with self.golden.open("rb") as file:
                return file.read(self._matched)
        return super().getvalue()


@dataclass
class StreamedOutcome(Outcome):
    """An adapter run without its chunks (``chunks`` stays empty): their golden bytes and counts instead."""

    written: JsonlWriter = field(default_factory=JsonlWriter)
    block_count: int = 0

    def golden_bytes(self) -> bytes:
        return self.written.getvalue(self.raised)

    @property
    def blocks(self) -> int:
        return self.block_count


@dataclass
class _StreamedCase(CaseResult):
    @property
    def chunks(self) -> int:
        return sum(o.written.count if isinstance(o, StreamedOutcome) else len(o.chunks) for o in self.outcomes)


async def run_streamed(adapter: LlmAdapter, options: GenerateOptions, golden: Path | None = None) -> StreamedOutcome:
    """``run_adapter`` with its defaults, each chunk validated and written as it arrives, then dropped.

    ``golden``: the golden file the lines are compared with as they are written (:class:`GoldenStream`).
    """
    stream = GoldenStream(golden) if golden is not None else None
    outcome = StreamedOutcome(written=JsonlWriter(stream))
    validator = SequenceValidator()
    try:
        async for chunk in adapter.stream(options):
            outcome.written.add(chunk)
            outcome.block_count += type(chunk) is BlockStart
            validator.feed(chunk)
            if not outcome.written.count & 1023:  # no chunk is kept, nor for long their texts or their lines
                validator.compact()
                if stream is not None:
                    stream.drain()
    except Exception as exc:
        if isinstance(exc, CassetteError):
            raise  # a cassette problem is never the adapter's answer
        outcome.raised = exc
    finally:
        if stream is not None:  # closes the golden, whatever happened
            stream.end(b"" if outcome.raised is None else _raised_line(outcome.raised))
    if outcome.raised is None:
        validator.finish()
    outcome.violations = list(validator.violations)
    return outcome


def _raised_line(raised: BaseException) -> bytes | None:
    try:
        return raised_line(raised)
    except ValueError:  # the message cannot be UTF-8: golden_bytes() says so
        return None


async def replay_streamed(
    path: Path,
    routes: RouteTable,
    *,
    fragmentation: str = "recorded",
    update_golden: bool = False,
    adapters: AdapterCache | None = None,
    cassette: Cassette | None = None,
) -> CaseResult:
    """``replay_case(path, routes, ...)``, with the outcomes of :func:`run_streamed`."""
    started = time.perf_counter()
    result = _StreamedCase(cassette=path)
    try:
        if cassette is None:
            cassette = Cassette.load(path)
        result.route, calls, base_url = case_options(cassette)
        result.fragments = sum(len(i.fragment_sizes()) for i in cassette.interactions)
        pick = adapters.adapter if adapters is not None else routes.adapter
        adapter = pick(result.route, base_url=base_url, **adapter_settings(cassette).kwargs())
        async with use_cassette(path, "none", fragmentation=fragmentation, cassette=cassette) as session:
            for call, options in enumerate(calls, start=1):
                result.outcomes.append(await run_streamed(adapter, options, golden_path_for(path, call)))
        unplayed = len(session.unplayed)
        # the recorded bodies are done with: the golden comparison reads the golden beside them
        del cassette, session
        _judge_case(result, path, update_golden=update_golden, unplayed=unplayed)
    except DshReplayError as exc:
        result.short = type(exc).__name__
        result.problem = str(exc)
    result.seconds = time.perf_counter() - started
    return result
