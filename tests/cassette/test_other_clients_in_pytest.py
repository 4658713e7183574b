"""A client we do not intercept is never silent, and aiohttp/requests work through the whole plugin:
the ``dsh_replay`` fixture, ``dsh_replay_config``, ``use_cassette`` in a test, cassette-driven items.

The plugin is tested the way users run it, through ``pytester``; the inner
runs warn-as-error like ours.
"""

from __future__ import annotations

import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import aiohttp  # noqa: F401  # imported here once, not afresh by every inner run
import httpx
import pytest
import requests  # noqa: F401

from dsh_replay import use_cassette
from dsh_replay.cassette.intercept import NothingRecordedWarning
from dsh_replay.testing import ProviderEmulator, ScriptedResponse
from tests.pytest_plugin.helpers import (
    ADAPTER_SOURCE,
    INI,
    INNER_ADDOPTS,
    golden_lines,
    ini,
    ndjson,
    read_lines,
    streaming,
    summary,
)

PING = "/v1/ping"


@pytest.fixture
def emu() -> Iterator[ProviderEmulator]:
    with ProviderEmulator() as emulator:
        emulator.add("GET", PING, ScriptedResponse.json({"ok": True}))
        emulator.add("POST", "/gen", streaming(ndjson("Hel", "lo")))
        yield emulator


# -- the warning -----------------------------------------------------------------------------


