"""Test helpers for adapter authors: a scripted LLM provider on loopback.

``ProviderEmulator`` serves :class:`ScriptedResponse` bodies from a real HTTP
server on ``127.0.0.1``, fragment by fragment, with pauses, truncations, resets
and stalls (see :mod:`dsh_replay.testing.emulator`). :class:`DshReplay` is the
type of the ``dsh_replay`` fixture, for annotating tests.

:class:`ScriptedResponse` builds the answers: ``ScriptedResponse.streaming(body,
delay=0.005)`` serves a streamed body one SSE event (or NDJSON line) per network
write, ``fragment_sizes=[...]`` cuts it by byte counts instead, ``end="truncate"``
/ ``"reset"`` / ``"stall"`` make it fail, and ``ScriptedResponse.json(payload,
status=429)`` is an error answer as providers send them::

    from dsh_replay.testing import ProviderEmulator, ScriptedResponse

    with ProviderEmulator() as emu:
        emu.add("POST", "/v2/chat", ScriptedResponse.streaming(sse_body, delay=0.005))
        ...  # run the test with --record-mode=once and the adapter at emu.base_url
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..pytest_plugin.fixture import DshReplay, MarkerOptions
    from .emulator import ProviderEmulator
    from .scripts import (
        End,
        Exchange,
        RecordedRequest,
        ScriptedResponse,
        random_fragments,
        split_by_sizes,
    )

__all__ = [
    "DshReplay",
    "End",
    "Exchange",
    "MarkerOptions",
    "ProviderEmulator",
    "RecordedRequest",
    "ScriptedResponse",
    "random_fragments",
    "split_by_sizes",
]

# Imported when first asked for: the emulator's fixture is a pytest plugin of its own, loaded by every
# pytest run, and most runs replay without ever starting an HTTP server.
_HOMES = {
    "DshReplay": "..pytest_plugin.fixture",
    "MarkerOptions": "..pytest_plugin.fixture",
    "ProviderEmulator": ".emulator",
    **dict.fromkeys(("End", "Exchange", "RecordedRequest", "ScriptedResponse", "random_fragments", "split_by_sizes"),
                    ".scripts"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
