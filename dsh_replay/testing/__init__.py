"""Test helpers for adapter authors: a scripted LLM provider on loopback.

``ProviderEmulator`` serves :class:`ScriptedResponse` bodies from a real HTTP
server on ``127.0.0.1``, fragment by fragment, with pauses, truncations, resets
and stalls (see :mod:`dsh_replay.testing.emulator`). :class:`DshReplay` is the
type of the ``dsh_replay`` fixture, for annotating tests.
"""

from __future__ import annotations

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
