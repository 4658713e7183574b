"""The conformance suite: our cassettes and a fault matrix, run against an adapter of yours.

From the command line::

    dsh-replay conform mypackage.adapter:MyAdapter --route openai

or as a pytest class whose tests are the cases::

    from dsh_replay.conformance import AdapterConformance

    class TestMyAdapter(AdapterConformance):
        route = "openai"

        @pytest.fixture
        def adapter_factory(self):
            return MyAdapter          # called as MyAdapter(api_key=..., base_url=...)

Each cassette of the route is replayed under four fragmentations and compared
with its golden, rules P1-P12 run on every sequence, and the fault matrix
(truncations, a reset, a stall, HTTP error statuses with the provider's own
bodies, a mid-stream error event) asks for the typed error of
:mod:`dsh_replay.errors`, never a hang and never a forged ``Finish``.
"""

from __future__ import annotations

from .cases import FRAGMENTATIONS, ConformanceCase, build_cases, bundled_cassettes
from .runner import CASE_TIMEOUT, CaseVerdict, build_adapter, run_case
from .suite import AdapterConformance

__all__ = [
    "CASE_TIMEOUT",
    "FRAGMENTATIONS",
    "AdapterConformance",
    "CaseVerdict",
    "ConformanceCase",
    "build_adapter",
    "build_cases",
    "bundled_cassettes",
    "run_case",
]
