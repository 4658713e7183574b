"""``dsh_replay.wire.coverage``: counting kinds, their status, body lines, field reads — no adapter involved."""

# ruff: noqa: RUF001 - the multiplication sign between a kind and its count is what the commands print

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dsh_replay import SSEDecoder
from dsh_replay.wire.coverage import (
    AFTER_TERMINAL_KIND,
    COMMENT_KIND,
    CoverageCollector,
    CoverageMeter,
    KindCount,
    WireCoverage,
    active_collector,
    collect_coverage,
    unmapped_of,
)
from dsh_replay.wire.coverage_fields import (
    field_paths,
    ndjson_event_lines,
    sse_comment_lines,
    sse_event_lines,
    tracked,
    unread_roots,
)
from tests.test_architecture import IO_LIBRARIES, imports_of, modules

MAPPED = frozenset({"text", "done"})
IGNORED = {"ping": "a keep-alive"}


def _meter(**kwargs: object) -> CoverageMeter:
    return CoverageMeter("toy", mapped=MAPPED, ignored=IGNORED, framing="sse", **kwargs)  # type: ignore[arg-type]


def _run(meter: CoverageMeter, body: bytes, kinds_of: dict[str, tuple[str, ...]]) -> WireCoverage:
    """Decode ``body`` as SSE, count each event under ``kinds_of[its data]``, as an adapter would."""
    decoder = SSEDecoder()
    meter.feed_body(body)
    for event in [*decoder.feed(body), *decoder.flush()]:
        meter.observe(kinds_of[event.data], event)
    return meter.result()


def test_each_kind_is_counted_with_its_status_and_reason_in_order_of_first_appearance() -> None:
    body = b'data: t1\n\ndata: p\n\ndata: t2\n\ndata: img\n\ndata: img2\n\ndata: d\n\n'
    kinds = {"t1": ("text",), "t2": ("text",), "p": ("ping",), "img": ("image",), "img2": ("image",), "d": ("done",)}
    coverage = _run(_meter(), body, kinds)
    assert [(k.kind, k.count, k.status, k.reason) for k in coverage.kinds] == [
        ("text", 2, "mapped", ""), ("ping", 1, "ignored", "a keep-alive"), ("image", 2, "unmapped", ""),
        ("done", 1, "mapped", ""),
    ]
    assert coverage.events == 6
    assert coverage.status == "unmapped"
    assert [k.kind for k in coverage.unmapped] == ["image"]
    assert coverage.unmapped_lines() == ["unmapped: image ×2 (first at body line 7)"]


def test_without_detail_only_unmapped_kinds_get_a_line() -> None:
    body = b'data: t\n\ndata: x\n\ndata: d\n\n'
    coverage = _run(_meter(), body, {"t": ("text",), "x": ("new",), "d": ("done",)})
    assert {k.kind: k.first_line for k in coverage.kinds} == {"text": None, "new": 3, "done": None}
    assert {k.kind: k.first_event for k in coverage.kinds} == {"text": 0, "new": 1, "done": 2}


def test_with_detail_every_kind_gets_the_line_its_block_starts_on_and_comments_are_counted() -> None:
    body = (b": keep-alive\n\nevent: message_start\ndata: s\n\n: OPENROUTER PROCESSING\n\n"
            b"id: 7\nevent: delta\ndata: t\n\ndata: d\n\n")
    meter = _meter(detail=True)
    coverage = _run(meter, body, {"s": ("text",), "t": ("text",), "d": ("done",)})
    assert [(k.kind, k.count, k.first_line) for k in coverage.kinds] == [
        (COMMENT_KIND, 2, 1), ("text", 2, 3), ("done", 1, 12),
    ]
    assert coverage.get(COMMENT_KIND).status == "ignored"  # type: ignore[union-attr]


def test_lines_count_crlf_and_lone_cr_line_ends_as_the_decoder_does() -> None:
    body = b"data: a\r\n\r\ndata: b\r\n\r\ndata: c\r\n\r\n"
    assert sse_event_lines(body, [(1, "b"), (2, "c")]) == {1: 3, 2: 5}
    assert sse_comment_lines(b": x\r\n\r\ndata: a\r\n\r\n: y\r\n") == [1, 5]


def test_the_data_of_an_event_is_matched_as_a_whole_line_not_inside_another_event() -> None:
    # "b" occurs inside the first event's data: the located event is the later whole line
    body = b'data: {"text": "b"}\n\ndata: b\n\n'
    assert sse_event_lines(body, [(1, "b")]) == {1: 3}
    assert sse_event_lines(body, [(0, "nowhere")]) == {}


