"""Every plugin test runs an inner pytest in a fresh folder holding the echo adapter."""

from __future__ import annotations

import contextlib
import importlib

import pytest

from .helpers import ADAPTER_SOURCE, INI, INNER_ADDOPTS

# pytester drops every module an inner run imported, so each in-process run
# would import these afresh (hypothesis alone costs ~1 s, and the rest skews
# the timing the replay-speed tests measure). Imported once here, they stay.
for _name in ("hypothesis", "vcr", "vcr.request", "dsh_replay.adapters._base", "dsh_replay.wire.transport", "httpx2"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_name)


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # the outer suite runs with CI=true on CI, which would refuse every recording in the inner runs
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("EMU", raising=False)
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_ADDOPTS)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """An inner project: the ini (strict asyncio, warnings are errors) and ``echo_adapter.py``."""
    pytester.makeini(INI)
    pytester.makepyfile(echo_adapter=ADAPTER_SOURCE)
    return pytester
