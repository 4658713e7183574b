"""Route every supported HTTP client's requests to the cassette of the task that makes them.

Which clients
-------------
httpx and httpx2 (:mod:`.clients_httpx`), aiohttp (:mod:`.clients_aiohttp`)
and requests (:mod:`.clients_requests`). A library is patched only while at
least one cassette block is active anywhere in the process, and only once it
is imported: one already in ``sys.modules`` when the first block starts, or
one imported while a block is active (a finder on ``sys.meta_path`` patches it
the moment its package has run). Nothing is patched at import time, and a
library nobody imports is never imported here.

Which cassette
--------------
The blocks a task is inside are held in a :class:`contextvars.ContextVar`, so:

- a request is answered by the innermost active block of the task (or
  thread) that makes it; nested blocks work as before (inner wins, the outer
  one serves again once the inner ends);
- tasks started inside a block inherit it (asyncio and trio copy the context
  into a new task); sibling tasks with blocks of their own never see each
  other's;
- a thread sees the blocks of the code that started it only when it runs in a
  copy of that context: ``contextvars.copy_context().run(fn)``, which
  ``asyncio.to_thread`` does and a bare ``ThreadPoolExecutor.submit`` does not;
- where no block is active (a bare thread, an event loop a test starts of its
  own), the one block active in the process serves, if there is exactly one:
  so a sync test's ``asyncio.run`` or a worker thread keeps working as when
  one cassette was one process-wide setting. With several active, such a
  request is refused (:class:`CassetteError`) rather than guessed at or let
  out to the network.

A block in a recording mode that no request reached says so when it ends
(:class:`NothingRecordedWarning`): the code under test used a client we do
not intercept, or made its request where the block is not visible.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.machinery
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CassetteError
from . import clients_httpx
from .clients_base import Handler, Recorder, forwarding
from .clients_httpx import answer_async
from .pacing import Fault, Fragmentation
from .store import Interaction

__all__ = [
    "CLIENT_LIBRARIES",
    "Handler",
    "NothingRecordedWarning",
    "Recorder",
    "active_handlers",
    "answer_async",
    "current_handler",
    "install",
    "recording_response",
    "replay_response",
    "silent_mark",
    "take_silent",
    "uninstall",
    "warn_if_nothing_recorded",
]

#: the client libraries whose requests a cassette records and replays
CLIENT_LIBRARIES = ("httpx", "httpx2", "aiohttp", "requests")


class NothingRecordedWarning(UserWarning):
    """A cassette block in a recording mode ended without a single request reaching it."""


# -- which cassette -----------------------------------------------------------------------

_blocks: contextvars.ContextVar[tuple[Handler, ...]] = contextvars.ContextVar("dsh_replay_cassettes", default=())
_live: list[Handler] = []  # every active handler in the process, in the order they started
_seen: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # handler -> requests routed to it
_lock = threading.RLock()  # blocks start and end in any thread; a patch runs inside an import


def _is_live(handler: Handler) -> bool:
    return any(live is handler for live in _live)


def install(handler: Handler) -> None:
    """Make ``handler`` the innermost active session of this context; patch the clients on first use."""
    with _lock:
        _live.append(handler)
        if len(_live) == 1:
            _start_patching()
    _blocks.set((*_blocks.get(), handler))


def uninstall(handler: Handler) -> None:
    """Deactivate ``handler`` (from whichever context); restore the clients when no session is left."""
    blocks = _blocks.get()
    if any(block is handler for block in blocks):
        _blocks.set(tuple(block for block in blocks if block is not handler))
    with _lock:
        _live[:] = [live for live in _live if live is not handler]
        if not _live:
            _stop_patching()


def active_handlers() -> list[Handler]:
    """The sessions active in this task or thread's context, the innermost last."""
    with _lock:
        return [block for block in _blocks.get() if _is_live(block)]


def current_handler() -> Handler | None:
    """The session that answers a request made here and now (see "Which cassette"), or None."""
    if forwarding.get():
        return None  # a request the handler itself is sending for real
    with _lock:
        for block in reversed(_blocks.get()):
            if _is_live(block):
                return _count(block)
        if len(_live) == 1:
            return _count(_live[0])
        if not _live:
            return None
        count, names = len(_live), ", ".join(str(getattr(live, "path", live)) for live in _live)
    raise CassetteError(
        f"a request was made where no cassette block is active, while {count} are active elsewhere "
        f"({names}): it cannot be told which one it belongs to. Run the thread under "
        "contextvars.copy_context().run(...) (asyncio.to_thread does), or enter the block where the request is made."
    )


