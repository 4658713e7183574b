"""Scripted Gemini ``streamGenerateContent?alt=sse`` streams (route ``gemini``).

Bodies follow https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent
as the API sends them: each SSE event a whole ``GenerateContentResponse`` with
``candidates``, ``usageMetadata`` (on every chunk, counts growing),
``modelVersion`` and ``responseId``; events separated by CRLF CRLF; function
calls whole, with no id; ``finishReason: STOP`` even for tool calls.
"""

from __future__ import annotations

import json
from typing import Any

from dsh_replay import CallId, GenerateOptions, Message, MessageToolCall, ToolDefinition
from dsh_replay.testing import ScriptedResponse
from tests.cassette_cases import Case
from tests.cassette_cases.anthropic import LIST_FILES, TIME, WEATHER, cut_inside_characters

MODEL = "gemini-2.5-flash"
PATH = f"/v1beta/models/{MODEL}:streamGenerateContent"
HEADERS = {
    "content-type": "text/event-stream",
    "vary": "Origin, X-Origin, Referer",
    "server-timing": "gfet4t7; dur=412",
    "x-content-type-options": "nosniff",
    "x-xss-protection": "0",
    "alt-svc": 'h3=":443"; ma=2592000,h3-29=":443"; ma=2592000',
}


def chunk(response_id: str, parts: list[dict[str, Any]], usage: dict[str, int], *, finish: str | None = None) -> str:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish:
        candidate["finishReason"] = finish
    candidate["index"] = 0
    metadata: dict[str, Any] = {**usage, "totalTokenCount": sum(usage.values())}
    if "promptTokenCount" in usage:
        metadata["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage["promptTokenCount"]}]
    payload = {"candidates": [candidate], "usageMetadata": metadata, "modelVersion": MODEL, "responseId": response_id}
    return "data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + "\r\n\r\n"


def usage(prompt: int, candidates: int | None = None, thoughts: int | None = None) -> dict[str, int]:
    out = {"promptTokenCount": prompt}
    if candidates is not None:
        out["candidatesTokenCount"] = candidates
    if thoughts is not None:
        out["thoughtsTokenCount"] = thoughts
    return out


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"functionCall": {"name": name, "args": args}}


def stream(request_id: str, body: str, **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse.streaming(body.encode(), headers={**HEADERS, "x-goog-request-id": request_id}, **kwargs)


def options(prompt: str, *, tools: tuple[ToolDefinition, ...] = (), **kwargs: Any) -> GenerateOptions:
    return GenerateOptions(model=MODEL, messages=[Message(role="user", content=prompt)], tools=tools, **kwargs)


R = "w1peaMz6INOvnvgPgYfPiQY"
NON_ASCII = (
    chunk(R, [{"text": "Grüße aus Köln! 東京は"}], usage(14, 9))
    + chunk(R, [{"text": "晴れ、気温は23℃です ☀️ — ça va?"}], usage(14, 22))
    + chunk(R, [{"text": " 🌧️→🌤️"}], usage(14, 27), finish="STOP")
).encode()

THOUGHTS = (
    chunk("beHBaJfEMIi-qtsP3769-Q8", [{"text": "**Multiplying step by step**\n\nThe user asks for 17 * 23.", "thought": True}], usage(19, None, 64))
    + chunk("beHBaJfEMIi-qtsP3769-Q8", [{"text": " 17 * 20 = 340, 17 * 3 = 51, so 391.", "thought": True}], usage(19, None, 118))
    + chunk("beHBaJfEMIi-qtsP3769-Q8", [{"text": "17 * 23 = **391**.", "thoughtSignature": "CiIB0e2Kb6ZKlHq0m9Q2xT3vWc8Yr1nBf4JsD7uEa5gLpR0="}], usage(19, 9, 118))
    + chunk("beHBaJfEMIi-qtsP3769-Q8", [{"text": ""}], usage(19, 9, 118), finish="STOP")
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
        Message(role="tool", call_id=CallId("call_0_get_weather"), content='{"temperature_c": 18, "sky": "light rain"}'),
        Message(role="tool", call_id=CallId("call_1_get_weather"), content="24°C, clear"),
    ],
    tools=[WEATHER],
    temperature=0.2,
    max_tokens=256,
)

