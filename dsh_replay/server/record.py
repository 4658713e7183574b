"""The recording proxy (``dsh-replay serve --record``): the real provider behind the server, recorded as pytest records.

Theory of operation, for one request:

1. **Which cassette.** The request names it as a replay picks one
   (``/_dsh/NAME/-/...`` or ``x-dsh-replay-cassette: NAME``); the file is
   ``<folder>/NAME.yaml``, checked to stay inside the folder
   (:mod:`.naming`). A request that names none is answered from the served
   cassettes if one matches it, else refused (400).
2. **Replay or record.** The first request to a name decides for the server's
   life, as the record mode does in pytest: with ``once`` a file that exists
   is replayed as ``serve`` replays it (:class:`.replay.CassetteServer`), and
   a new one records every request to that name; ``new_episodes``, ``all``
   and ``rewrite`` go through a :class:`~dsh_replay.cassette.session.CassetteSession`,
   the object ``use_cassette`` uses: the same scrubbing, filters, matching,
   recorder and fail-closed secret scan, so nothing here copies them.
3. **Upstream.** The request goes, as the client sent it but for the
   headers :mod:`.upstream` drops, to the upstream of its route, with httpx.
   Several requests to one name are several interactions, in the order their
   responses began.
4. **Streaming through.** The head goes to the client as soon as it arrives;
   each body fragment is written to the client the moment it is read, and
   recorded with its size and arrival time on the way; the body's end too,
   before the recorder files what it kept. An upstream failure is
   recorded at its offset and passed on as the same kind of failure (a
   timeout stalls, a cut is a cut, a reset a reset: :func:`.replay.ending_for`).
   A client that goes away is noticed even while the upstream is silent
   (:meth:`.wire.Reply.watch`): the upstream response is closed, and the
   interaction is recorded as far as the client got it, ``complete: false``.
5. **Writing.** When the last open response of a name ends, its cassette is
   written: the session files its recordings on the event loop, where they
   are made, into a copy of the cassette (:class:`_Copied`); metadata
   (:mod:`.metadata`), secret scan and atomic write of that copy follow in a
   worker thread. The name's next requests do not wait for it: they are
   answered and recorded meanwhile, into the session, and written by the
   next write, which starts when this one is done (one write of a name at a
   time, so the file ends as the last one wrote it, every interaction in
   order). A scan that finds a credential refuses the write; the client has
   had its response, and stderr names the file. On shutdown
   (:meth:`RecordingProxy.close`) the recordings that ended are written; one
   the shutdown cut is dropped, as pytest drops one cut short: it must not
   replace a good cassette nor become one. A killed server leaves the last
   whole file, never half of one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from ..adapters.route_table import RouteTable
from ..cassette.filters import RecordFilters
from ..cassette.import_requests import detect_route
from ..cassette.matching import Matcher
from ..cassette.session import CassetteSession
from ..cassette.store import Cassette, Interaction, RecordMode
from ..errors import CassetteError, ConfigError, DshReplayError
from .http import Request
from .metadata import recorded_metadata
from .naming import cassette_file, clean_name
from .replay import CassetteServer, Ending, Playback, Unmatched, ending_for, forwardable, selection
from .upstream import ENDED, Upstreams, UpstreamTransport, forwarded_headers, upstream_url
from .wire import Reply

__all__ = ["RECORD_MODES", "UPSTREAM_TIMEOUT", "RecordingProxy"]

#: seconds the upstream may stay silent, before its head or between two reads, before it counts as stalled
UPSTREAM_TIMEOUT = 300.0
#: the record modes of ``serve --record`` (``none`` is plain ``serve``)
RECORD_MODES = (RecordMode.ONCE, RecordMode.NEW_EPISODES, RecordMode.ALL, RecordMode.REWRITE)


@dataclass(eq=False)
class _Name:
    """One cassette name in use: how it is answered, and its responses in flight."""

    name: str
    path: Path
    core: CassetteServer | None = None  # ``once`` and the file existed: replayed as serve replays
    session: CassetteSession | None = None  # otherwise: recorded (and replayed) as in pytest
    new: bool = False  # the proxy fills its metadata
    route: str | None = None
    open: int = 0
    unwritten: int = 0  # recordings made since the name's last write, less those the shutdown cut
    cut: list[Interaction] = field(default_factory=list)  # recordings the shutdown cut: never written
    noted: bool = False
    writing: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write of the name at a time; requests never wait


@dataclass
class _Tally:
    pieces: int = 0
    size: int = 0


class RecordingProxy:
    """The :class:`.http.Responder` of ``serve --record``; see the module docstring.

    ``replay`` answers requests that name no cassette; ``routes`` reads the
    options back from the requests (None: raw requests only); ``transport``
    is the upstream's (default: httpx's connection pool).
    """

    def __init__(
        self, *, folder: Path, upstreams: Upstreams, mode: RecordMode | str = RecordMode.ONCE,
        route: str | None = None, matchers: Sequence[Matcher] | None = None, filters: RecordFilters | None = None,
        routes: RouteTable | None = None, replay: CassetteServer | None = None, speed: float = 0.0,
        timeout: float = UPSTREAM_TIMEOUT, log: Callable[[str], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.mode = RecordMode.parse(mode)
        if self.mode not in RECORD_MODES:
            raise ConfigError(f"record mode {self.mode.value!r} records nothing; "
                              f"valid: {', '.join(m.value for m in RECORD_MODES)}")
        self.folder, self.upstreams, self.route = folder, upstreams, route
        self.matchers, self.filters, self.routes, self.replay = matchers, filters, routes, replay
        self.speed = speed
        self.log = log or (lambda line: None)
        self._timeout = {"connect": min(timeout, 30.0), "read": timeout, "write": timeout, "pool": timeout}
        # no pool limit of its own: the server's connection cap is the limit
        self._transport = transport or UpstreamTransport()
        self._names: dict[Path, _Name] = {}
        self._picked: dict[str, _Name] = {}  # by the name as requests give it
        self._opening = asyncio.Lock()
        self._closing = False
        self._saves: set[asyncio.Future[None]] = set()
        self.recorded = self.replayed = self.refused = 0
        #: the names of the recordings the shutdown cut, dropped unwritten (a name once per recording)
        self.dropped: list[str] = []
        #: requests in flight when the shutdown cut them, recordings or not
        self.cut = 0
        #: the cassettes written so far
        self.written: set[Path] = set()

    # -- one request ------------------------------------------------------------------------

    async def respond(self, request: Request, reply: Reply) -> None:
        split = urlsplit(request.target)
        path, picked = selection(split.path or "/", request.headers)
        if not picked:
            await self._unnamed(request, reply)
            return
        try:
            state = await self._open(picked[0])
        except ConfigError as exc:
            await self._refuse(reply, picked[0][:80], 400, "dsh_replay_bad_name", str(exc))
            return
        except CassetteError as exc:  # a cassette that exists and cannot be read
            await self._refuse(reply, picked[0][:80], 500, "dsh_replay_error", str(exc))
            return
        if state.core is not None:
            await self._replay(state.core, state.name, request, reply)
        else:
            await self._through(state, request, reply, path, split.query)

    async def _unnamed(self, request: Request, reply: Reply) -> None:
        """A request that names no cassette: replayed if a served cassette has it, else refused."""
        if self.replay is not None:
            found = self.replay.find(request.method, request.target, request.headers, request.body)
            if not isinstance(found, Unmatched):
                await self._play(found.cassette.with_suffix("").as_posix(), found, reply)
                return
        await self._refuse(reply, "-", 400, "dsh_replay_no_cassette_name",
                           "name the cassette to record this request in: a base URL such as "
                           "http://HOST:PORT/_dsh/openai/my-case/-/v1, or the header x-dsh-replay-cassette: "
                           "openai/my-case")

    async def _replay(self, core: CassetteServer, name: str, request: Request, reply: Reply) -> None:
        found = core.find(request.method, request.target, request.headers, request.body)
        if isinstance(found, Unmatched):
            miss = await asyncio.to_thread(core.diagnose, found)
            self.refused += 1
            await reply.json(404, miss.body())
            self.log(f"refused {name} (404 no match: the cassette exists, so record mode once replays it; "
                     "--record-mode new_episodes records what it lacks)")
            return
        await self._play(name, found, reply)

    async def _play(self, name: str, playback: Playback, reply: Reply) -> None:
        pieces, size = await reply.play(playback)
        self.replayed += 1
        self.log(_line("replayed", name, playback.status, pieces, size, playback.ending))

    async def _through(self, state: _Name, request: Request, reply: Reply, path: str, query: str) -> None:
        """Send the request upstream through the name's session; stream the answer to the client."""
        assert state.session is not None
        try:
            route, upstream = self.upstreams.pick(state.name, request.headers)
        except ConfigError as exc:
            await self._refuse(reply, state.name, 400, "dsh_replay_no_upstream", str(exc))
            return
        url = upstream_url(upstream, path, query)
        # the body's end goes to the client as soon as it is read, before the recorder files the recording
        extensions = {"timeout": self._timeout, ENDED: reply.finish_body}
        outgoing = httpx.Request(request.method, url, headers=forwarded_headers(request.headers),
                                 content=request.body, extensions=extensions)
        state.open += 1  # the name's cassette is written once no response of it is open
        state.route = state.route or self.route or route or detect_route(url)
        try:
            played = state.session.played
            filing = _Filing(self._transport, state.session.cassette.interactions)
            try:
                answer = state.session.handle(outgoing, filing, httpx, True)
                response = await answer if inspect.isawaitable(answer) else answer
            except httpx.TransportError as exc:
                status = 504 if isinstance(exc, httpx.TimeoutException) else 502
                await self._refuse(reply, state.name, status, "dsh_replay_upstream",
                                   f"{url.split('?')[0]}: {type(exc).__name__}: {exc or 'no answer'}")
                return
            except asyncio.CancelledError:
                self._stopped(state, None)  # before the upstream's head: nothing recorded yet
                raise
            verb = "replayed" if state.session.played > played else "recorded"
            recording = filing.filed()
            state.unwritten += recording is not None
            await self._relay(state, verb, response, reply, recording)
        finally:
            state.open -= 1
            if not state.open and not self._closing:
                self._save(state)  # not awaited: the connection's next request is read meanwhile

    async def _relay(self, state: _Name, verb: str, response: httpx.Response, reply: Reply,
                     recording: Interaction | None) -> None:
        name, reason = state.name, response.extensions.get("reason_phrase", b"")
        try:
            await reply.head(response.status_code, forwardable(response.headers.multi_items()),
                             reason.decode("latin-1") if isinstance(reason, bytes) else "")
        except BaseException as exc:  # the client left, or the server stopped, before the head: close the upstream
            await response.aclose()
            if isinstance(exc, asyncio.CancelledError):
                self._stopped(state, recording)
            raise
        tally = _Tally()
        pump = asyncio.create_task(_pump(response, reply, tally))
        reply.watch(pump.cancel)
        try:
            await asyncio.wait({pump})
        except asyncio.CancelledError:  # the server is stopping: the recording ends here, as cut
            pump.cancel()
            await asyncio.wait({pump})
            why = "the server stopped" + ("; not written" if recording is not None else "")
            self.log(_line(verb, name, response.status_code, tally.pieces, tally.size, "cut", why))
            self._stopped(state, recording)
            raise
        self.recorded += verb == "recorded"
        self.replayed += verb == "replayed"
        if pump.cancelled() or isinstance(pump.exception(), ConnectionError):
            reply.keep = False
            self.log(_line(verb, name, response.status_code, tally.pieces, tally.size, "cut",
                           "the client went away"))
            return
        failure = pump.result()
        ending: Ending = "complete" if failure is None else ending_for(failure)
        self.log(_line(verb, name, response.status_code, tally.pieces, tally.size, ending, failure or ""))
        await reply.end(ending)

    def _stopped(self, state: _Name, recording: Interaction | None) -> None:
        """The shutdown cut a response mid-way: its recording, if any, is dropped (pytest's rule for a cut one)."""
        self.cut += 1
        if recording is not None:
            state.cut.append(recording)
            state.unwritten -= 1
            self.dropped.append(state.name)

    async def _refuse(self, reply: Reply, name: str, status: int, kind: str, message: str) -> None:
        self.refused += 1
        await reply.error(status, kind, message)
        self.log(f"refused {name} ({status}: {message})")

    # -- cassettes ------------------------------------------------------------------------

    async def _open(self, picked: str) -> _Name:
        state = self._picked.get(picked)  # a name is checked (and its file found) once, when first used
        if state is not None:
            return state
        name = clean_name(picked)
        path = cassette_file(self.folder, name)
        async with self._opening:
            state = self._names.get(path)
            if state is None:
                # a file to read is read in a worker thread (a big one would hold up every stream meanwhile);
                # a new cassette costs a few stats, less than the trip to a thread and back
                exists = path.exists()
                fresh = self.mode is RecordMode.REWRITE or not exists
                state = self._make(name, path, exists) if fresh else await asyncio.to_thread(
                    self._make, name, path, exists)
                self._names[path] = state
            self._picked[picked] = state
        return state

    def _make(self, name: str, path: Path, exists: bool) -> _Name:
        if self.mode is RecordMode.ONCE and exists:
            return _Name(name, path, core=CassetteServer.load([path], speed=self.speed, matchers=self.matchers))
        session = CassetteSession(path, self.mode, matchers=self.matchers, filters=self.filters, speed=self.speed)
        session.cassette = _Copied.of(session.cassette)
        return _Name(name, path, session=session, new=not exists or self.mode is RecordMode.REWRITE)

    def _save(self, state: _Name, *, closing: bool = False) -> asyncio.Future[None]:
        """Write the name's cassette unless responses of it are open; a stop does not cancel a write under way."""
        task = asyncio.ensure_future(self._save_now(state, closing))
        self._saves.add(task)
        task.add_done_callback(self._saves.discard)
        return task

    async def _save_now(self, state: _Name, closing: bool) -> None:
        async with state.writing:  # after the name's write under way, if any: the file ends as the last one wrote it
            session = state.session
            if session is None or not state.unwritten or (state.open and not closing):
                return
            state.unwritten = 0
            copied = session.cassette
            assert isinstance(copied, _Copied)
            try:
                # on the loop, in one step: no request of the name adds to the session meanwhile. What
                # the shutdown cut goes first, so that ``all`` drops no recorded interaction for it
                cut = {id(interaction) for interaction in state.cut}
                copied.interactions[:] = [i for i in copied.interactions if id(i) not in cut]
                session.close()
                cassette, copied.copy = copied.copy, None
                if cassette is None:  # nothing recorded to write (a filter dropped it)
                    return
                why = await asyncio.to_thread(self._write, state, cassette)
            except Exception as exc:  # nobody awaits a write: what stops one is said here
                shown = str(exc) if isinstance(exc, DshReplayError) else f"{type(exc).__name__}: {exc}."
                self.log(f"warning: {state.path} was not written: {shown} The client had its response.")
                return
        self.written.add(state.path)
        if why and not state.noted:
            state.noted = True
            self.log(f"note: {state.path} holds the raw requests only, not their options: {why}")

    def _write(self, state: _Name, cassette: Cassette) -> str:
        """Write ``cassette``, the name's as of now (in a worker thread); why it has no options ("" when it has)."""
        why = ""
        if state.new:
            cassette.metadata, why = recorded_metadata(state.route, cassette.interactions, self.routes)
        cassette.save()  # the secret scan, then the atomic write; a scan that finds a credential refuses it
        return why

    def stopping(self) -> None:
        """From now on, a response that ends does not write its cassette: :meth:`close` writes them all."""
        self._closing = True

    async def close(self) -> None:
        """Write every cassette with whole recordings not yet written (those the shutdown cut are not); close the pool."""
        self._closing = True
        await asyncio.gather(*self._saves)
        for state in list(self._names.values()):
            await asyncio.shield(self._save(state, closing=True))
        await self._transport.aclose()