def test_ndjson_lines_skip_blank_lines() -> None:
    assert ndjson_event_lines(b'{"a":1}\n\n{"b":2}\n  \n{"c":3}\n', upto=5) == [1, 3, 5]


def test_a_body_too_big_to_keep_keeps_positions_not_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dsh_replay.wire.coverage.MAX_LINED_BODY", 8)
    coverage = _run(_meter(), b"data: t\n\ndata: x\n\n", {"t": ("text",), "x": ("new",)})
    (new,) = coverage.unmapped
    assert (new.first_line, new.first_event) == (None, 1)
    assert new.describe() == "new ×1 (first at event 2)"


def test_an_event_of_several_kinds_counts_once_as_an_event_and_once_under_each_kind() -> None:
    meter = _meter()
    for kinds in [("text", "done"), ("text",), ("text", "done")]:
        meter.observe(kinds)
    coverage = meter.result()
    assert coverage.events == 3
    assert {k.kind: k.count for k in coverage.kinds} == {"text": 3, "done": 2}


def test_events_after_the_terminal_one_are_an_ignored_pseudo_kind_not_translated_events() -> None:
    meter = _meter()
    meter.observe(("done",))
    meter.after_terminal()
    coverage = meter.result()
    assert coverage.events == 1
    assert coverage.get(AFTER_TERMINAL_KIND).status == "ignored"  # type: ignore[union-attr]


def test_a_translator_that_declares_nothing_is_counted_but_not_judged() -> None:
    meter = CoverageMeter("toy", mapped=None, ignored={})
    meter.observe(("whatever",))
    coverage = meter.result()
    assert coverage.status == "undeclared"
    assert coverage.unmapped == ()
    assert coverage.get("whatever").status == "unmapped"  # type: ignore[union-attr]


def test_deep_coverage_lists_what_mapped_events_carried_and_the_shallowest_paths_never_read() -> None:
    meter = _meter(deep=True, whole=frozenset({"args"}))
    payload = {"type": "text", "text": "hi", "usage": {"in": 1, "server_tool_use": {"web": 2}},
               "args": {"city": "Paris"}, "parts": [{"text": "a", "meta": 1}]}
    meter.observe(("text",))
    seen = meter.track(payload)
    assert seen["type"] == "text" and seen.get("text") == "hi" and seen["usage"].get("in") == 1
    assert [part.get("text") for part in seen["parts"]] == ["a"]
    meter.settle()
    (text,) = meter.result().kinds
    assert "args" in text.fields and "usage.server_tool_use.web" in text.fields
    # args is passed on whole; parts[].meta, usage.server_tool_use were never looked at
    assert text.unread == ("parts[].meta", "usage.server_tool_use")


def test_tracked_values_still_look_like_plain_json_to_translators() -> None:
    from dsh_replay.wire.coverage_fields import Reads

    reads = Reads()
    value = tracked({"a": [1, {"b": None}], "c": {}}, "", reads)
    assert isinstance(value, dict) and isinstance(value["a"], list) and value == {"a": [1, {"b": None}], "c": {}}
    assert "c" in value and value.get("missing") is None
    assert reads.paths == {"a", "c"}
    list(value.items())
    assert reads.paths == {"a", "c"}


def test_field_paths_and_unread_roots() -> None:
    assert field_paths({"a": {"b": 1, "c": []}, "d": [{"e": 1}, {"f": 2}]}) == {"a.b", "a.c", "d[].e", "d[].f"}
    assert unread_roots(["a.b.c", "a.d", "x[].y"], {"a", "a.d", "x", "x[]"}) == ["a.b", "x[].y"]


def test_kind_counts_check_their_invariants_and_round_trip_through_json() -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        KindCount(kind="x", count=1, status="maybe")
    with pytest.raises(ValueError, match="count >= 1"):
        KindCount(kind="x", count=0, status="mapped")
    with pytest.raises(ValueError, match="twice"):
        WireCoverage(route="r", kinds=(KindCount(kind="x", count=1, status="mapped"),) * 2)
    coverage = _run(_meter(detail=True), b"data: x\n\n", {"x": ("new",)})
    assert WireCoverage.from_json(coverage.to_json()) == coverage


