"""The ``dsh_replay`` fixture: run an adapter inside this test's cassette.

``await dsh_replay.stream(adapter, options)`` opens the test's cassette (once
per test), runs the adapter while the validator checks every chunk as it
arrives, compares the chunks with the golden (or writes it when recording or
with ``--update-golden``) and returns them. The marker
``@pytest.mark.dsh_replay(...)`` takes the same keyword arguments as
:class:`MarkerOptions`, one-to-one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..cassette.config import RecordingConfig
from ..cassette.files import atomic_write
from ..cassette.golden import golden_path_for, judge_golden_file
from ..cassette.replay import Outcome, run_adapter
from ..cassette.session import use_cassette
from ..cassette.store import RecordMode
from ..errors import CassetteError
from ..protocol.adapter import LlmAdapter
from ..protocol.chunks import StreamChunk
from ..protocol.options import GenerateOptions
from ..protocol.turn import Turn, collect
from ..wire.coverage import collect_coverage
from .coverage import strict_failure, verify_call, verify_failure, verify_target
from .marker import MarkerOptions, cassette_name, cassette_path_for, item_cassette, item_options
from .report import Tally
from .settings import Settings
from .shared import SharedCassettes

__all__ = ["DshReplay", "MarkerOptions", "cassette_name", "cassette_path_for"]


def _check_stream_arguments(adapter: object, options: object, expect_error: object, route: object) -> None:
    """Refuse what is no adapter, options, flag or route before anything runs.

    Checked up front because ``expect_error=True`` would otherwise capture the
    ``AttributeError`` of a wrong argument as the adapter's error and write it
    into the golden.
    """
    if not isinstance(adapter, LlmAdapter):
        hint = " (pass an instance, not the class)" if isinstance(adapter, type) else ""
        raise TypeError(f"dsh_replay.stream(): adapter must be an LlmAdapter instance, got {type(adapter).__name__}{hint}")
    if not isinstance(options, GenerateOptions):
        raise TypeError(f"dsh_replay.stream(): options must be a GenerateOptions, got {type(options).__name__}")
    if expect_error is not None and not isinstance(expect_error, bool):
        raise TypeError(
            f"dsh_replay.stream(): expect_error must be True, False or None (the marker decides), got {expect_error!r}"
        )
    if route is not None and not isinstance(route, str):
        raise TypeError(f"dsh_replay.stream(): route must be a string or None, got {type(route).__name__}")
    if route == "":
        raise ValueError("dsh_replay.stream(): route must be a non-empty string or None")


class _TestFailed(Exception):
    """Handed to the cassette context on tear-down when the test failed."""


def _failure(message: str) -> BaseException:
    """A test failure that shows ``message`` alone (raise it ``from None`` inside ``except``)."""
    return pytest.fail.Exception(message, pytrace=False)


class DshReplay:
    """The object the ``dsh_replay`` fixture gives a test."""

    def __init__(
        self, item: pytest.Item, settings: Settings, tally: Tally, config: RecordingConfig,
        *, shared: SharedCassettes | None = None,
    ) -> None:
        self._item = item
        self._shared = shared or SharedCassettes()
        #: this test adds its recording to a cassette an earlier test of the run wrote afresh
        self._appends = False
        self._settings = settings
        self._tally = tally
        self._config = config
        self.options = item_options(item)
        if config.cassette_dir in (None, settings.cassette_dir):
            self.cassette_path = item_cassette(item, settings, self.options)
        else:  # the test's dsh_replay_config chose a folder of its own
            self.cassette_path = cassette_path_for(item, settings, self.options, config.cassette_dir)
            tally.configured_folder(self.cassette_path)
        self.golden_path = golden_path_for(self.cassette_path)
        self._chunks: list[StreamChunk] | None = None  # the last call's, assembled into a turn when asked
        self._turn: Turn | None = None
        self._context: use_cassette | None = None
        self._calls = 0
        self._streaming = False
        # goldens to write when the test has passed (and its cassette is written):
        # (path, bytes, "written" | "updated")
        self._pending_goldens: list[tuple[Path, bytes, str]] = []

    @property
    def turn(self) -> Turn | None:
        """The last call's chunks assembled (text, tool calls, usage, finish); None before any call."""
        if self._turn is None and self._chunks is not None:
            self._turn = collect(self._chunks)
        return self._turn

    # -- running ---------------------------------------------------------------

    def _open(self, adapter: LlmAdapter, options: GenerateOptions, route: str | None) -> Any:
        settings, config = self._settings, self._config
        mode = config.record_mode or RecordMode.NONE
        xdist = getattr(self._item.config, "workerinput", None) is not None
        refusal = self._shared.refusal(self.cassette_path, mode, self._item.nodeid, xdist=xdist)
        if refusal is not None:
            raise _failure(refusal)
        self._appends = self._shared.appends(self.cassette_path, mode)
        self._context = use_cassette(
            self.cassette_path,
            RecordMode.ALL if self._appends else config.record_mode,
            route=route,
            options=options,
            fragmentation=config.fragmentation,
            speed=config.speed,
            matchers=config.matchers(),
            filters=config.filters,
        )
        try:
            session = self._context.__enter__()
            # its cassette is this test's alone, or (appending) the earlier tests' are kept as they are
            session.keep_unasked = self._appends
            session.replaces_rerecorded = not self._appends
        except CassetteError as exc:
            self._context = None
            hint = ""
            if settings.ci and settings.record_mode is not config.record_mode:
                hint = f"\n(--record-mode={settings.record_mode.value} does not record because CI is set: CI only replays)"
            raise _failure(f"{exc}{hint}") from None
        base_url = getattr(adapter, "base_url", None)
        if isinstance(base_url, str):
            session.cassette.metadata.setdefault("base_url", base_url)
        # what the adapter was built with that replay must build it with too (check, collection, conform)
        built: dict[str, Any] = {"drop_reasoning": True} if getattr(adapter, "drop_reasoning", False) else {}
        query = getattr(adapter, "default_query", None)
        if isinstance(query, Mapping) and query:
            built["default_query"] = dict(query)
        if built:
            session.cassette.metadata.setdefault("adapter", built)
        return session

    async def stream(
        self,
        adapter: LlmAdapter,
        options: GenerateOptions,
        *,
        expect_error: bool | None = None,
        route: str | None = None,
    ) -> list[StreamChunk]:
        """Run ``adapter.stream(options)`` in this test's cassette; check, compare, return the chunks."""
        _check_stream_arguments(adapter, options, expect_error, route)
        # Overlapping calls are refused rather than numbered: the cassette engine
        # records interactions as they complete and replays the first unplayed
        # match, so two calls in flight at once could swap responses between
        # recording and replay, and the count of what each call recorded (which
        # decides its golden and its follow-up options) would mix up the two.
        if self._streaming:
            raise RuntimeError(
                "calls to dsh_replay.stream in one test must not overlap; await one before starting the next"
            )
        self._streaming = True
        try:
            return await self._stream(adapter, options, expect_error=expect_error, route=route)
        finally:
            self._streaming = False

    async def _stream(
        self, adapter: LlmAdapter, options: GenerateOptions, *, expect_error: bool | None, route: str | None
    ) -> list[StreamChunk]:
        route = route or self.options.route or getattr(adapter, "route", None)
        session = self._context.session if self._context is not None else self._open(adapter, options, route)
        assert session is not None
        self._calls += 1
        call = self._calls
        # counted as used up front: a golden of a test that fails before comparing is not "unused"
        golden = self.golden_path if call == 1 else golden_path_for(self.cassette_path, call)
        self._tally.use(self.cassette_path, golden if self.options.golden else None)
        recorded_before = session.recorded
        expect = self.options.expect_error if expect_error is None else expect_error
        verify = self._config.record_mode is RecordMode.VERIFY
        try:
            with collect_coverage(fields=verify) as seen:
                outcome = await run_adapter(
                    adapter,
                    options,
                    allow_interleaving=self.options.allow_interleaving,
                    json_arguments=self.options.json_arguments,
                    capture=Exception if expect else (),
                )
        except CassetteError as exc:
            # no recorded match, a corrupt cassette…: the message is the whole story
            raise _failure(str(exc)) from None
        recorded = session.recorded > recorded_before
        if recorded and call == 1 and session.record_mode is RecordMode.ALL and not self._appends:
            # re-recorded from the first call: the options are this run's, not the old ones
            metadata = session.cassette.metadata
            metadata["options"] = options.to_json()
            if route:
                metadata["route"] = route
            metadata.pop("follow_ups", None)
        emulator = getattr(self._item, "funcargs", {}).get("dsh_replay_emulator")
        if recorded and emulator is not None and emulator.requests:
            # scripted traffic, not the provider's: reviewers and reports tell them apart
            session.cassette.metadata["emulated"] = True
        if recorded and (call > 1 or self._appends):
            # later calls of the test, and the calls of later tests sharing the cassette, are
            # replayable without them too (collection, check)
            session.cassette.metadata.setdefault("follow_ups", []).append(options.to_json())
        self._check_outcome(outcome, expect=expect)
        unmapped = self._tally.coverage.add_collected(self.cassette_path, seen)
        if unmapped and self._settings.strict_coverage:
            raise _failure(strict_failure(self.cassette_path, unmapped))
        if recorded:
            try:
                session.cassette.check_secrets()
            except CassetteError as exc:
                raise _failure(str(exc)) from None
        self._chunks, self._turn = outcome.chunks, None
        if self.options.golden:
            self._judge(session.mask(outcome.golden_bytes()), recorded, golden)
        if verify:
            target = verify_target(self._item.config, self.cassette_path, call)
            drift = await verify_call(adapter, options, route, outcome, seen.streams, target, self.cassette_path)
            self._tally.coverage.add_drift(self.cassette_path, drift, target)
            if drift.breaking:
                raise _failure(verify_failure(self.cassette_path, target, drift))
        return outcome.chunks

    @staticmethod
    def _check_outcome(outcome: Outcome, *, expect: bool) -> None:
        if outcome.violations:
            listing = "\n".join(f"  {v.rule} at chunk {v.position}: {v.message}" for v in outcome.violations)
            pytest.fail(f"the adapter's chunks break the StreamChunk rules:\n{listing}", pytrace=False)
        if expect and outcome.raised is None:
            pytest.fail("the test expects the adapter to raise, but it finished normally", pytrace=False)

    def _judge(self, actual: bytes, recorded: bool, golden: Path) -> None:
        staged: list[tuple[Path, bytes]] = []
        status, problem = judge_golden_file(
            golden, actual, update=self._settings.update_golden or recorded,
            write=lambda path, data: staged.append((path, data)),
        )
        if staged:
            # written at tear-down, once the test passed and its cassette is on disk:
            # a golden must not describe a recording that was never kept
            self._pending_goldens += [(path, data, status) for path, data in staged]
            return
        self._tally.counts[f"goldens_{status}"] += 1
        if problem:
            pytest.fail(problem, pytrace=False)

    def _write_goldens(self) -> None:
        pending, self._pending_goldens = self._pending_goldens, []
        for path, data, status in pending:
            try:
                atomic_write(path, data)
            except CassetteError as exc:  # a full disk, a folder gone read-only: one line, not a traceback
                raise _failure(str(exc)) from None
            self._tally.counts[f"goldens_{status}"] += 1

    def _drop_goldens(self, reason: str) -> None:
        """The test did not pass: its goldens stay as they are, and the summary says which."""
        for path, _data, _status in self._pending_goldens:
            self._tally.not_written(path, reason)
        self._pending_goldens.clear()

    def run(self, adapter: LlmAdapter, options: GenerateOptions, **kwargs: Any) -> list[StreamChunk]:
        """The synchronous twin of :meth:`stream`, for tests that are not async."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.stream(adapter, options, **kwargs))
        raise RuntimeError("dsh_replay.run() was called inside a running event loop; use `await dsh_replay.stream(...)`")

    # -- tear-down -----------------------------------------------------------------

    def close(self, *, outcome: str = "passed") -> None:
        """Write the cassette if it recorded, then the goldens; fail on interactions left unplayed.

        ``outcome``: the test's, as pytest reports its call (``passed``,
        ``failed``, ``skipped``, ``xfailed``; ``interrupted`` when there was no
        report). A test that did not pass writes nothing: a recording cut
        short, or made of errors the test did not expect, must not replace a
        good cassette or become one; the goldens it had to write are named in
        the summary instead (``goldens: N not written (test failed): ...``).
        When the test itself failed, interactions it never got to play are a
        consequence, not news, so they are not reported a second time.
        """
        test_failed = outcome != "passed"
        context, self._context = self._context, None
        if test_failed:
            self._drop_goldens(f"test {outcome}")
        if context is None or context.session is None:
            if not test_failed:
                self._write_goldens()
            return
        session = context.session
        failure = (_TestFailed, _TestFailed(), None) if test_failed else (None, None, None)
        try:
            context.__exit__(*failure)
        except CassetteError as exc:
            self._drop_goldens("cassette not written")
            raise _failure(str(exc)) from None
        if session.discarded:
            self._tally.counts["cassettes_discarded"] += 1
        # counted as used by the first call already (a session exists only once a call opened it)
        self._tally.counts["secrets_scrubbed"] += session.scrubbed
        if session.wrote:
            self._shared.wrote(self.cassette_path)
            self._tally.counts["cassettes_recorded"] += 1
        if session.played:
            self._tally.counts["cassettes_replayed"] += 1
        if not test_failed:
            self._write_goldens()  # last: a golden that cannot be written fails the test after the counts
        if session.unplayed and not self.options.allow_unplayed and not test_failed:
            pytest.fail(
                f"cassette {self.cassette_path}: {len(session.unplayed)} recorded interaction(s) were not played "
                "— the adapter made fewer calls than were recorded. Re-record, or mark the test "
                "@pytest.mark.dsh_replay(allow_unplayed=True).",
                pytrace=False,
            )
