"""Record the example's cassettes against an emulated Cohere.

Against Cohere itself you would run ``pytest --record-mode=once`` with
``COHERE_API_KEY`` set. Here each test runs that way against a
``dsh_replay.testing.ProviderEmulator`` on 127.0.0.1 that answers ``POST /v2/chat``
with the bodies below, in Cohere's framing (an ``event:`` line naming the type,
a ``data:`` line with the JSON event, see WIRE_FORMAT.md). Bodies are cut where a
real connection cuts them (several events in one read, events split mid-JSON)
and a few milliseconds apart::

    python record_with_emulator.py            # records the tests that have no cassette yet
    python record_with_emulator.py --rewrite  # records them all afresh
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from dsh_replay.testing import ProviderEmulator, ScriptedResponse

HERE = Path(__file__).resolve().parent
# what the emulator is told the key is; the cassettes keep only the scrubbed header
KEY = "sk-test-cohere-emulated-4f1c9a"

Event = Mapping[str, object]


def sse(*events: Event) -> bytes:
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n"
        for event in events
    ).encode()


def start(message_id: str) -> Event:
    return {"id": message_id, "type": "message-start",
            "delta": {"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}}


def text(*pieces: str, index: int = 0) -> list[Event]:
    return [
        {"type": "content-start", "index": index, "delta": {"message": {"content": {"type": "text", "text": ""}}}},
        *({"type": "content-delta", "index": index, "delta": {"message": {"content": {"text": p}}}} for p in pieces),
        {"type": "content-end", "index": index},
    ]


def plan(*pieces: str) -> list[Event]:
    return [{"type": "tool-plan-delta", "delta": {"message": {"tool_plan": p}}} for p in pieces]


def call(index: int, call_id: str, name: str, *arguments: str) -> list[Event]:
    return [
        {"type": "tool-call-start", "index": index, "delta": {"message": {"tool_calls": {
            "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}}}},
        *({"type": "tool-call-delta", "index": index,
           "delta": {"message": {"tool_calls": {"function": {"arguments": a}}}}} for a in arguments),
        {"type": "tool-call-end", "index": index},
    ]


def end(reason: str, billed: tuple[int, int], tokens: tuple[int, int]) -> Event:
    return {"type": "message-end", "delta": {"finish_reason": reason, "usage": {
        "billed_units": {"input_tokens": billed[0], "output_tokens": billed[1]},
        "tokens": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}}}


BODIES: dict[str, bytes] = {
    "test_text": sse(
        start("a8fc192e-4bb8-4e15-ae1f-a174e8b02ae8"),
        *text("A", " large", " language", " model", " (", "LLM", ")", " is", " a", " neural", " network",
              " trained", " on", " vast", " amounts", " of", " text", "."),
        end("COMPLETE", (10, 20), (196, 20)),
    ),
    "test_tool_call": sse(
        start("fba98ad3-e5a1-413c-a8de-84fbf9baabf7"),
        *plan("I", " will", " look", " up", " the", " weather", " in", " Madrid", "."),
        *call(0, "get_weather_1byjy32y2k6a", "get_weather", '{\n    "', "location", '":', ' "', "Madrid", '"', "\n}"),
        end("TOOL_CALL", (37, 28), (1201, 62)),
    ),
    "test_parallel_tool_calls": sse(
        start("e8f9afc1-0888-46f0-a9ed-eb0e5a51e17f"),
        *plan("I", " will", " search", " for", " the", " weather", " in", " Madrid", " and", " Brasilia", "."),
        *call(0, "get_weather_p0dage9q1nv4", "get_weather", '{\n    "', "location", '":', ' "', "Madrid", '"', "\n}"),
        *call(1, "get_weather_7vfrbu0d0jhv", "get_weather", '{\n    "', "location", '":', ' "', "Bras", "ilia", '"', "\n}"),
        end("TOOL_CALL", (37, 44), (1219, 83)),
    ),
    "test_tool_result_in_history": sse(
        start("6f4a7e2b-3c0d-4b7e-9a51-0d2c8b1e5f93"),
        *text("It", " is", " currently", " 24", "°C", " in", " Madrid", "."),
        end("COMPLETE", (52, 9), (1288, 9)),
    ),
    "test_max_tokens": sse(
        start("0c3e5d8a-91b2-4f67-8e0a-7d4b2c6f1a85"),
        *text("The", " sea", ",", " a", " vast", " and", " rest", "less"),
        end("MAX_TOKENS", (8, 8), (194, 8)),
    ),
    # finish_reason ERROR ends the stream: the generation failed after it began
    "test_error_mid_stream": sse(
        start("3b9d1f7e-5a2c-4e8b-b6d0-9f1a2c3e4d5b"),
        *text("Once", " upon")[:-1],
        {"type": "message-end", "delta": {"finish_reason": "ERROR", "error": "internal server error, please try again",
                                          "usage": {"billed_units": {"input_tokens": 6, "output_tokens": 2},
                                                    "tokens": {"input_tokens": 192, "output_tokens": 2}}}},
    ),
}

# Cohere's HTTP errors are {"id": ..., "message": ...}
RATE_LIMITED = ScriptedResponse.json(
    {"id": "c1e0a9d4-7b3f-4e2a-8d61-5f0b9c2a7e14",
     "message": "You are using a Trial key, which is limited to 10 API calls / minute. You can continue to use the "
                "Trial key for free or upgrade to a Production key with higher rate limits at "
                "'https://dashboard.cohere.com/api-keys'."},
    status=429,
)


def response(test: str) -> ScriptedResponse:
    if test == "test_rate_limited":
        return RATE_LIMITED
    body = BODIES[test]
    # a real connection delivers reads of irregular size: mostly a few events together,
    # sometimes one event split inside its JSON
    return ScriptedResponse.streaming(body, fragment_sizes=[173, 61, 402, 97, 250, 38], delay=0.004)


def main() -> int:
    mode = "rewrite" if "--rewrite" in sys.argv[1:] else "once"
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    for test in [*BODIES, "test_rate_limited"]:
        with ProviderEmulator() as emu:
            emu.add("POST", "/v2/chat", response(test))
            env.update(COHERE_BASE_URL=emu.base_url, COHERE_API_KEY=KEY)
            command = [sys.executable, "-m", "pytest", f"tests/test_cohere.py::{test}", f"--record-mode={mode}",
                       "-q", "-p", "no:cacheprovider"]
            if subprocess.run(command, cwd=HERE, env=env, check=False).returncode:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
