"""The conformance suite as a pytest class: one test per case.

Subclass :class:`AdapterConformance`, name the route, and give an
``adapter_factory`` fixture; every case of :func:`build_cases` becomes a test
with the case's id (``text[bytes]``, ``fault-429``), so a case can be
deselected with ``-k`` or skipped for good through ``skip_cases``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from ..errors import ConfigError
from .cases import ConformanceCase, build_cases
from .runner import run_case

__all__ = ["AdapterConformance"]


class AdapterConformance:
    """Base class of a conformance test class; see the module docstring.

    ``route`` picks the cassettes (the bundled ones, or ``cassettes`` when
    given); ``skip_cases`` maps case ids to the reason they do not apply;
    ``strict_requests`` makes a request body that differs from the recorded one
    a failure; ``backend`` is the async library the cases run in.
    """

    route: ClassVar[str] = ""
    cassettes: ClassVar[Sequence[str | Path]] = ()
    skip_cases: ClassVar[Mapping[str, str]] = {}
    strict_requests: ClassVar[bool] = False
    backend: ClassVar[str] = "asyncio"

    @pytest.fixture
    def adapter_factory(self) -> Callable[..., Any]:
        """Override: return the adapter class or a factory taking ``api_key`` and ``base_url``."""
        raise ConfigError(
            f"{type(self).__name__} needs an adapter_factory fixture returning the adapter class or a factory "
            "called as factory(api_key=..., base_url=...)"
        )

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "conformance_case" not in metafunc.fixturenames:
            return
        cls = type(self)
        if not cls.route:
            raise ConfigError(f"{cls.__name__}: set route = \"...\" (the route whose cassettes the cases replay)")
        cases = build_cases(cls.route, cls.cassettes)
        unknown = sorted(set(cls.skip_cases) - {case.id for case in cases})
        if unknown:
            raise ConfigError(
                f"{cls.__name__}.skip_cases names no case: {', '.join(unknown)}; "
                f"the cases are: {', '.join(case.id for case in cases)}"
            )
        metafunc.parametrize("conformance_case", [_param(case, cls.skip_cases) for case in cases])

    def test_conformance(self, adapter_factory: Callable[..., Any], conformance_case: ConformanceCase) -> None:
        run = functools.partial(run_case, adapter_factory, conformance_case, strict_requests=self.strict_requests)
        verdict = anyio.run(run, backend=self.backend)
        for note in verdict.notes:
            print(f"note: {note}")
        if verdict.problem:
            pytest.fail(f"{conformance_case.id}: {verdict.problem}", pytrace=False)


def _param(case: ConformanceCase, skips: Mapping[str, str]) -> Any:
    reason = skips.get(case.id) or case.skip
    marks = [pytest.mark.skip(reason=reason)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)