class _Filing(httpx.AsyncBaseTransport):
    """The upstream as a request's session calls it: notes where the session files its recording (next, on the loop)."""

    def __init__(self, upstream: httpx.AsyncBaseTransport, interactions: list[Interaction]) -> None:
        self.upstream, self.interactions, self.at = upstream, interactions, -1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.upstream.handle_async_request(request)
        self.at = len(self.interactions)
        return response

    def filed(self) -> Interaction | None:
        """The recording of the request, once it was sent; None when the session replayed it or left it out."""
        return self.interactions[self.at] if self.at == len(self.interactions) - 1 else None


class _Copied(Cassette):
    """A session's cassette whose ``save()`` takes a copy, for the proxy to write in a worker thread.

    The session files its recordings into the cassette on the event loop, as its requests end; a
    write that read the cassette itself in a thread could meet an interaction half recorded, or hold
    those requests up until it was done. The copy (each interaction finished) is what the thread
    writes, while the session records on.
    """

    __slots__ = ("copy",)
    copy: Cassette | None

    @classmethod
    def of(cls, cassette: Cassette) -> _Copied:
        copied = cls(path=cassette.path, interactions=cassette.interactions, metadata=cassette.metadata)
        copied.copy = None
        return copied

    def save(self) -> None:
        self.copy = Cassette(path=self.path, interactions=list(self.interactions), metadata=dict(self.metadata))


