"""A cassette is read once per replay, by a loader that builds the same data as PyYAML's safe loader."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from vcr.request import Request as VcrRequest

from dsh_replay import use_cassette
from dsh_replay.adapters.route_table import RouteTable
from dsh_replay.cassette import interaction
from dsh_replay.cassette import yaml_file as reading
from dsh_replay.cassette.replay import AdapterCache, replay_case
from dsh_replay.cassette.store import Cassette, Interaction
from dsh_replay.errors import CassetteError
from dsh_replay.protocol.fields import FieldError

ROOT = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:9/v1/chat/completions"  # nothing listens: a replay must not need it
BODY = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'

DOCUMENTS = [
    "a: 1\nb: [1.5, -2, 0x1f, .inf, null, ~, true, 'yes', \"q\"]\nc: {d: 2001-12-14t21:59:43.10-05:00}\n",
    "bin: !!binary aGVsbG8=\nempty: \nlist: []\nmap: {}\n",
    "merged: {<<: {x: 1}, y: 2}\n",  # a merge key: left to the stock constructor
    "? [1, 2]\n: unhashable key\n",  # the stock constructor's error, not a TypeError
]  # aliases are refused: test_yaml_bomb.py


def _loader_only(text: str) -> object:
    try:
        return reading.load_yaml(text.encode())
    except CassetteError:
        return "refused"


def _stock(text: str) -> object:
    try:
        return yaml.load(text.encode(), Loader=reading._Loader)
    except yaml.YAMLError:
        return "refused"


@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_direct_loader_builds_what_the_safe_loader_builds(text: str) -> None:
    assert _loader_only(text) == _stock(text)


@pytest.mark.parametrize("path", sorted((ROOT / "cassettes").rglob("*.yaml")), ids=lambda p: p.name)
def test_bundled_cassettes_load_as_with_the_safe_loader(path: Path) -> None:
    assert reading.load_yaml(path.read_bytes()) == yaml.load(path.read_bytes(), Loader=reading._Loader)


def test_an_unknown_tag_is_still_an_error() -> None:
    with pytest.raises(CassetteError, match="is not valid YAML"):
        reading.load_yaml(b"a: !!python/object:os.system x\n")


def _saved(tmp_path: Path) -> Path:
    path = tmp_path / "chat.yaml"
    request = VcrRequest("POST", URL, json.dumps({"model": "m"}).encode(), {"content-type": "application/json"})
    interaction = Interaction(request=request, status=200, reason="OK",
                              headers=[("content-type", "text/event-stream")], body=BODY, fragments=[(0.0, len(BODY))])
    Cassette(path=path, interactions=[interaction]).save()
    return path


@pytest.mark.asyncio
async def test_use_cassette_replays_a_cassette_already_loaded_without_reading_the_file(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    loaded = Cassette.load(path)
    path.write_text("not: [a cassette\n", encoding="utf-8")  # reading it again would fail
    async with use_cassette(path, "none", cassette=loaded) as session, httpx.AsyncClient() as client:
        response = await client.post(URL, json={"model": "m"})
        assert response.content == BODY
    assert session.cassette is loaded and session.played == 1


@pytest.mark.asyncio
async def test_replay_case_reads_each_cassette_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[Path] = []
    load = Cassette.load.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Cassette], path: Path) -> Cassette:
        reads.append(Path(path))
        return load(cls, path)  # type: ignore[no-any-return]

    monkeypatch.setattr(Cassette, "load", classmethod(counting))
    case = ROOT / "cassettes" / "openai" / "text.yaml"
    adapters = AdapterCache(RouteTable.load())
    try:
        first = await replay_case(case, adapters.routes, adapters=adapters)
        second = await replay_case(case, adapters.routes, adapters=adapters)
    finally:
        await adapters.aclose()
    assert first.ok and second.ok, first.problem + second.problem
    assert reads == [case, case]


@pytest.mark.asyncio
async def test_adapters_are_shared_per_route_base_url_and_settings() -> None:
    adapters = AdapterCache(RouteTable.load())
    try:
        one = adapters.adapter("openai", base_url=None, drop_reasoning=False)
        assert adapters.adapter("openai", base_url=None, drop_reasoning=False) is one
        assert adapters.adapter("openai", base_url="http://127.0.0.1:9", drop_reasoning=False) is not one
        assert adapters.adapter("openai", base_url=None, drop_reasoning=True) is not one
        # one client for all of them, and no waiting between the retries of a replay
        assert adapters.adapter("anthropic", base_url=None, drop_reasoning=False).client is one.client  # type: ignore[attr-defined]
        assert one.retry.delay(0) == 0.0  # type: ignore[attr-defined]
        assert one.retry.delay(0, retry_after=1e6) is None  # type: ignore[attr-defined]  # still gives up
    finally:
        await adapters.aclose()


# -- the quick reading of plain headers and fragments agrees with the checked one ----------

_VALUE = st.text(max_size=4) | st.integers() | st.none() | st.floats(allow_nan=True) | st.booleans()
_HEADERS = st.none() | st.integers() | st.dictionaries(
    st.text(max_size=4) | st.integers(),
    st.text(max_size=4) | st.lists(st.text(max_size=4) | _VALUE, max_size=3) | _VALUE,
    max_size=4,
)
_FRAGMENTS = st.lists(
    st.lists(st.floats(allow_nan=True) | st.integers(-2, 10**9) | st.booleans() | st.text(max_size=2), max_size=3)
    | _VALUE,
    max_size=4,
)


def _read(read: Callable[..., object], *args: object) -> tuple[str, object]:
    try:
        return "ok", read(*args)
    except FieldError as exc:
        return "error", str(exc)


@settings(max_examples=300, deadline=None)
@given(headers=_HEADERS)
def test_headers_read_quickly_are_the_headers_read_with_checks(headers: object) -> None:
    raw = {"headers": headers}
    assert _read(interaction._headers, raw, "response") == _read(interaction._checked_headers, raw, "response")


@settings(max_examples=300, deadline=None)
@given(fragments=_FRAGMENTS)
def test_fragments_read_quickly_are_the_fragments_read_with_checks(fragments: list[object]) -> None:
    quick = interaction._plain_fragments(fragments)
    checked = _read(interaction._checked_fragments, fragments, "response.dsh_replay")
    if quick is not None:  # the quick reading takes only what the checked one accepts, as it reads it
        assert checked == ("ok", quick)
    elif checked[0] == "ok":  # and leaves to it only what is not plain: a bool, a subclass...
        assert any(type(item) is not list or any(type(n) not in (int, float) for n in item) for item in fragments)
