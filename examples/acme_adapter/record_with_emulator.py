"""Record the example's cassettes against an emulated Acme (Acme is fictional).

Against a real provider you would run ``pytest --record-mode=once`` with the key
in the environment. Here each test runs that way against a
``dsh_replay.testing.ProviderEmulator`` on 127.0.0.1 that streams the Acme
events below, one SSE event per network fragment, a few milliseconds apart::

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


def sse(*events: tuple[str, Mapping[str, object]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n" for name, data in events).encode()


START: tuple[str, Mapping[str, object]] = ("start", {"id": "resp_01", "model": "acme-1"})

BODIES = {
    "test_text_answer": sse(
        START,
        ("delta", {"text": "Hello"}),
        ("delta", {"text": "! How can I help"}),
        ("ping", {}),
        ("delta", {"text": " today?"}),
        ("done", {"stop": "end_turn", "usage": {"input": 9, "output": 7}}),
    ),
    "test_tool_call": sse(
        START,
        ("tool", {"call": "call_w1", "name": "get_weather", "args": ""}),
        ("tool", {"call": "call_w1", "args": '{"city": '}),
        ("tool", {"call": "call_w1", "args": '"Paris", "unit": "celsius"}'}),
        ("done", {"stop": "tool_use", "usage": {"input": 42, "output": 18}}),
    ),
    "test_parallel_tool_calls_become_sequential_blocks": sse(
        START,
        ("delta", {"text": "Let me check both cities."}),
        ("tool", {"call": "call_a", "name": "get_weather", "args": '{"city":'}),
        ("tool", {"call": "call_b", "name": "get_weather", "args": '{"city":'}),
        ("tool", {"call": "call_a", "args": ' "Paris"}'}),
        ("tool", {"call": "call_b", "args": ' "Tokyo"}'}),
        ("done", {"stop": "tool_use", "usage": {"input": 50, "output": 31, "cached": 32}}),
    ),
    "test_tool_result_in_history": sse(
        START,
        ("delta", {"text": "It is 18 °C"}),
        ("delta", {"text": " and cloudy in Paris."}),
        ("done", {"stop": "end_turn", "usage": {"input": 61, "output": 12}}),
    ),
    "test_overloaded_mid_stream": sse(
        START,
        ("delta", {"text": "Once upon a time"}),
        ("error", {"error": {"type": "overloaded", "message": "Acme is overloaded; try again later"}}),
    ),
    "test_plugin_yaml_registers_the_route": sse(
        START,
        ("delta", {"text": "Bonjour !"}),
        ("done", {"stop": "end_turn", "usage": {"input": 6, "output": 3}}),
    ),
}


def main() -> int:
    mode = "rewrite" if "--rewrite" in sys.argv[1:] else "once"
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    for test, body in BODIES.items():
        with ProviderEmulator() as emu:
            emu.add("POST", "/v1/respond", ScriptedResponse.streaming(body, delay=0.005))
            env.update(ACME_BASE_URL=emu.base_url, ACME_API_KEY="acme-emulated-key")
            command = [sys.executable, "-m", "pytest", f"tests/test_acme.py::{test}", f"--record-mode={mode}", "-q", "-p", "no:cacheprovider"]
            if subprocess.run(command, cwd=HERE, env=env, check=False).returncode:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
