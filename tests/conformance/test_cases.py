"""How the cases are built from cassettes, and how a case is judged."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from dsh_replay import GenerateOptions, StreamChunk
from dsh_replay.adapters import OpenAIChatAdapter
from dsh_replay.cassette import pacing
from dsh_replay.conformance import build_cases, run_case, runner
from dsh_replay.conformance.faults import error_body, event_starts, last_needed_event
from dsh_replay.errors import ConfigError, RateLimitError

ROOT = Path(__file__).resolve().parents[2]


def own_route(tmp_path: Path, *names: str) -> Path:
    """Copies of bundled openai cassettes (and goldens) relabelled as the route ``mine``."""
    for name in names:
        for source in (ROOT / "cassettes" / "openai").glob(f"{name}.*"):
            target = tmp_path / source.name
            shutil.copy(source, target)
            if source.suffix == ".yaml":
                target.write_text(target.read_text().replace("route: openai", "route: mine", 1))
    return tmp_path


def by_id(cases: list[Any]) -> dict[str, Any]:
    return {case.id: case for case in cases}


def test_a_route_of_ones_own_gets_its_recorded_error_body_under_every_status(tmp_path: Path) -> None:
    cases = by_id(build_cases("mine", [own_route(tmp_path, "text", "rate-limited")]))
    statuses = {case_id: case for case_id, case in cases.items() if case_id[6:].isdigit()}
    assert sorted(statuses) == [f"fault-{s}" for s in (400, 401, 403, 404, 429, 500, 503, 529)]
    rate_limited = (tmp_path / "rate-limited.yaml").read_text()
    body = statuses["fault-401"].interactions[0].body
    assert orjson.loads(body)["error"]["code"] == "rate_limit_exceeded" and b"rate" in body
    assert "rate_limit_exceeded" in rate_limited
    assert statuses["fault-401"].interactions[0].status == 401 and not statuses["fault-401"].skip


def test_a_route_without_a_recorded_error_skips_the_status_cases_with_the_reason(tmp_path: Path) -> None:
    cases = by_id(build_cases("mine", [own_route(tmp_path, "text")]))
    assert cases["fault-429"].skip == "no recorded HTTP error response of this route to shape the body from"
    assert cases["fault-error-event"].skip == "no cassette of route 'mine' records an error event inside a stream"
    assert cases["fault-reset"].skip == "" and cases["text[bytes]"].skip == ""


def test_truncation_points_lie_on_event_boundaries_in_order() -> None:
    cases = by_id(build_cases("openai"))
    body = cases["fault-reset"].interactions[0].body
    starts = event_starts(body, ndjson=False)
    cuts = [cases[f"fault-truncate-{where}"].fault.at for where in ("early", "middle", "last-event")]
    assert cuts == sorted(set(cuts)) and all(cut in starts for cut in cuts)
    # the last needed event is the finish/usage one, not the [DONE] sentinel after it
    assert body[cuts[2]:].startswith(b"data: {") and body.rstrip().endswith(b"data: [DONE]")
    assert cuts[2] == last_needed_event(body, ndjson=False)


def test_ndjson_event_starts_are_line_starts() -> None:
    body = b'{"a":1}\n{"b":2}\n{"c":3}\n'
    assert event_starts(body, ndjson=True) == [0, 8, 16]
    assert last_needed_event(body, ndjson=True) == 16


@pytest.mark.parametrize(("family", "status", "shape"), [
    ("openai", 429, ("error", "code")), ("anthropic", 529, ("type",)), ("google", 403, ("error", "status")),
])
def test_error_bodies_are_the_providers_shapes(family: str, status: int, shape: tuple[str, ...]) -> None:
    value: Any = orjson.loads(error_body(family, status))
    for key in shape:
        value = value[key]
    assert value


def test_unknown_paths_and_routes_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file or folder"):
        build_cases("openai", [tmp_path / "missing"])
    with pytest.raises(ConfigError, match="no cassette of route 'gemini'"):
        build_cases("gemini", [own_route(tmp_path, "text")])


class Hangs(OpenAIChatAdapter):
    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        await anyio.sleep_forever()
        yield  # type: ignore[misc]  # an async generator that never gets here


def test_an_adapter_that_never_ends_is_a_hang_not_a_stuck_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "CASE_TIMEOUT", 0.05)
    case = by_id(build_cases("openai"))["text[recorded]"]
    verdict = anyio.run(run_case, Hangs, case)
    assert verdict.problem.startswith("hang: no result after")


def test_a_stall_is_judged_on_virtual_time_and_the_clock_is_restored() -> None:
    saved = pacing.CLOCK
    case = by_id(build_cases("openai"))["fault-stall"]
    verdict = anyio.run(run_case, OpenAIChatAdapter, case)
    assert verdict.ok and verdict.raised == "StreamTimeoutError"
    assert pacing.CLOCK is saved


def test_a_retried_status_gets_the_same_error_again() -> None:
    case = by_id(build_cases("openai"))["fault-429"]
    assert case.repeat_last and case.expect_raise == (RateLimitError,)
    verdict = anyio.run(run_case, OpenAIChatAdapter, case)
    assert verdict.ok and verdict.raised == "RateLimitError"
