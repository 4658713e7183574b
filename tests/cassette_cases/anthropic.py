"""Scripted Anthropic Messages streams (route ``anthropic``).

Bodies follow https://docs.anthropic.com/en/docs/build-with-claude/streaming as
the API sends them: an ``event:`` line and a ``data:`` line per event, compact
JSON (sometimes padded with spaces, as the real API does), ``msg_…`` and
``toolu_…`` ids, ``ping`` after the first block start, cumulative usage in
``message_delta`` (which newer API versions also give ``input_tokens``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from dsh_replay import CallId, GenerateOptions, Message, MessageToolCall, ToolDefinition
from dsh_replay.testing import ScriptedResponse
from tests.cassette_cases import Case

PATH = "/v1/messages"
MODEL = "claude-sonnet-4-5-20250929"
HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "anthropic-organization-id": "5d3c0a1e-8b2f-4c6d-9e7a-1f2b3c4d5e6f",
    "via": "1.1 google",
}

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolDefinition(
    name="get_time",
    description="Current local time in an IANA time zone.",
    parameters={"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
)
LIST_FILES = ToolDefinition(name="list_files", description="List the files in the working directory.")


def cut_inside_characters(body: bytes) -> list[int]:
    """Fragment sizes that end every fragment right after a multi-byte character's lead byte."""
    cuts = [i for i in range(1, len(body)) if body[i] & 0xC0 == 0x80 and body[i - 1] & 0xC0 == 0xC0]
    return [stop - start for start, stop in itertools.pairwise([0, *cuts, len(body)])]


def event(payload: dict[str, Any], *, pad: int = 0) -> str:
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    # the real API pads some payloads with spaces before the closing brace
    return f"event: {payload['type']}\ndata: {data[:-1]}{' ' * pad}}}\n\n"


def message_start(msg_id: str, input_tokens: int, *, cached: int = 0) -> str:
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": 1,
        "service_tier": "standard",
    }
    message: dict[str, Any] = {
        "id": msg_id, "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage,
    }
    return event({"type": "message_start", "message": message})


