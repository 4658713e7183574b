"""Scripted provider conversations from which the bundled cassettes are recorded.

Each ``<route>.py`` module here lists ``CASES``: what the provider emulator
sends back (bodies written to the provider's documented wire format, cut into
realistic fragments) for a given ``GenerateOptions``. ``tests/make_cassettes.py``
records each one through the real adapter into ``cassettes/<route>/<case>.yaml``
and writes its golden — so every bundled cassette can be regenerated and
reviewed from its source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_replay import GenerateOptions
from dsh_replay.testing import ScriptedResponse


@dataclass(frozen=True)
class Case:
    """One recorded conversation: the request options and the emulator's answers."""

    name: str
    options: GenerateOptions
    #: the request path the adapter calls (no query), e.g. "/v1/chat/completions"
    path: str
    #: answers in order (several when the adapter retries)
    responses: Sequence[ScriptedResponse]
    #: extra keyword arguments for the adapter (e.g. drop_reasoning=True)
    adapter_kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: where the URIs in the cassette point (the provider's real host); None: the adapter's default
    base_url: str | None = None
    method: str = "POST"
