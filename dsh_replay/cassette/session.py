"""``use_cassette``: record or replay every httpx request made inside a block.

A :class:`CassetteSession` is the handler the patched clients call. Per
request it either replays the first unplayed recorded interaction that
matches, or sends the request for real and records the response while it
streams, or refuses with a diff against the closest recorded request — as the
record mode allows:

=============  ===========  ==============  ========================
mode           replays      records         when the file is missing
=============  ===========  ==============  ========================
none           yes          no              CassetteError
once           yes          only a new file records everything
new_episodes   yes          unmatched ones  records everything
all            no           everything      records everything
rewrite        no           everything      (existing file replaced)
=============  ===========  ==============  ========================

The file is written once, atomically, when the block ends — after the secret
scan, which refuses the write rather than leak a credential.
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import CassetteError
from ..protocol.options import GenerateOptions
from ..wire.transport import RETRY_PAUSES_WAIT
from .config import active
from .files import read_metadata_key, unwritable_reason
from .filters import RecordFilters
from .intercept import (
    Recorder,
    active_handlers,
    install,
    recording_response,
    replay_response,
    uninstall,
    warn_if_nothing_recorded,
)
from .matching import Matcher, default_matchers, describe_mismatch, requests_match
from .pacing import Fault, Fragmentation, parse_speed
from .scrub import ScrubbedRequest, Scrubber, mask_echoes_in_body, mask_interaction_echoes
from .session_checks import check_arguments, check_fault_reaches
from .store import (
    FORMAT_VERSION,
    Cassette,
    Interaction,
    RecordMode,
)

__all__ = ["CassetteSession", "use_cassette"]

def _vcr_request(request: Any, scrubber: Scrubber, filters: RecordFilters, path: Path) -> tuple[Any, ScrubbedRequest]:
    """The request as it is matched and recorded (None: ``before_record_request`` ignores it)."""
    from vcr.request import Request as VcrRequest

    scrubbed = scrubber.request(str(request.url), request.headers.multi_items(), request.content)
    uri, headers, body = scrubbed.uri, scrubbed.headers, scrubbed.body
    if filters:
        uri, headers, body = filters.uri(uri), filters.header_items(headers), filters.request_body(body)
    wanted = VcrRequest(request.method, uri, body, dict(headers))
    if filters.before_record_request is not None:
        wanted = filters.before_record_request(wanted)
        if wanted is not None and not isinstance(wanted, VcrRequest):
            # found here, not as an AttributeError deep in the write
            raise CassetteError(
                f"cassette {path}: before_record_request must return the request it was given (changed or not) "
                f"or None to leave it out; got {type(wanted).__name__}", path=str(path))
    return wanted, scrubbed


def _sessions_using(path: Path) -> list[CassetteSession]:
    if not active_handlers():
        return []  # resolving costs a system call per folder of the path
    resolved = path.resolve()
    return [s for s in active_handlers() if isinstance(s, CassetteSession) and s.path.resolve() == resolved]


class CassetteSession:
    """One cassette in use: what was played, what was recorded, what is left.

    ``cassette``: the file at ``path`` already loaded, replayed instead of
    reading it again (``replay_case`` reads it first for its metadata).
    """

    def __init__(
        self,
        path: str | Path,
        record_mode: str | RecordMode = RecordMode.NONE,
        *,
        route: str | None = None,
        options: GenerateOptions | None = None,
        fragmentation: str | Fragmentation = "recorded",
        speed: float = 0.0,
        scrubber: Scrubber | None = None,
        matchers: Sequence[Matcher] | None = None,
        fault: Fault | None = None,
        filters: RecordFilters | None = None,
        cassette: Cassette | None = None,
    ) -> None:
        check_arguments(path, route=route, options=options, scrubber=scrubber, matchers=matchers, fault=fault,
                         filters=filters)
        self.path = Path(path)
        self.record_mode = RecordMode.parse(record_mode)
        self.route = route
        self.options = options
        self.fragmentation = Fragmentation.parse(fragmentation)
        self.speed = parse_speed(speed)
        self.scrubber = scrubber or Scrubber()
        self.matchers = list(matchers if matchers is not None else default_matchers())
        self.fault = fault
        self.filters = filters or RecordFilters()
        self.played = 0
        self.recorded = 0
        self.scrubbed = 0
        self.wrote = False
        self.discarded = 0
        #: every credential value taken out of a request in this block: a golden
        #: written from it is masked for them (an error message can quote the key)
        self.removed: set[str] = set()
        self._echoes: dict[int, tuple[str, ...]] = {}
        # "all": keep loaded interactions nobody asked for again (vcrpy's way). The
        # fixture turns it off: its cassette is one test's, and what that test no
        # longer asks for would only fail the next replay as unplayed.
        self.keep_unasked = True
        # "all": a fresh recording replaces the loaded interactions it matches. A test that
        # adds to a cassette other tests share turns it off: their requests may be the same.
        self.replaces_rerecorded = True
        self._recorders: list[Recorder] = []
        self._can_replay = True
        self._can_record = False
        self.cassette = self._open(cassette)
        self._loaded = list(self.cassette.interactions)

    # -- set-up --------------------------------------------------------------------

    def _open(self, loaded: Cassette | None) -> Cassette:
        # verify replays here; re-recording the requests elsewhere is the plugin's part
        mode = RecordMode.NONE if self.record_mode is RecordMode.VERIFY else self.record_mode
        exists = self.path.exists()
        if mode is RecordMode.NONE and not exists:
            raise CassetteError(
                f"cassette {self.path} does not exist and the record mode is 'none'. Record it once "
                f"against the real provider: pytest --record-mode=once (or dsh-replay record ... --out {self.path})",
                path=str(self.path),
            )
        if mode is not RecordMode.NONE and (reason := unwritable_reason(self.path)):
            # found now, not when the block ends with the recording paid for and lost
            raise CassetteError(f"cassette {self.path} cannot be recorded: {reason}", path=str(self.path))
        if mode is RecordMode.REWRITE or not exists:
            self._can_replay = mode is RecordMode.NONE
            self._can_record = mode is not RecordMode.NONE
            return Cassette(path=self.path, metadata=self._metadata())
        cassette = loaded if loaded is not None else Cassette.load(self.path)
        self._can_replay = mode is not RecordMode.ALL
        self._can_record = mode in (RecordMode.NEW_EPISODES, RecordMode.ALL)
        if self._can_replay and self.fault is not None:
            check_fault_reaches(self.fault, cassette)
        return cassette

    def _metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"format": FORMAT_VERSION}
        if self.route is not None:
            metadata["route"] = self.route
        if self.options is not None:
            metadata["options"] = self.options.to_json()
        metadata["library"] = f"dsh-replay {__version__}"
        return metadata

    # -- the handler ---------------------------------------------------------------

    @property
    def can_record(self) -> bool:
        """Whether a request this session cannot replay goes to the network (and is recorded)."""
        return self._can_record

    @property
    def unplayed(self) -> list[Interaction]:
        """Loaded interactions this session has not played (the adapter made fewer calls)."""
        return [i for i in self._loaded if not i.played] if self._can_replay else []

    def handle(self, request: Any, inner: Any, lib: types.ModuleType, is_async: bool) -> Any:
        wanted, scrubbed = _vcr_request(request, self.scrubber, self.filters, self.path)
        self.removed.update(scrubbed.removed)
        if wanted is None:
            # vcrpy's way: a request the hook ignores goes out as it is, recorded and replayed never
            return inner.handle_async_request(request) if is_async else inner.handle_request(request)
        if self._can_replay:
            for position, interaction in enumerate(self._loaded):
                if not interaction.played and self._matches(wanted, interaction):
                    interaction.played = True
                    self.played += 1
                    fault = self.fault if self.fault and self.fault.interaction in (None, position) else None
                    return replay_response(
                        lib, request, interaction, fragmentation=self.fragmentation, speed=self.speed,
                        fault=fault, path=str(self.path), is_async=is_async,
                    )
        if not self._can_record:
            from .secrets import redact  # a failing replay only

            # the message quotes this live request: a key the scrubber missed must not reach a CI log
            mismatch = describe_mismatch(wanted, [i for i in self._loaded if not i.played] or self._loaded, self.matchers)
            raise CassetteError(
                f"cassette {self.path}: {redact(mismatch, self.removed)}\n"
                "If the request changed on purpose, re-record: --record-mode=rewrite",
                path=str(self.path),
            )
        self.scrubbed += scrubbed.count
        if is_async:
            return self._record_async(request, inner, lib, wanted, scrubbed.removed)
        return self._record_sync(request, inner, lib, wanted, scrubbed.removed)

    def _matches(self, wanted: Any, interaction: Interaction) -> bool:
        return requests_match(self.matchers, wanted, interaction.request, self.path)

    def mask(self, data: bytes) -> bytes:
        """``data`` (a golden) with every credential this block took out of a request masked."""
        if not self.removed:
            return data
        return mask_echoes_in_body(data, sorted(self.removed, key=len, reverse=True))[0]

    def _start_recording(self, response: Any, wanted: Any, removed: tuple[str, ...]) -> Recorder:
        headers, count = self.scrubber.headers(response.headers.multi_items(), self.scrubber.response_headers)
        headers = self.filters.header_items(headers) if self.filters else headers
        self.scrubbed += count
        interaction = Interaction(
            request=wanted, status=response.status_code, reason=response.reason_phrase, headers=headers, body=b"",
        )
        self.cassette.interactions.append(interaction)
        if removed:
            self._echoes[id(interaction)] = removed
        recorder = Recorder(interaction, self._recorded)
        self._recorders.append(recorder)
        return recorder

    def _recorded(self, interaction: Interaction) -> None:
        removed = self._echoes.pop(id(interaction), ())
        if removed:
            self.scrubbed += mask_interaction_echoes(interaction, removed)
        filtered = self.filters.response_body(self.scrubber.body("response", interaction.body))
        if self.filters.before_record_response is not None:
            kept = self.filters.response_hook(interaction, filtered, self.path)
            if kept is None:
                self.cassette.interactions.remove(interaction)
                return
            filtered = kept
        if filtered != interaction.body:
            if len(filtered) != len(interaction.body) and interaction.fragments:
                # a filter changed the length: fragment boundaries no longer apply
                interaction.fragments = [(interaction.fragments[0][0], len(filtered))] if filtered else []
            interaction.body = filtered
        self.recorded += 1

    async def _record_async(
        self, request: Any, inner: Any, lib: types.ModuleType, wanted: Any, removed: tuple[str, ...]
    ) -> Any:
        response = await inner.handle_async_request(request)
        return recording_response(lib, response, self._start_recording(response, wanted, removed), True)

    def _record_sync(
        self, request: Any, inner: Any, lib: types.ModuleType, wanted: Any, removed: tuple[str, ...]
    ) -> Any:
        response = inner.handle_request(request)
        return recording_response(lib, response, self._start_recording(response, wanted, removed), False)

    # -- tear-down -----------------------------------------------------------------

    def _drop_rerecorded(self) -> None:
        # vcrpy's "all": what was recorded now replaces the loaded interactions it
        # matches (so re-recording does not pile up stale copies that a later replay
        # would play first); loaded interactions nobody asked for again are kept.
        loaded = {id(interaction) for interaction in self._loaded}
        fresh = [i for i in self.cassette.interactions if id(i) not in loaded]
        kept = [old for old in self._loaded if not any(self._matches(new.request, old) for new in fresh)]
        self.cassette.interactions = (kept if self.keep_unasked else []) + fresh

    def close(self, *, failed: bool = False) -> None:
        """Finish recordings the caller left open, then write the cassette if it changed.

        ``failed``: the block raised (or was interrupted). Then nothing is written
        or deleted, and ``discarded`` counts what was recorded: a recording cut
        short, or made of errors nobody expected, must not replace a good
        cassette (``rewrite``) nor become one (``once``), which later runs would
        replay instead of recording again.
        """
        for recorder in self._recorders:
            recorder.finish(complete=False)
        if failed:
            self.discarded = self.recorded
            return
        if self.recorded and self.record_mode is RecordMode.ALL and self.replaces_rerecorded:
            self._drop_rerecorded()
        if self.recorded:
            self.cassette.save()
            self.wrote = True
        elif self.record_mode is RecordMode.REWRITE and not failed and read_metadata_key(self.path) is True:
            # a cassette this block no longer needs is ours to remove; a vcrpy or
            # pytest-recording file at the same path is not, whatever the mode says
            self.path.unlink()


class use_cassette:  # lower-case: it reads like vcrpy's vcr.use_cassette
    """Record or replay the requests of httpx, httpx2, aiohttp and requests made inside the block.

    Usable as ``with use_cassette(...) as session:`` and ``async with``. See
    :class:`CassetteSession` for the arguments. Inside a pytest run, what is
    not given comes from the test's configuration (``--record-mode``, the
    ini, ``dsh_replay_config``): its record mode, cassette folder for a
    relative path, fragmentation, speed, matchers and filters. Outside pytest
    the record mode is ``none``, so nothing reaches the network unless asked.
    """

    def __init__(
        self,
        path: str | Path,
        record_mode: str | RecordMode | None = None,
        *,
        route: str | None = None,
        options: GenerateOptions | None = None,
        fragmentation: str | Fragmentation | None = None,
        speed: float | None = None,
        scrubber: Scrubber | None = None,
        matchers: Sequence[Matcher] | None = None,
        fault: Fault | None = None,
        filters: RecordFilters | None = None,
        cassette: Cassette | None = None,
    ) -> None:
        self._path, self._record_mode = path, record_mode
        self._kwargs: dict[str, Any] = {
            "route": route, "options": options, "fragmentation": fragmentation, "speed": speed,
            "scrubber": scrubber, "matchers": matchers, "fault": fault, "filters": filters,
            "cassette": cassette,
        }
        self.session: CassetteSession | None = None
        self._active = False
        self._pauses: contextvars.Token[bool] | None = None

    def _arguments(self) -> tuple[tuple[Any, Any], dict[str, Any]]:
        """The session's arguments: those given, then the running test's configuration, then the defaults."""
        config = active()
        path, mode, kwargs = self._path, self._record_mode, dict(self._kwargs)
        if config is not None:
            if config.cassette_dir is not None and isinstance(path, (str, Path)) and not Path(path).is_absolute():
                path = config.cassette_dir / path
            mode = config.record_mode if mode is None else mode
            for name in ("fragmentation", "speed"):
                if kwargs[name] is None:
                    kwargs[name] = getattr(config, name)
            if kwargs["matchers"] is None:
                kwargs["matchers"] = config.matchers()
            if kwargs["filters"] is None:
                kwargs["filters"] = config.filters
        kwargs["fragmentation"] = "recorded" if kwargs["fragmentation"] is None else kwargs["fragmentation"]
        kwargs["speed"] = 0.0 if kwargs["speed"] is None else kwargs["speed"]
        return (path, RecordMode.NONE if mode is None else mode), kwargs

    def __enter__(self) -> CassetteSession:
        if self._active:
            raise CassetteError(
                f"use_cassette({str(self._path)!r}) is already active: one use_cassette serves one block "
                "at a time; make another for a nested block"
            )
        args, kwargs = self._arguments()
        session = CassetteSession(*args, **kwargs)
        taken = _sessions_using(session.path)
        if taken:
            # two sessions writing one file: the outer's write would replace the inner's recording
            raise CassetteError(
                f"cassette {session.path} is already in use by an enclosing use_cassette block; "
                "give the nested block its own cassette",
                path=str(session.path),
            )
        self.session, self._active = session, True
        install(session)
        if not session.can_record and session.speed == 0:
            # a replay that does not pace does not wait out a recorded 429's back-off either
            self._pauses = RETRY_PAUSES_WAIT.set(False)
        return session

    def __exit__(self, *exc_info: object) -> None:
        if not self._active or self.session is None:
            raise CassetteError("use_cassette: __exit__ without __enter__; use it as a with block")
        self._active = False
        uninstall(self.session)
        if self._pauses is not None:
            with contextlib.suppress(ValueError):  # left in another context than it was entered in
                RETRY_PAUSES_WAIT.reset(self._pauses)
            self._pauses = None
        if exc_info[0] is None or not isinstance(exc_info[1], CassetteError):
            self.session.close(failed=exc_info[0] is not None)
        if exc_info[0] is None:
            warn_if_nothing_recorded(self.session)  # a client we do not intercept is never silent

    async def __aenter__(self) -> CassetteSession:
        return self.__enter__()

    async def __aexit__(self, *exc_info: object) -> None:
        self.__exit__(*exc_info)