def text_block(index: int, *pieces: str) -> str:
    out = event({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
    if index == 0:
        out += event({"type": "ping"})
    for piece in pieces:
        delta = {"type": "text_delta", "text": piece}
        out += event({"type": "content_block_delta", "index": index, "delta": delta}, pad=len(piece) % 7)
    return out + event({"type": "content_block_stop", "index": index})


def tool_block(index: int, call_id: str, name: str, *fragments: str) -> str:
    start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    out = event({"type": "content_block_start", "index": index, "content_block": start})
    for fragment in ("", *fragments):  # the API always opens with an empty fragment
        delta = {"type": "input_json_delta", "partial_json": fragment}
        out += event({"type": "content_block_delta", "index": index, "delta": delta})
    return out + event({"type": "content_block_stop", "index": index})


def message_end(stop_reason: str, input_tokens: int, output_tokens: int, *, cached: int = 0) -> str:
    usage = {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": output_tokens,
    }
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    return event({"type": "message_delta", "delta": delta, "usage": usage}) + event({"type": "message_stop"})


def stream(request_id: str, body: str, **kwargs: Any) -> ScriptedResponse:
    return ScriptedResponse.streaming(body.encode(), headers={**HEADERS, "request-id": request_id}, **kwargs)


def options(prompt: str, *, tools: tuple[ToolDefinition, ...] = (), **kwargs: Any) -> GenerateOptions:
    return GenerateOptions(model=MODEL, messages=[Message(role="user", content=prompt)], tools=tools, **kwargs)


NON_ASCII = (
    message_start("msg_01NnAsc11Spl1tUtf8Fr4gm", 18)
    + text_block(0, "Grüße aus Köln! ", "東京は晴れ、", "気温は23℃です ☀️", " — ça va? 🌧️→🌤️")
    + message_end("end_turn", 18, 31)
).encode()

THINKING = (
    message_start("msg_01Th1nk1ngW1thS1gnatur3", 47)
    + event({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
    + event({"type": "ping"})
    + "".join(
        event({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": piece}}, pad=3)
        for piece in ("The user asks for 17 * 23.", " 17 * 20 = 340 and 17 * 3 = 51,", " so 340 + 51 = 391.")
    )
    + event({
        "type": "content_block_delta", "index": 0,
        "delta": {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkDs3Vw0ZR4bM1K8tq2nXyqT0f9dLh6uJcQpW7aPZ0sFvG2hN5YxoRkE3tUmC1iJ8gV4bD7nLwA9eKcY2fHsEgwQhK3dP1mN8rT5vZ0aDGxJ4cU7wE2qS9bA1fR6"},
    })
    + event({"type": "content_block_stop", "index": 0})
    + text_block(1, "17 * 23 = ", "**391**.")
    + message_end("end_turn", 47, 86)
)

HISTORY = GenerateOptions(
    model=MODEL,
    messages=[
        Message(role="system", content="You are a concise travel assistant."),
        Message(role="user", content="Weather in Paris and Tokyo?"),
        Message(
            role="assistant",
            content="Let me check both cities.",
            tool_calls=(
                MessageToolCall(id=CallId("toolu_01PaR1sW3ath3rCa11xx"), name="get_weather", arguments='{"city": "Paris"}'),
                MessageToolCall(id=CallId("toolu_01T0kyoW3ath3rCa11yy"), name="get_weather", arguments='{"city":"Tokyo"}'),
            ),
        ),
        Message(role="tool", call_id=CallId("toolu_01PaR1sW3ath3rCa11xx"), content="18°C, light rain"),
        Message(role="tool", call_id=CallId("toolu_01T0kyoW3ath3rCa11yy"), content="24°C, clear"),
    ],
    tools=[WEATHER],
    temperature=0.2,
)

CASES = [
    Case(
        name="text",
        options=options("Say hello in one short sentence."),
        path=PATH,
        responses=[stream("req_011CUr5h2Ksh6QxT8VxYh3nA", message_start("msg_01XFDUDYJgAACzvnptvVoYEL", 14)
                          + text_block(0, "Hello", "! How can I", " help you today?")
                          + message_end("end_turn", 14, 12))],
    ),
    Case(
        name="tool-call",
        options=options("What's the weather in Paris?", tools=(WEATHER,)),
        path=PATH,
        responses=[stream("req_011CUr5jT4Jf1b8pZ2c9Lm7Q", message_start("msg_01Aq9w5aVVmG7L1kBCQ5Cvrx", 402)
                          + tool_block(0, "toolu_01T1x1p3Bj7kXhGQ9rM2eV5u", "get_weather", '{"city"', ': "Par', 'is"}')
                          + message_end("tool_use", 402, 38))],
    ),
    Case(
        name="parallel-tool-calls",
        options=options("Weather and local time in Paris?", tools=(WEATHER, TIME)),
        path=PATH,
        responses=[stream("req_011CUr5kZ8sD4gHn1Yp6Wq2R", message_start("msg_01P4ra11e1Ca11s9xQw2Zk8M", 488)
                          + tool_block(0, "toolu_01Ab3CdE5fGh7iJk9LmN1oPq", "get_weather", '{"ci', 'ty": "Paris"}')
                          + tool_block(1, "toolu_01Rs3TuV5wXy7zAb9CdE1fGh", "get_time", '{"timezone": ', '"Europe/Paris"}')
                          + message_end("tool_use", 488, 91))],
    ),
    Case(
        name="tool-call-no-args",
        options=options("What files are here?", tools=(LIST_FILES,)),
        path=PATH,
        responses=[stream("req_011CUr5mN3bV7cX1zL5kJ9hG", message_start("msg_01N0ArgsT0o1Ca11Zz3Yx4Wv", 371)
                          + tool_block(0, "toolu_01Lf2Ns4Ty6Ux8Wz0Ab2Cd4E", "list_files")
                          + message_end("tool_use", 371, 29))],
    ),
    Case(
        name="text-then-tool-call",
        options=options("Is it raining in Paris?", tools=(WEATHER,)),
        path=PATH,
        responses=[stream("req_011CUr5nQ6wE8rT0yU2iO4pA", message_start("msg_01TxtTh3nT0o1Qw3Er5Ty7Ui", 405)
                          + text_block(0, "I'll check the current", " weather in Paris.")
                          + tool_block(1, "toolu_01Qz8Xw6Ev4Ct2Br0An8Sm6L", "get_weather", '{"city": "Paris"}')
                          + message_end("tool_use", 405, 64))],
    ),
    Case(
        name="non-ascii-split",
        options=options("Greet me from Cologne and tell me Tokyo's weather."),
        path=PATH,
        responses=[ScriptedResponse.streaming(
            NON_ASCII, fragment_sizes=cut_inside_characters(NON_ASCII),
            headers={**HEADERS, "request-id": "req_011CUr5pU7tY9uI1oP3aS5dF"},
        )],
    ),
    Case(
        name="max-tokens",
        options=options("Write a long poem about the sea.", max_tokens=12),
        path=PATH,
        responses=[stream("req_011CUr5qW2eR4tY6uI8oP0aS", message_start("msg_01MaxT0k3nsCutQw2Er4Ty6U", 16)
                          + text_block(0, "The sea, a restless", " mirror of the sky,\nIt")
                          + message_end("max_tokens", 16, 12))],
    ),
    Case(
        name="thinking",
        options=options(
            "What is 17 * 23?", max_tokens=2048,
            extra={"thinking": {"type": "enabled", "budget_tokens": 1024}},
        ),
        path=PATH,
        responses=[stream("req_011CUr5rE5rT7yU9iO1pA3sD", THINKING)],
    ),
    Case(
        name="thinking-dropped",
        options=options(
            "What is 17 * 23?", max_tokens=2048,
            extra={"thinking": {"type": "enabled", "budget_tokens": 1024}},
        ),
        path=PATH,
        responses=[stream("req_011CUr5sR8tY0uI2oP4aS6dF", THINKING)],
        adapter_kwargs={"drop_reasoning": True},
    ),
    Case(
        name="server-tool-skipped",
        options=options("Who won the 2024 Tour de France?", extra={"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}]}),
        path=PATH,
        responses=[stream("req_011CUr5tT1yU3iO5pA7sD9fG", message_start("msg_01S3rv3rT0o1Sk1pQw2Er4Ty", 2214)
                          + event({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_01Ws4Ed6Rf8Tg0Yh2Uj4Ik6O", "name": "web_search", "input": {}}})
                          + event({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}})
                          + event({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"query": "Tour de France 2024 winner"}'}})
                          + event({"type": "content_block_stop", "index": 0})
                          + event({"type": "content_block_start", "index": 1, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01Ws4Ed6Rf8Tg0Yh2Uj4Ik6O", "content": [{"type": "web_search_result", "title": "2024 Tour de France", "url": "https://en.wikipedia.org/wiki/2024_Tour_de_France", "encrypted_content": "EqwBCioIAxgCIiQ0ZDFiNzI", "page_age": None}]}})
                          + event({"type": "content_block_stop", "index": 1})
                          + text_block(2, "Tadej Pogačar won", " the 2024 Tour de France.")
                          + message_end("end_turn", 2214, 57))],
    ),
    Case(
        name="history-tool-result",
        options=HISTORY,
        path=PATH,
        responses=[stream("req_011CUr5uY4uI6oP8aS0dF2gH", message_start("msg_01H1st0ryR3su1tQw2Er4Ty", 612, cached=512)
                          + text_block(0, "Paris: 18°C with light rain.", " Tokyo: 24°C and clear.")
                          + message_end("end_turn", 612, 24, cached=512))],
    ),
    Case(
        name="error-event",
        options=options("Tell me a story."),
        path=PATH,
        responses=[stream("req_011CUr5vU7iO9pA1sD3fG5hJ", message_start("msg_01Ov3r1oad3dM1dStr3amQw", 11)
                          + event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
                          + event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Once upon a time"}})
                          + event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))],
    ),
    Case(
        name="rate-limited",
        options=options("Hello?"),
        path=PATH,
        responses=[ScriptedResponse.json(
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "This request would exceed the rate limit for your organization of 50 requests per minute. "
                    "For details, refer to: https://docs.claude.com/en/api/rate-limits.",
                },
                "request_id": "req_011CUr5wI0oP2aS4dF6gH8jK",
            },
            status=429,
            headers={
                "retry-after": "20",
                "request-id": "req_011CUr5wI0oP2aS4dF6gH8jK",
                "x-should-retry": "true",
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": "2025-11-18T10:15:20Z",
            },
        )],
    ),
]
