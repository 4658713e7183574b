"""Chunk <-> JSON and the golden JSONL format (SPEC §3 shapes, §7 goldens)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_replay import (
    BlockEnd,
    BlockStart,
    CallId,
    CassetteError,
    DshReplayError,
    Finish,
    FinishReason,
    Golden,
    Raised,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
    chunk_from_json,
    chunk_to_json,
    dump_jsonl,
    load_golden,
    load_jsonl,
)
from dsh_replay.protocol.jsonl import loads_json

try:
    from tests.strategies import json_values, valid_sequences
except ImportError:  # tests/ is not a package: pytest put it on sys.path itself
    from strategies import json_values, valid_sequences  # type: ignore[no-redef, import-not-found]

SEED: list[StreamChunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="runoob"),
    TextDelta(index=0, text=" 教程"),
    BlockEnd(index=0, block=TextBlock(text="runoob 教程")),
    BlockStart(index=1, block_type="tool-call"),
    ToolCallDelta(index=1, id=CallId("call-123"), name="bash", arguments_delta='{"command":"echo runoob"}'),
    BlockEnd(
        index=1,
        block=ToolCallBlock(id=CallId("call-123"), name="bash", arguments='{"command":"echo runoob"}'),
    ),
    UsageChunk(usage=Usage(input_tokens=100, output_tokens=50)),
    Finish(reason=FinishReason(kind="tool-calls")),
]

SEED_GOLDEN = (
    '{"type":"block-start","index":0,"blockType":"text"}\n'
    '{"type":"text-delta","index":0,"text":"runoob"}\n'
    '{"type":"text-delta","index":0,"text":" 教程"}\n'
    '{"type":"block-end","index":0,"block":{"type":"text","text":"runoob 教程"}}\n'
    '{"type":"block-start","index":1,"blockType":"tool-call"}\n'
    '{"type":"tool-call-delta","index":1,"id":"call-123","name":"bash",'
    '"argumentsDelta":"{\\"command\\":\\"echo runoob\\"}"}\n'
    '{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call-123","name":"bash",'
    '"arguments":"{\\"command\\":\\"echo runoob\\"}"}}\n'
    '{"type":"usage","usage":{"inputTokens":100,"outputTokens":50}}\n'
    '{"type":"finish","reason":{"kind":"tool-calls"}}\n'
).encode()

#: every chunk type, with and without its optional fields, and the key order of SPEC §3
EVERY_CHUNK: list[tuple[StreamChunk, list[str], dict[str, list[str]]]] = [
    (BlockStart(index=0, block_type="text"), ["type", "index", "blockType"], {}),
    (BlockStart(index=3, block_type="tool-call"), ["type", "index", "blockType"], {}),
    (BlockStart(index=7, block_type="reasoning"), ["type", "index", "blockType"], {}),
    (TextDelta(index=0, text="héllo 🙂\n"), ["type", "index", "text"], {}),
    (ReasoningDelta(index=2, text="hmm"), ["type", "index", "text"], {}),
    (
        ToolCallDelta(index=1, id=CallId("c1"), name="bash", arguments_delta='{"a"'),
        ["type", "index", "id", "name", "argumentsDelta"],
        {},
    ),
    (BlockEnd(index=0, block=TextBlock(text="x")), ["type", "index", "block"], {"block": ["type", "text"]}),
    (
        BlockEnd(index=1, block=ToolCallBlock(id=CallId("c1"), name="bash", arguments="{}")),
        ["type", "index", "block"],
        {"block": ["type", "id", "name", "arguments"]},
    ),
    (BlockEnd(index=2, block=ReasoningBlock(text="r")), ["type", "index", "block"], {"block": ["type", "text"]}),
    (
        BlockEnd(index=2, block=ReasoningBlock(text="r", signature="EqQB")),
        ["type", "index", "block"],
        {"block": ["type", "text", "signature"]},
    ),
    (
        UsageChunk(usage=Usage(input_tokens=1, output_tokens=2)),
        ["type", "usage"],
        {"usage": ["inputTokens", "outputTokens"]},
    ),
    (
        UsageChunk(usage=Usage(input_tokens=1, output_tokens=2, cached_input_tokens=3, reasoning_tokens=4)),
        ["type", "usage"],
        {"usage": ["inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens"]},
    ),
    (
        UsageChunk(usage=Usage(input_tokens=0, output_tokens=0, reasoning_tokens=4)),
        ["type", "usage"],
        {"usage": ["inputTokens", "outputTokens", "reasoningTokens"]},
    ),
    (Finish(reason=FinishReason(kind="stop")), ["type", "reason"], {"reason": ["kind"]}),
    (
        Finish(reason=FinishReason(kind="tool-calls", raw="tool_use")),
        ["type", "reason"],
        {"reason": ["kind", "raw"]},
    ),
]
_IDS = [f"{chunk_to_json(c)['type']}-{i}" for i, (c, _, _) in enumerate(EVERY_CHUNK)]


def _keys_in_order(line: bytes) -> Any:
    return json.loads(line, object_pairs_hook=lambda pairs: [(k, v) for k, v in pairs])


# -- chunk <-> JSON -----------------------------------------------------------------


@pytest.mark.parametrize(("chunk", "keys", "nested"), EVERY_CHUNK, ids=_IDS)
def test_every_chunk_type_round_trips(chunk: StreamChunk, keys: list[str], nested: dict[str, list[str]]) -> None:
    assert chunk_from_json(chunk_to_json(chunk)) == chunk
    assert load_jsonl(dump_jsonl([chunk])) == [chunk]


@pytest.mark.parametrize(("chunk", "keys", "nested"), EVERY_CHUNK, ids=_IDS)
def test_keys_are_in_the_order_of_the_spec_table(
    chunk: StreamChunk, keys: list[str], nested: dict[str, list[str]]
) -> None:
    pairs = _keys_in_order(dump_jsonl([chunk]))
    assert [k for k, _ in pairs] == keys
    for field, inner in nested.items():
        value = dict(pairs)[field]
        assert [k for k, _ in value] == inner


def test_chunk_to_json_values() -> None:
    assert chunk_to_json(SEED[5]) == {
        "type": "tool-call-delta",
        "index": 1,
        "id": "call-123",
        "name": "bash",
        "argumentsDelta": '{"command":"echo runoob"}',
    }
    assert chunk_to_json(SEED[-2]) == {"type": "usage", "usage": {"inputTokens": 100, "outputTokens": 50}}


def test_chunk_to_json_refuses_other_values() -> None:
    with pytest.raises(TypeError, match="not a StreamChunk"):
        chunk_to_json({"type": "usage"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"type": "text-delta", "index": True, "text": "a"}, "'index' must be int, got bool"),
        ({"type": "usage", "usage": {"inputTokens": 1, "outputTokens": False}}, "'outputTokens' must be int, got bool"),
        ({"type": "block-start", "index": 0, "blockType": "image"}, "'image'"),
        ({"type": "finish", "reason": {"kind": "length"}}, "'length'"),
        ({"type": "block-end", "index": 0, "block": {"type": "image"}}, "unknown block type 'image'"),
        ({"type": "nope"}, "unknown chunk type 'nope'"),
        ([], "a chunk must be a JSON object, got list"),
        ({"type": "text-delta", "index": -2, "text": "a"}, "index must be an int >= 0"),
    ],
)
def test_chunk_from_json_raises_value_error_naming_the_problem(data: Any, says: str) -> None:
    with pytest.raises(ValueError) as info:
        chunk_from_json(data)
    assert says in str(info.value)


@settings(max_examples=150, deadline=None)
@given(json_values())
def test_chunk_from_json_only_raises_value_error(value: Any) -> None:
    try:
        chunk = chunk_from_json(value)
    except ValueError as exc:
        assert str(exc)
    else:  # the rare JSON that is a chunk
        assert chunk_from_json(chunk_to_json(chunk)) == chunk


# -- dump_jsonl: byte-stable goldens --------------------------------------------------


def test_seed_golden_bytes_exactly() -> None:
    assert dump_jsonl(SEED) == SEED_GOLDEN


def test_dump_is_byte_stable() -> None:
    again = [chunk_from_json(orjson.loads(orjson.dumps(chunk_to_json(c)))) for c in SEED]
    assert again is not SEED
    assert dump_jsonl(SEED) == dump_jsonl(again) == dump_jsonl(iter(SEED)) == dump_jsonl(load_jsonl(SEED_GOLDEN))


def test_dump_keeps_non_ascii_as_utf8() -> None:
    data = dump_jsonl([TextDelta(index=0, text="教程 é 🙂")])
    assert "教程 é 🙂".encode() in data
    assert b"\\u" not in data


def test_dump_escapes_line_breaks_inside_strings() -> None:
    chunks = [TextDelta(index=0, text="a\nb\r\nc"), TextDelta(index=0, text="\u2028\t\x00")]
    data = dump_jsonl(chunks)
    assert data.count(b"\n") == 2
    assert b"\r" not in data
    assert load_jsonl(data) == chunks


def test_dump_line_ends_and_trailing_newline() -> None:
    data = dump_jsonl(SEED)
    assert data.endswith(b"}\n")
    assert b"\r\n" not in data
    lines = data.split(b"\n")
    assert lines[-1] == b""
    assert len(lines) == len(SEED) + 1


def test_dump_of_nothing_is_empty() -> None:
    assert dump_jsonl([]) == b""
    assert load_jsonl(b"") == []


# -- the raised line ------------------------------------------------------------------


class AdapterBroke(RuntimeError):
    pass


def test_raised_line_is_written_last_and_read_back() -> None:
    data = dump_jsonl(SEED[:3], raised=AdapterBroke("stream cut — 接続"))
    *chunk_lines, last, end = data.split(b"\n")
    assert end == b""
    assert b"\n".join(chunk_lines) + b"\n" == dump_jsonl(SEED[:3])
    assert last == '{"type":"raised","error":"AdapterBroke","message":"stream cut — 接続"}'.encode()
    golden = load_golden(data)
    assert golden == Golden(chunks=SEED[:3], raised=Raised(error="AdapterBroke", message="stream cut — 接続"))


def test_raised_value_and_exception_give_the_same_line() -> None:
    assert dump_jsonl([], raised=Raised(error="ValueError", message="bad")) == dump_jsonl([], raised=ValueError("bad"))
    assert Raised.from_exception(KeyError("k")) == Raised(error="KeyError", message="'k'")


@pytest.mark.parametrize(
    ("raised", "got"),
    [("boom", "str"), (ValueError, "the class ValueError"), ({"error": "E", "message": "m"}, "dict")],
)
def test_raised_of_another_type_is_a_type_error_naming_it(raised: Any, got: str) -> None:
    with pytest.raises(TypeError) as info:
        dump_jsonl(SEED[:1], raised=raised)
    assert str(info.value) == f"raised must be a Raised, an exception instance or None, got {got}"


def test_text_that_is_not_unicode_is_a_value_error_naming_the_chunk() -> None:
    chunks = [*SEED[:2], TextDelta(index=0, text="lone \ud800")]
    with pytest.raises(ValueError) as info:
        dump_jsonl(chunks)
    assert str(info.value) == "the chunk at position 2 cannot be written as JSON: str is not valid UTF-8: surrogates not allowed"
    with pytest.raises(ValueError, match=r"^the raised line \(AdapterBroke\) cannot be written as JSON: "):
        dump_jsonl(SEED[:1], raised=AdapterBroke("\udc80"))


def test_load_golden_without_raised_line() -> None:
    golden = load_golden(SEED_GOLDEN)
    assert golden.chunks == SEED and golden.raised is None


def test_load_jsonl_refuses_a_golden_with_a_raised_line() -> None:
    data = dump_jsonl(SEED[:2], raised=ValueError("x"))
    with pytest.raises(DshReplayError) as info:
        load_jsonl(data)
    assert "<bytes>:3:" in str(info.value)
    assert "load_golden()" in str(info.value)


@pytest.mark.parametrize(
    ("data", "line", "says"),
    [
        (dump_jsonl([], raised=ValueError("x")) + dump_jsonl(SEED[:1]), 2, "nothing may follow the 'raised' line (line 1)"),
        (b'{"type":"raised","error":1,"message":"m"}\n', 1, "string fields 'error' and 'message'"),
        (b'{"type":"raised","error":"E"}\n', 1, "string fields 'error' and 'message'"),
    ],
)
def test_load_golden_refuses_bad_raised_lines(data: bytes, line: int, says: str) -> None:
    with pytest.raises(DshReplayError) as info:
        load_golden(data)
    assert f"<bytes>:{line}: " in str(info.value)
    assert says in str(info.value)


# -- errors name the line --------------------------------------------------------------

_GOOD = dump_jsonl(SEED[:4])  # 4 lines


@pytest.mark.parametrize(
    ("data", "line", "says"),
    [
        (dump_jsonl(SEED)[:-10], 9, "not valid JSON"),  # truncated last line
        (_GOOD + b'{"type":"text-delta","ind\n' + _GOOD, 5, "not valid JSON (unexpected end of data"),
        (_GOOD + b"hello\n", 5, "not valid JSON"),
        (b"\xef\xbb\xbf" + _GOOD, 1, "not valid JSON"),  # a BOM
        (_GOOD + b'{"text":"\xff"}\n', 5, "not UTF-8 text (byte 0xff at column 10); save the file as UTF-8"),
        (_GOOD + b'{"type":"nope"}\n', 5, "not a chunk: unknown chunk type 'nope'"),
        (_GOOD + b"[1, 2]\n", 5, "not a chunk: a chunk must be a JSON object, got list"),
        (_GOOD + b"42\n", 5, "not a chunk"),
        (_GOOD + b'{"type":"text-delta","index":"0","text":"a"}\n', 5, "'index' must be int, got str"),
        (_GOOD + b'{"type":"usage","usage":{"inputTokens":-1,"outputTokens":1}}\n', 5, "must be an int >= 0"),
        (b"\n\n" + _GOOD[: _GOOD.index(b"\n") + 1] + b"\n{oops\n", 5, "not valid JSON"),  # blank lines counted
    ],
    ids=[
        "truncated",
        "cut-line",
        "not-json",
        "bom",
        "not-utf8",
        "unknown-type",
        "list",
        "number",
        "bad-field",
        "negative-count",
        "blank-lines",
    ],
)
def test_bad_line_is_an_error_naming_its_line(data: bytes, line: int, says: str) -> None:
    for load in (load_jsonl, load_golden):
        with pytest.raises(DshReplayError) as info:
            load(data)
        message = str(info.value)
        assert message.startswith(f"<bytes>:{line}: "), message
        assert says in message
        assert "line 1 column" not in message  # orjson's own position would contradict ours


def test_errors_from_a_file_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "case.chunks.jsonl"
    path.write_bytes(_GOOD + b"{oops\n")
    for source in (path, str(path)):
        with pytest.raises(CassetteError) as info:
            load_golden(source)
        assert str(info.value).startswith(f"{path}:5: ")
        assert info.value.path == str(path)


def test_load_reads_paths_bytes_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "seed.chunks.jsonl"
    path.write_bytes(SEED_GOLDEN)
    assert load_jsonl(path) == SEED
    assert load_jsonl(str(path)) == SEED
    assert load_golden(path).chunks == SEED
    assert load_jsonl(bytearray(SEED_GOLDEN)) == SEED
    assert load_jsonl(SEED_GOLDEN.replace(b"\n", b"\r\n")) == SEED
    assert load_jsonl(b"\n" + SEED_GOLDEN + b"\n\n") == SEED
    assert load_jsonl(SEED_GOLDEN.replace(b"\n", b"\r\n") + b"\r\n  \t\r\n") == SEED  # blank = whitespace only


def test_missing_path_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "gone.chunks.jsonl"
    for load in (load_jsonl, load_golden):
        with pytest.raises(DshReplayError) as info:
            load(missing)
        assert str(missing) in str(info.value)
        assert "No such file" in str(info.value)
        assert isinstance(info.value, CassetteError) and info.value.path == str(missing)


def test_directory_and_nul_paths_are_errors(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="cannot read"):
        load_jsonl(tmp_path)
    with pytest.raises(CassetteError, match="cannot read"):
        load_jsonl(str(tmp_path / "a\0b"))


def test_an_int_is_not_taken_for_a_file_descriptor() -> None:
    with pytest.raises(TypeError, match="bytes or a file path"):
        load_jsonl(0)


def test_a_str_is_a_path_not_json() -> None:
    with pytest.raises(DshReplayError, match="cannot read"):
        load_jsonl(SEED_GOLDEN.decode())


# -- loads_json -------------------------------------------------------------------------


def test_loads_json_is_exact_and_strict() -> None:
    assert loads_json('{"n": 123456789012345678901234567890}') == {"n": 123456789012345678901234567890}
    assert loads_json(b"[1e400]") == [float("inf")]
    for text in ("NaN", '{"a": -Infinity}', "{", "", '{"a":1} x', "[" * 100_000 + "]" * 100_000):
        with pytest.raises(ValueError):
            loads_json(text)


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_sequences(), st.none() | st.builds(Raised, error=st.text(min_size=1, max_size=10), message=st.text(max_size=20)))
def test_golden_round_trip_is_exact_and_byte_stable(chunks: list[StreamChunk], raised: Raised | None) -> None:
    data = dump_jsonl(chunks, raised=raised)
    assert data.count(b"\n") == len(chunks) + (raised is not None)
    assert data.endswith(b"\n") or not data
    golden = load_golden(data)
    assert golden.chunks == chunks
    assert golden.raised == raised
    assert dump_jsonl(golden.chunks, raised=golden.raised) == data
    if raised is None:
        assert load_jsonl(data) == chunks
    for line, chunk in zip(data.split(b"\n"), chunks, strict=False):
        assert orjson.loads(line) == chunk_to_json(chunk)
