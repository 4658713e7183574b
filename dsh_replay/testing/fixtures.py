"""The ``dsh_replay_emulator`` fixture: record a test against a scripted provider, in the test itself.

Registered through its own ``pytest11`` entry point (``dsh_replay_emulator``).
The fixture is a running :class:`ProviderEmulator` on ``127.0.0.1``; the test
scripts it and points its adapter at :attr:`ProviderEmulator.base_url`::

    @pytest.mark.asyncio
    async def test_text(dsh_replay, dsh_replay_emulator):
        dsh_replay_emulator.add("POST", "/v2/chat", ScriptedResponse.streaming(BODY, delay=0.004))
        adapter = CohereAdapter("sk-test-key", base_url=dsh_replay_emulator.base_url)
        await dsh_replay.stream(adapter, options)

With ``--record-mode=once`` the emulator answers and the cassette records it,
marked ``emulated: true`` in its ``dsh_replay:`` metadata so reviewers can tell
scripted traffic from the real provider's; in replay the cassette answers and
the emulator is never asked (a replay matches on path, query and body, not on
the host).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .emulator import ProviderEmulator

__all__ = ["dsh_replay_emulator"]


@pytest.fixture
def dsh_replay_emulator() -> Iterator[ProviderEmulator]:
    """A scripted LLM provider on loopback for this test (see the module docstring)."""
    from .emulator import (
        ProviderEmulator,  # its HTTP server modules load with the first test that asks
    )

    with ProviderEmulator() as emulator:
        yield emulator