def test_a_block_whose_client_is_not_intercepted_warns_and_writes_nothing(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "urllib.yaml"
    warned = pytest.warns(NothingRecordedWarning, match=r"urllib\.yaml: the block recorded nothing \(record mode 'once'\)")
    with warned, use_cassette(path, "once") as session, urllib.request.urlopen(emu.url(PING)) as response:
        assert response.read() == b'{"ok": true}'
    assert not session.wrote and not path.exists()
    assert issubclass(NothingRecordedWarning, UserWarning)


@pytest.mark.parametrize("mode", ["once", "new_episodes", "all", "rewrite"])
def test_a_block_whose_requests_reached_it_does_not_warn(emu: ProviderEmulator, tmp_path: Path, mode: str) -> None:
    path = tmp_path / "httpx.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with use_cassette(path, "once"):
            httpx.get(emu.url(PING))
        with use_cassette(path, mode):  # replayed ("once", "new_episodes") or recorded again
            httpx.get(emu.url(PING))


def test_a_replay_or_a_block_that_raised_does_not_warn(emu: ProviderEmulator, tmp_path: Path) -> None:
    path = tmp_path / "httpx.yaml"
    with use_cassette(path, "once"):
        httpx.get(emu.url(PING))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with use_cassette(path, "none"):
            pass  # a replay records nothing by design
        with pytest.raises(KeyError), use_cassette(tmp_path / "raised.yaml", "once"):
            raise KeyError("the block failed: that is the news, not what it recorded")


# -- through pytest ----------------------------------------------------------------------------

SILENT_TEST = """
import os, urllib.request
import pytest
from dsh_replay import use_cassette
from dsh_replay.cassette.intercept import NothingRecordedWarning

def test_expected():
    with pytest.warns(NothingRecordedWarning):
        with use_cassette("expected.yaml"), urllib.request.urlopen(os.environ["EMU"] + "/v1/ping") as response:
            assert response.read()

def test_unexpected():
    with use_cassette("unexpected.yaml"), urllib.request.urlopen(os.environ["EMU"] + "/v1/ping") as response:
        assert response.read()
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, emu: ProviderEmulator) -> pytest.Pytester:
    monkeypatch.delenv("CI", raising=False)  # CI refuses recording, and these runs record
    monkeypatch.setenv("EMU", emu.base_url)
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_ADDOPTS)  # plugins no inner test uses stay out (faster workers)
    pytester.makeini(INI)
    pytester.makepyfile(echo_adapter=ADAPTER_SOURCE)
    pytester.makeconftest(
        "import pytest\n\n@pytest.fixture(scope='module')\ndef dsh_replay_config():\n"
        "    return {'cassette_dir': 'recorded'}\n"
    )
    return pytester


@pytest.mark.parametrize("xdist", [False, True])
def test_the_summary_names_the_cassettes_that_recorded_nothing(project: pytest.Pytester, xdist: bool) -> None:
    project.makepyfile(test_silent=SILENT_TEST)
    args = ["--record-mode=once", "-p", "no:randomly"]
    result = project.runpytest(*args, *(("-n", "2", "-p", "xdist") if xdist else ()))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*NothingRecordedWarning: cassette *unexpected.yaml: the block recorded nothing*"])
    assert "cassettes recorded nothing: 2 (recorded/expected.yaml, recorded/unexpected.yaml)" in summary(result)


AIO_ADAPTER = '''
import aiohttp
from dsh_replay.wire.sequencer import BlockSequencer
from echo_adapter import EchoAdapter


class AioEchoAdapter(EchoAdapter):
    """The echo adapter's mapping, its HTTP done with aiohttp."""

    async def stream(self, options):
        request, decoder = self.build_request(options), self.decoder()
        translator = self.translator(BlockSequencer())
        async with aiohttp.ClientSession() as session, session.post(
            request.url, headers=dict(request.headers), json=request.json
        ) as response:
            async for piece in response.content.iter_any():
                for event in decoder.feed(piece):
                    for chunk in translator.event(event):
                        yield chunk
        for event in decoder.flush():
            for chunk in translator.event(event):
                yield chunk
        for chunk in translator.end():
            yield chunk
'''

FIXTURE_TEST = """
import os
import pytest
from aio_echo import AioEchoAdapter
from echo_adapter import make_options

@pytest.mark.asyncio
async def test_aio(dsh_replay):
    adapter = AioEchoAdapter(api_key="sk-test-0123456789abcdef", base_url=os.environ.get("EMU", "http://unused.invalid"))
    chunks = await dsh_replay.stream(adapter, make_options("hi"))
    assert chunks
"""


def test_the_fixture_records_aiohttp_and_the_collected_item_replays_it_with_httpx(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, emu: ProviderEmulator
) -> None:
    project.makepyfile(aio_echo=AIO_ADAPTER, test_rec=FIXTURE_TEST)
    recorded = project.runpytest("--record-mode=once", "-p", "no:randomly")
    recorded.assert_outcomes(passed=1)
    assert "cassettes: 0 replayed, 1 recorded" in summary(recorded)
    cassette = project.path / "recorded" / "test_rec" / "test_aio.yaml"
    assert read_lines(cassette.with_name("test_aio.chunks.jsonl")) == golden_lines("Hel", "lo")
    assert len(emu.requests) == 1
    emu.stop()
    monkeypatch.delenv("EMU")

    replayed = project.runpytest("-p", "no:randomly")  # the same test, offline, through aiohttp
    replayed.assert_outcomes(passed=1)
    assert "cassettes: 1 replayed, 0 recorded" in summary(replayed)

    (project.path / "test_rec.py").unlink()
    project.makeini(ini("dsh_replay_collect = true", "dsh_replay_cassette_dir = recorded"))
    project.makefile(".toml", pyproject='[tool.dsh_replay.routes]\n"echo" = "echo_adapter:EchoAdapter"\n')
    collected = project.runpytest("-v", "-p", "no:randomly")  # the cassette alone, through the httpx adapter
    collected.assert_outcomes(passed=1)
    collected.stdout.fnmatch_lines(["*test_aio.yaml::test_aio PASSED*"])
    assert "goldens: 1 matched, 0 written, 0 updated" in summary(collected)


CONFIG_TEST = """
import os
import aiohttp, requests
import pytest
from dsh_replay import use_cassette

URL = os.environ.get("EMU", "http://127.0.0.1:9") + "/v1/ping"

@pytest.fixture(scope="module")
def dsh_replay_config():
    return {"cassette_dir": "recorded", "filter_headers": ["x-trace"], "filter_query_parameters": ["session"]}

@pytest.mark.asyncio
async def test_aiohttp():
    async with use_cassette("aio.yaml"), aiohttp.ClientSession() as session, session.get(
        URL, params={"session": "s3cr3t"}, headers={"x-trace": "t-123"}
    ) as response:
        assert await response.json() == {"ok": True}

def test_requests():
    with use_cassette("requests.yaml"):
        assert requests.get(URL, params={"session": "s3cr3t"}, headers={"x-trace": "t-123"}).json() == {"ok": True}
"""


def test_dsh_replay_config_applies_to_aiohttp_and_requests_blocks_in_a_test(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, emu: ProviderEmulator
) -> None:
    project.makepyfile(test_config=CONFIG_TEST)
    project.runpytest("--record-mode=once", "-p", "no:randomly").assert_outcomes(passed=2)
    for name in ("aio.yaml", "requests.yaml"):
        text = (project.path / "recorded" / name).read_text(encoding="utf-8")
        assert "t-123" not in text and "x-trace" not in text and "s3cr3t" not in text
    assert len(emu.requests) == 2
    emu.stop()
    monkeypatch.delenv("EMU")
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)  # replayed: nothing listens any more
