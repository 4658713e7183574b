"""The ``dsh_replay.adapter`` settings of a cassette, read once for every command that builds its adapter.

``adapter_settings`` checks them (naming the cassette and the field); replay's
adapter cache keeps one adapter per route, base URL and settings; drift's live
adapter gets the same default query as the replayed one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_replay.adapters import HttpAdapter
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette.replay import AdapterCache, AdapterSettings, adapter_settings
from dsh_replay.cassette.store import Cassette
from dsh_replay.cassette.verify import live_adapter
from dsh_replay.errors import CassetteError

PATH = Path("cases/azure.yaml")


def settings_of(adapter: Any) -> AdapterSettings:
    return adapter_settings(Cassette(path=PATH, metadata={"route": "openai", "adapter": adapter}))


def test_no_settings_are_the_defaults() -> None:
    assert adapter_settings(Cassette(path=PATH, metadata={"route": "openai"})) == AdapterSettings()
    assert settings_of(None).kwargs() == {"drop_reasoning": False, "default_query": {}}


def test_the_settings_are_read_and_given_as_the_route_tables_arguments() -> None:
    settings = settings_of({"drop_reasoning": True, "default_query": {"api-version": "2024-06-01"}})
    assert settings.drop_reasoning is True
    assert dict(settings.default_query) == {"api-version": "2024-06-01"}
    assert settings.kwargs() == {"drop_reasoning": True, "default_query": {"api-version": "2024-06-01"}}
    assert settings == settings_of({"drop_reasoning": True, "default_query": {"api-version": "2024-06-01"}})
    assert hash(settings) == hash(settings_of({"drop_reasoning": True, "default_query": {"api-version": "x"}}))
    with pytest.raises(TypeError):
        settings.default_query["beta"] = "true"  # type: ignore[index]


@pytest.mark.parametrize(("adapter", "message"), [
    ("drop", "dsh_replay.adapter must be a mapping (drop_reasoning, default_query), got 'drop'"),
    ({"drop_reasoning": "yes"}, "dsh_replay.adapter.drop_reasoning must be true or false, got 'yes'"),
    ({"default_query": ["api-version"]}, "dsh_replay.adapter.default_query must be a mapping of query parameter "
                                         "names to string values, got ['api-version']"),
    ({"default_query": {"api-version": 20240601}}, "dsh_replay.adapter.default_query.api-version must be a string "
                                                   "(quote it), got 20240601"),
    ({"default_query": {"key": "sk-test-leaked-0123456789"}}, "dsh_replay.adapter.default_query.key is a credential "
                                                              "parameter"),
])
def test_a_bad_setting_names_the_cassette_and_the_field(adapter: Any, message: str) -> None:
    with pytest.raises(CassetteError) as caught:
        settings_of(adapter)
    assert str(caught.value).startswith(f"cassette {PATH}: {message}")
    assert "sk-test-leaked" not in str(caught.value)
    assert caught.value.path == str(PATH)


@pytest.mark.asyncio
async def test_the_adapter_cache_keeps_one_adapter_per_default_query() -> None:
    adapters = AdapterCache(RouteTable.load())
    try:
        one = adapters.adapter("openai", base_url=None, default_query={"api-version": "1"})
        assert isinstance(one, HttpAdapter) and one.default_query == {"api-version": "1"}
        assert adapters.adapter("openai", base_url=None, default_query={"api-version": "1"}) is one
        assert adapters.adapter("openai", base_url=None, default_query={"api-version": "2"}) is not one
        assert adapters.adapter("openai", base_url=None) is not one
        assert adapters.adapter("openai", base_url=None, default_query={}) is adapters.adapter("openai", base_url=None)
    finally:
        await adapters.aclose()


def test_the_live_adapter_of_drift_gets_the_default_query_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-live-0123456789abcdef")
    settings = settings_of({"default_query": {"api-version": "2024-06-01"}})
    adapter = live_adapter(RouteTable.load(), "openai", "https://x.openai.azure.com/openai/deployments/d",
                           **settings.kwargs())
    assert isinstance(adapter, HttpAdapter)
    assert adapter.default_query == {"api-version": "2024-06-01"}


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.asyncio
async def test_shows_timeline_reads_the_settings_the_same_way() -> None:
    from dsh_replay.cli.timeline import stream_timeline

    cassette = Cassette.load(ROOT / "cassettes" / "openai" / "length-stop.yaml")
    cassette.metadata["adapter"] = {"default_query": {"api-version": 20240601}}
    timeline = await stream_timeline(cassette, RouteTable.load())
    assert timeline.outcome is None
    assert "dsh_replay.adapter.default_query.api-version must be a string (quote it)" in timeline.note


@pytest.mark.asyncio
async def test_a_case_replays_with_its_default_query_and_fails_without_it(tmp_path: Path) -> None:
    from dsh_replay.cassette.replay import replay_case

    case = Cassette.load(ROOT / "cassettes" / "openai" / "length-stop.yaml")
    [interaction] = case.interactions
    assert interaction.request is not None
    interaction.request.uri += "?api-version=2024-06-01"
    case.path = tmp_path / "length-stop.yaml"
    case.save()
    (tmp_path / "length-stop.chunks.jsonl").write_bytes((ROOT / "cassettes" / "openai" / "length-stop.chunks.jsonl")
                                                       .read_bytes())
    routes = RouteTable.load()
    assert "no recorded interaction matches" in (await replay_case(case.path, routes)).problem
    case.metadata["adapter"] = {"default_query": {"api-version": "2024-06-01"}}
    case.save()
    result = await replay_case(case.path, routes)
    assert result.ok, result.problem
    adapters = AdapterCache(routes)
    try:
        assert (await replay_case(case.path, routes, adapters=adapters)).ok
    finally:
        await adapters.aclose()
