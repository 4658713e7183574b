"""Scripted Ollama ``/api/chat`` NDJSON streams (route ``ollama``).

Bodies follow https://github.com/ollama/ollama/blob/main/docs/api.md as a local
server sends them: one JSON object per line with ``model``, ``created_at``,
``message`` and ``done``; tool calls whole with ``arguments`` as an object and
no id; the final line ``done: true`` with ``done_reason``, durations in
nanoseconds, ``prompt_eval_count`` and ``eval_count``.
"""

from __future__ import annotations

import json
from typing import Any

from dsh_replay import CallId, GenerateOptions, Message, MessageToolCall, ToolDefinition
from dsh_replay.testing import ScriptedResponse
from tests.cassette_cases import Case
from tests.cassette_cases.anthropic import LIST_FILES, TIME, WEATHER, cut_inside_characters

PATH = "/api/chat"
MODEL = "qwen3:8b"
HEADERS = {"content-type": "application/x-ndjson"}


class Lines:
    """Builds the lines of one response with advancing ``created_at`` times."""

    def __init__(self, start: str = "2025-06-12T09:41:07.") -> None:
        self.start = start
        self.micros = 118204
        self.lines: list[str] = []

    def _line(self, message: dict[str, Any], **fields: Any) -> Lines:
        self.micros += 9137
        payload = {
            "model": MODEL,
            "created_at": f"{self.start}{self.micros:06d}Z",
            "message": {"role": "assistant", **message},
            **fields,
        }
        self.lines.append(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
        return self

    def text(self, *pieces: str) -> Lines:
        for piece in pieces:
            self._line({"content": piece}, done=False)
        return self

    def thinking(self, *pieces: str) -> Lines:
        for piece in pieces:
            self._line({"content": "", "thinking": piece}, done=False)
        return self

    def calls(self, *calls: tuple[str, dict[str, Any]]) -> Lines:
        tool_calls = [{"function": {"name": name, "arguments": args}} for name, args in calls]
        return self._line({"content": "", "tool_calls": tool_calls}, done=False)

    def done(self, reason: str, prompt: int, output: int) -> Lines:
        return self._line(
            {"content": ""},
            done_reason=reason,
            done=True,
            total_duration=1_204_881_541 + 31_000_000 * output,
            load_duration=41_295_167,
            prompt_eval_count=prompt,
            prompt_eval_duration=24_573_166,
            eval_count=output,
            eval_duration=29_882_417 * output,
        )

    def body(self) -> bytes:
        return ("\n".join(self.lines) + "\n").encode()

    def response(self, **kwargs: Any) -> ScriptedResponse:
        return ScriptedResponse.streaming(self.body(), headers=HEADERS, content_type="application/x-ndjson", **kwargs)


def options(prompt: str, *, tools: tuple[ToolDefinition, ...] = (), **kwargs: Any) -> GenerateOptions:
    return GenerateOptions(model=MODEL, messages=[Message(role="user", content=prompt)], tools=tools, **kwargs)


NON_ASCII = (
    Lines().text("Grüße aus ", "Köln! ", "東京は", "晴れ、", "気温は23℃です ☀️", " — ça va?", " 🌧️→🌤️").done("stop", 24, 19).body()
)

HISTORY = GenerateOptions(
    model=MODEL,
    messages=[
        Message(role="system", content="You are a concise travel assistant."),
        Message(role="user", content="Weather in Paris and Tokyo?"),
        Message(
            role="assistant",
            content="",
            tool_calls=(
                MessageToolCall(id=CallId("call_0_get_weather"), name="get_weather", arguments='{"city": "Paris"}'),
                MessageToolCall(id=CallId("call_1_get_weather"), name="get_weather", arguments='{"city": "Tokyo"}'),
            ),
        ),
        Message(role="tool", call_id=CallId("call_0_get_weather"), content="18°C, light rain"),
        Message(role="tool", call_id=CallId("call_1_get_weather"), content="24°C, clear"),
    ],
    tools=[WEATHER],
    temperature=0.2,
    extra={"options": {"num_ctx": 8192}, "keep_alive": "10m"},
)

CASES = [
    Case(
        name="text",
        options=options("Say hello in one short sentence."),
        path=PATH,
        responses=[Lines().text("Hello", "!", " How", " can", " I", " help", " you", " today", "?").done("stop", 17, 10).response()],
    ),
    Case(
        name="tool-call",
        options=options("What's the weather in Paris?", tools=(WEATHER,)),
        path=PATH,
        responses=[Lines().calls(("get_weather", {"city": "Paris"})).done("stop", 169, 15).response()],
    ),
    Case(
        name="parallel-tool-calls",
        options=options("Weather and local time in Paris?", tools=(WEATHER, TIME)),
        path=PATH,
        responses=[Lines().calls(("get_weather", {"city": "Paris"}), ("get_time", {"timezone": "Europe/Paris"}))
                   .done("stop", 231, 38).response()],
    ),
    Case(
        name="tool-call-no-args",
        options=options("What files are here?", tools=(LIST_FILES,)),
        path=PATH,
        responses=[Lines().calls(("list_files", {})).done("stop", 142, 11).response()],
    ),
    Case(
        name="text-then-tool-call",
        options=options("Is it raining in Paris?", tools=(WEATHER,)),
        path=PATH,
        responses=[Lines().text("I'll check", " the weather", " in Paris.").calls(("get_weather", {"city": "Paris"}))
                   .done("stop", 170, 27).response()],
    ),
    Case(
        name="non-ascii-split",
        options=options("Greet me from Cologne and tell me Tokyo's weather."),
        path=PATH,
        responses=[ScriptedResponse.streaming(
            NON_ASCII, fragment_sizes=cut_inside_characters(NON_ASCII),
            headers=HEADERS, content_type="application/x-ndjson",
        )],
    ),
    Case(
        name="length",
        options=options("Write a long poem about the sea.", max_tokens=8),
        path=PATH,
        responses=[Lines().text("The", " sea", ",", " a", " restless", " mirror", " of", " the").done("length", 18, 8).response()],
    ),
    Case(
        name="thinking",
        options=options("What is 17 * 23?", extra={"think": True}),
        path=PATH,
        responses=[Lines().thinking("The user asks for 17 * 23.", " 17 * 20 = 340,", " 17 * 3 = 51,", " so 391.")
                   .text("17 * 23 = ", "**391**.").done("stop", 21, 58).response()],
    ),
    Case(
        name="history-tool-result",
        options=HISTORY,
        path=PATH,
        responses=[Lines().text("Paris: 18°C with light rain.", " Tokyo: 24°C and clear.").done("stop", 236, 17).response()],
    ),
    Case(
        name="error-event",
        options=options("Tell me a story."),
        path=PATH,
        responses=[ScriptedResponse.streaming(
            Lines().text("Once", " upon", " a", " time").body()
            + b'{"error":"an error was encountered while running the model: unexpected EOF"}\n',
            headers=HEADERS, content_type="application/x-ndjson",
        )],
    ),
    Case(
        name="server-busy",
        options=options("Hello?"),
        path=PATH,
        responses=[ScriptedResponse.json(
            {"error": "server busy, please try again.  maximum pending requests exceeded"},
            status=503,
            headers={"retry-after": "20"},
        )],
    ),
]