def test_unmapped_of_adds_up_the_calls_of_a_cassette() -> None:
    first = _run(_meter(), b"data: x\n\ndata: x\n\n", {"x": ("new",)})
    second = _run(_meter(), b"data: t\n\ndata: x\n\n", {"t": ("text",), "x": ("new",)})
    (merged,) = unmapped_of([first, second])
    assert (merged.kind, merged.count, merged.first_line) == ("new", 3, 1)


def test_collect_coverage_is_active_only_inside_its_block_and_nests() -> None:
    assert active_collector() is None
    with collect_coverage() as outer:
        assert active_collector() is outer
        with collect_coverage(fields=True) as inner:
            assert active_collector() is inner and inner.deep and inner.detail
        assert active_collector() is outer and not outer.deep
    assert active_collector() is None


def test_the_coverage_bookkeeping_is_sans_io() -> None:
    found = {name: imports_of(name, path) for name, path in modules().items() if name.startswith("dsh_replay.wire.coverage")}
    assert set(found) == {"dsh_replay.wire.coverage", "dsh_replay.wire.coverage_fields"}
    assert {m.split(".")[0] for imported in found.values() for m in imported} & IO_LIBRARIES == set()


_FIELD_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["delta", "ping"])), _FIELD_TEXT,
                          st.booleans(), st.booleans()), min_size=1, max_size=8),
       st.sampled_from(["\n", "\r\n"]))
# "data: " holds "", not " ": the event with data " " is on the line "data:  " below it
@example([(None, "", False, False), (None, " ", False, False)], "\n")
def test_every_event_is_located_on_the_line_its_block_starts(
        blocks: list[tuple[str | None, str, bool, bool]], newline: str) -> None:
    lines: list[str] = []
    starts: list[int] = []
    for name, data, comment_before, extra_blank in blocks:
        if comment_before:
            lines += [": keep-alive", ""]
        starts.append(len(lines) + 1)
        lines += ([f"event: {name}"] if name else []) + [f"data: {data}", ""]
        if extra_blank:
            lines.append("")
    body = newline.join(lines).encode() + newline.encode()
    decoder = SSEDecoder()
    events = [*decoder.feed(body), *decoder.flush()]
    assert [e.data for e in events] == [data for _, data, _, _ in blocks]
    # located in stream order, as the meter asks for them (each event whose data is new so far)
    wanted = [(n, e.data) for n, e in enumerate(events) if e.data not in {x.data for x in events[:n]}]
    assert sse_event_lines(body, wanted) == {n: starts[n] for n, _ in wanted if events[n].data}
    assert sse_comment_lines(body) == [start - 2 for (_, _, comment, _), start in zip(blocks, starts, strict=True) if comment]


def _ended(body: bytes, kinds_of: dict[str, tuple[str, ...]], **kwargs: object) -> CoverageMeter:
    """A meter that has seen ``body`` to its end, as a stream leaves it with its collector."""
    meter = _meter(**kwargs)
    meter.feed_body(body)
    decoder = SSEDecoder()
    for event in [*decoder.feed(body), *decoder.flush()]:
        meter.observe(kinds_of[event.data], event)
    return meter


def test_a_collector_counts_clean_streams_without_building_them_and_builds_them_when_read() -> None:
    collector = CoverageCollector()
    collector.ended(_ended(b"data: t\n\ndata: p\n\ndata: d\n\n", {"t": ("text",), "p": ("ping",), "d": ("done",)}))
    terminal = _ended(b"data: d\n\n", {"d": ("done",)})
    terminal.after_terminal()  # a pseudo kind: ignored, never unmapped
    collector.ended(terminal)
    assert collector.clean_count() == 2
    assert [stream.events for stream in collector.streams] == [3, 1]  # in the order the streams ended
    assert [k.kind for k in collector.streams[0].kinds] == ["text", "ping", "done"]
    assert collector.clean_count() is None  # built now: the caller reads them


def test_a_collector_with_an_unmapped_kind_or_an_undeclared_translator_sends_the_caller_to_its_streams() -> None:
    unmapped = CoverageCollector()
    unmapped.ended(_ended(b"data: t\n\ndata: img\n\n", {"t": ("text",), "img": ("image",)}))
    assert unmapped.clean_count() is None
    assert [(k.kind, k.first_line) for k in unmapped.unmapped] == [("image", 3)]
    undeclared = CoverageCollector()
    meter = CoverageMeter("toy", mapped=None, ignored={})
    meter.observe(("whatever",))
    undeclared.ended(meter)
    assert undeclared.clean_count() is None
    assert [stream.status for stream in undeclared.streams] == ["undeclared"]