def _count(handler: Handler) -> Handler:
    with contextlib.suppress(TypeError):  # a handler that cannot be weakly referenced is not counted
        _seen[handler] = _seen.get(handler, 0) + 1
    return handler


# -- which clients -----------------------------------------------------------------------

_undo: dict[str, Callable[[], None]] = {}


def _patch(name: str, *, ran: bool = False) -> None:
    """Patch the client library ``name`` if it is imported (and not patched yet).

    ``ran``: its package has just run (the finder's call), though the import is not over.
    """
    module = sys.modules.get(name)
    if name in _undo or module is None:
        return
    if not ran and getattr(getattr(module, "__spec__", None), "_initializing", False):
        return  # another thread is still running its package (the finder patches it, if it saw the import)
    if name in ("httpx", "httpx2"):
        _undo[name] = clients_httpx.patch(module, current_handler)
    elif name == "aiohttp":
        from . import clients_aiohttp

        _undo[name] = clients_aiohttp.patch(module, current_handler)
    elif name == "requests":
        from . import clients_requests

        _undo[name] = clients_requests.patch(module, current_handler)


class _PatchOnImport:
    """Patches a client library the moment it is imported while a cassette block is active.

    A meta path finder (``importlib.abc.MetaPathFinder`` in all but name: that
    module costs more to import than this class does to write).
    """

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in CLIENT_LIBRARIES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec: importlib.machinery.ModuleSpec | None = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module: types.ModuleType) -> None:
                run(module)
                with _lock:
                    if _live:
                        _patch(fullname, ran=True)

            # this module's own loader instance: no other module is affected
            loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_FINDER = _PatchOnImport()


def _start_patching() -> None:
    for name in CLIENT_LIBRARIES:
        _patch(name)
    sys.meta_path.insert(0, _FINDER)


def _stop_patching() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in list(_undo):
        _undo.pop(name)()


# -- the client-neutral entry points the session calls ------------------------------------


def recording_response(lib: Any, response: Any, recorder: Recorder, is_async: bool) -> Any:
    """The live ``response`` with its body recorded as it streams through to the caller."""
    if isinstance(lib, types.ModuleType):
        return clients_httpx.recording_response(lib, response, recorder, is_async)
    return lib.record(response, recorder, is_async)


def replay_response(
    lib: Any,
    request: Any,
    interaction: Interaction,
    *,
    fragmentation: Fragmentation,
    speed: float,
    fault: Fault | None,
    path: str,
    is_async: bool,
) -> Any:
    """A response of ``lib``'s client that serves the recorded body as the options ask."""
    if isinstance(lib, types.ModuleType):
        return clients_httpx.replay_response(
            lib, request, interaction, fragmentation=fragmentation, speed=speed, fault=fault, path=path,
            is_async=is_async,
        )
    return lib.replay(
        request, interaction, fragmentation=fragmentation, speed=speed, fault=fault, path=path, is_async=is_async
    )


# -- blocks that recorded nothing --------------------------------------------------------

_silent: list[str] = []


def warn_if_nothing_recorded(session: Any) -> None:
    """Warn when ``session`` could record but no request reached it; note its cassette for the summary."""
    if not getattr(session, "can_record", False) or _seen.get(session, 0):
        return
    path = str(session.path)
    _silent.append(path)
    warnings.warn(NothingRecordedWarning(
        f"cassette {path}: the block recorded nothing (record mode {session.record_mode.value!r}): no request "
        f"reached it. If the code under test made one, its HTTP client is not one dsh-replay intercepts "
        f"({', '.join(CLIENT_LIBRARIES)}) or it ran where the block is not active (a thread started without "
        "contextvars.copy_context()), and it went to the network unrecorded."
    ), stacklevel=3)


def silent_mark() -> int:
    """Where the cassettes of blocks that record nothing from now on will start (see :func:`take_silent`)."""
    with _lock:
        return len(_silent)


def take_silent(since: int = 0) -> list[str]:
    """The cassettes of blocks that recorded nothing since ``since`` (a :func:`silent_mark`), taken away.

    For the pytest summary. Taken away, so that a pytest run inside a test
    (pytester) reports its own blocks and leaves the enclosing run's.
    """
    with _lock:
        taken = _silent[since:]
        del _silent[since:]
    return taken