CASES = [
    Case(
        name="text",
        options=options("Say hello in one short sentence."),
        path=PATH,
        responses=[stream("8c1c2f0b5b2a4e3f", chunk("1lpeaMTxIpW1nvgP-O3vwQY", [{"text": "Hello"}], usage(9, 1))
                          + chunk("1lpeaMTxIpW1nvgP-O3vwQY", [{"text": "! How can I help you today?"}], usage(9, 9))
                          + chunk("1lpeaMTxIpW1nvgP-O3vwQY", [{"text": "\n"}], usage(8, 10), finish="STOP"))],
    ),
    Case(
        name="tool-call",
        options=options("What's the weather in Paris?", tools=(WEATHER,)),
        path=PATH,
        responses=[stream("3f9e1d7c2a6b4d80", chunk("2mqeaNUyJqW2owgQ-P4wxRZ", [call("get_weather", {"city": "Paris"})], usage(52, 5), finish="STOP"))],
    ),
    Case(
        name="parallel-tool-calls",
        options=options("Weather and local time in Paris?", tools=(WEATHER, TIME)),
        path=PATH,
        responses=[stream("6b2d8e4f1c3a5d97", chunk(
            "3nrfbOVzKrX3pxhR-Q5xySa",
            [call("get_weather", {"city": "Paris"}), call("get_time", {"timezone": "Europe/Paris"})],
            usage(88, 16), finish="STOP",
        ))],
    ),
    Case(
        name="tool-call-no-args",
        options=options("What files are here?", tools=(LIST_FILES,)),
        path=PATH,
        responses=[stream("9a7c5e3b1d2f4a68", chunk("4osgcPWaLsY4qyiS-R6yzTb", [call("list_files", {})], usage(41, 3), finish="STOP"))],
    ),
    Case(
        name="text-then-tool-call",
        options=options("Is it raining in Paris?", tools=(WEATHER,)),
        path=PATH,
        responses=[stream("1e3c5a7b9d2f4e60", chunk("5pthdQXbMtZ5rzjT-S7zAUc", [{"text": "I'll check the current weather"}], usage(55, 6))
                          + chunk("5pthdQXbMtZ5rzjT-S7zAUc", [{"text": " in Paris."}, call("get_weather", {"city": "Paris"})], usage(55, 14), finish="STOP"))],
    ),
    Case(
        name="non-ascii-split",
        options=options("Greet me from Cologne and tell me Tokyo's weather."),
        path=PATH,
        responses=[ScriptedResponse.streaming(
            NON_ASCII, fragment_sizes=cut_inside_characters(NON_ASCII),
            headers={**HEADERS, "x-goog-request-id": "7d5b3f1e9c2a4b86"},
        )],
    ),
    Case(
        name="max-tokens",
        options=options("Write a long poem about the sea.", max_tokens=12),
        path=PATH,
        responses=[stream("2c4e6a8b0d1f3e57", chunk("6quieRYcNuA6s0kU-T8ABVd", [{"text": "The sea, a restless mirror"}], usage(8, 6))
                          + chunk("6quieRYcNuA6s0kU-T8ABVd", [{"text": " of the sky,\nIt"}], usage(8, 12), finish="MAX_TOKENS"))],
    ),
    Case(
        name="thought-parts",
        options=options(
            "What is 17 * 23?",
            extra={"generationConfig": {"thinkingConfig": {"includeThoughts": True, "thinkingBudget": 1024}}},
        ),
        path=PATH,
        responses=[stream("4a6c8e0b2d3f5a79", THOUGHTS)],
    ),
    Case(
        name="history-tool-result",
        options=HISTORY,
        path=PATH,
        responses=[stream("5b7d9f1c3e4a6b80", chunk("7rvjfSZdOvB7t1lV-U9BCWe", [{"text": "Paris: 18°C with light rain."}], usage(131, 8))
                          + chunk("7rvjfSZdOvB7t1lV-U9BCWe", [{"text": " Tokyo: 24°C and clear."}], usage(131, 17), finish="STOP"))],
    ),
    Case(
        name="error-event",
        options=options("Tell me a story."),
        path=PATH,
        responses=[stream("8e0a2c4d6f7b9c13", chunk("8swkgTAePwC8u2mW-V0CDXf", [{"text": "Once upon a time"}], usage(6, 4))
                          + "data: " + json.dumps({"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}) + "\r\n\r\n")],
    ),
    Case(
        name="rate-limited",
        options=options("Hello?"),
        path=PATH,
        responses=[ScriptedResponse.json(
            {
                "error": {
                    "code": 429,
                    "message": "You exceeded your current quota, please check your plan and billing details. "
                    "For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"},
                    ],
                }
            },
            status=429,
            headers={"retry-after": "20", "x-goog-request-id": "9f1b3d5e7a8c0d24", "vary": "Origin, X-Origin, Referer"},
        )],
    ),
]