async def _pump(response: httpx.Response, reply: Reply, tally: _Tally) -> str | None:
    """Each piece of the body to the client as it arrives; the failure's kind, or None when the body ended."""
    stream = response.stream
    assert isinstance(stream, httpx.AsyncByteStream)  # the body as the transport gives it: raw, unread
    try:
        async for piece in stream:
            if reply.send(piece):  # the client is behind: wait for it before reading on
                await reply.writer.drain()
            tally.pieces, tally.size = tally.pieces + 1, tally.size + len(piece)
    except httpx.TransportError as exc:  # the recorder has noted it, at its offset
        return type(exc).__name__
    except CassetteError:  # a replayed recording its caller abandoned: cut where it was
        return "RemoteProtocolError"
    finally:
        await response.aclose()  # closes the upstream; an early close records the interaction as incomplete
    return None


def _line(verb: str, name: str, status: int, pieces: int, size: int, ending: Ending, why: str = "") -> str:
    """``recorded openai/text (200, 14 fragments, 2,341 B)``, and how it ended when not whole."""
    fragments = f"{pieces} fragment{'s' if pieces != 1 else ''}"
    end = "" if ending == "complete" else f", {ending}" + (f": {why}" if why else "")
    return f"{verb} {name} ({status}, {fragments}, {size:,} B{end})"
