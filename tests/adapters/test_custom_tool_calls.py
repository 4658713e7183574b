"""OpenAI Responses custom (free-form) tool calls: a tool-call block whose arguments are ``{"input": text}``.

The stream shape is the Responses API's (``response.output_item.added`` with a
``custom_tool_call`` item, ``response.custom_tool_call_input.delta`` events,
``...input.done``, ``response.output_item.done`` with the whole input); the
bundled ``cassettes/openai-responses/custom-tool-call.yaml`` is one recorded.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_replay import ToolCallBlock, ToolCallDelta, collect
from dsh_replay.cassette.replay import Outcome, trace_body

CALL = "call_Ap9lyP4tchCust0mT00l047"
ITEM = {"id": "ctc_01", "type": "custom_tool_call", "status": "in_progress", "call_id": CALL, "name": "apply_patch",
        "input": ""}


def _body(pieces: list[str], *, added_input: str = "", done_event: bool = True, item_done: bool = True,
          terminal: str = "response.completed", whole: str = "") -> bytes:
    """A Responses stream with one custom call; ``whole``: the input the done events carry when no delta did."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**ITEM, "input": added_input}},
        *({"type": "response.custom_tool_call_input.delta", "item_id": "ctc_01", "output_index": 0, "delta": piece}
          for piece in pieces),
    ]
    text = added_input + "".join(pieces) or whole
    if done_event:
        events.append({"type": "response.custom_tool_call_input.done", "item_id": "ctc_01", "output_index": 0,
                       "input": text})
    if item_done:
        events.append({"type": "response.output_item.done", "output_index": 0,
                       "item": {**ITEM, "status": "completed", "input": text}})
    events.append({"type": terminal, "response": {"status": "completed" if terminal.endswith("completed") else
                                                  "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                                                  "usage": {"input_tokens": 5, "output_tokens": 9}}})
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _call(outcome: Outcome) -> tuple[ToolCallBlock, list[str]]:
    assert outcome.raised is None and outcome.violations == []
    (block,) = [c.block for c in outcome.chunks if type(c).__name__ == "BlockEnd"]
    assert isinstance(block, ToolCallBlock)
    deltas = [c.arguments_delta for c in outcome.chunks if isinstance(c, ToolCallDelta)]
    return block, deltas


@pytest.mark.asyncio
async def test_a_custom_tool_call_is_a_tool_call_block_with_the_free_text_as_input() -> None:
    patch = '*** Begin Patch\n*** Update File: a.py\n-print("hi")\n+print("hé\\tllo")\t☀️\n*** End Patch\n'
    pieces = [patch[i : i + 3] for i in range(0, len(patch), 3)]
    outcome = await trace_body(_body(pieces), route="openai-responses")
    block, deltas = _call(outcome)
    assert (block.id, block.name) == (CALL, "apply_patch")
    assert orjson.loads(block.arguments) == {"input": patch}
    # the pieces are the escaped input, wrapped: the first opens the object, the last closes it (P7)
    assert deltas[0] == '{"input":"' and deltas[-1] == '"}' and "".join(deltas) == block.arguments
    assert len(deltas) == len(pieces) + 2
    assert outcome.chunks[-1].reason.kind == "tool-calls"  # type: ignore[union-attr]
    assert collect(outcome.chunks).tool_calls[0].parsed == {"input": patch}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "shape",
    [
        {"added_input": 'in "output_item.added"'},
        {"whole": 'in "input.done"\n'},  # no delta: custom_tool_call_input.done carries it
        {"whole": 'in "output_item.done"\t', "done_event": False},  # nor that event: output_item.done does
    ],
    ids=["in-added", "in-input-done", "in-item-done"],
)
async def test_input_that_comes_whole_is_one_piece_of_the_arguments(shape: dict[str, Any]) -> None:
    block, deltas = _call(await trace_body(_body([], **shape), route="openai-responses"))
    text = shape.get("added_input") or shape["whole"]
    assert orjson.loads(block.arguments) == {"input": text}
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]
    # the block opens at output_item.added; the whole text is then one piece, escaped
    expected = ['{"input":"' + escaped, '"}'] if "added_input" in shape else ['{"input":"', escaped, '"}']
    assert deltas == expected


@pytest.mark.asyncio
async def test_a_call_cut_by_the_terminal_event_still_has_json_arguments() -> None:
    outcome = await trace_body(_body(["*** Begin", " Pat"], done_event=False, item_done=False,
                                     terminal="response.incomplete"), route="openai-responses")
    block, _ = _call(outcome)
    assert orjson.loads(block.arguments) == {"input": "*** Begin Pat"}
    assert outcome.chunks[-1].reason.raw == "max_output_tokens"  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=12))
def test_any_text_split_anywhere_joins_into_exactly_the_input(pieces: list[str]) -> None:
    import asyncio

    pieces = [p for p in pieces if "\x00" not in p] or ["x"]
    block, deltas = _call(asyncio.run(trace_body(_body(pieces), route="openai-responses", fragmentation="bytes")))
    assert orjson.loads(block.arguments) == {"input": "".join(pieces)}
    assert "".join(deltas) == block.arguments
