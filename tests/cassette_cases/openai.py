"""Route ``openai``: OpenAI Chat Completions conversations, as api.openai.com streams them.

Bodies follow the recordings in ``shared/real-traffic/openai-chat__*``: every
chunk repeats ``id``/``created``/``model``/``service_tier``/``system_fingerprint``,
carries ``"usage": null`` (``stream_options.include_usage``) and an
``obfuscation`` pad; the first delta has ``role``, ``content: ""`` and
``refusal: null``; tool calls send ``id``/``type``/``name`` only on their
first fragment; the usage comes in a trailing ``choices: []`` chunk and the
stream ends with ``data: [DONE]``. The builders here are shared with the
``openai-compatible`` and ``deepseek`` cases.
"""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsh_replay import GenerateOptions, Message, ToolDefinition
from dsh_replay.protocol.chunks import CallId
from dsh_replay.protocol.options import MessageToolCall
from dsh_replay.testing import ScriptedResponse

from . import Case

PATH = "/v1/chat/completions"

WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
CLOCK = ToolDefinition(name="get_current_time", description="Get the current UTC time.")
SYSTEM = Message(role="system", content="You are a concise assistant. Answer in one or two sentences.")


# -- SSE bodies ------------------------------------------------------------------------------


def data(payload: Mapping[str, Any] | str) -> bytes:
    """One SSE event, serialized compactly as the providers do."""
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def pad(seed: str) -> str:
    """A deterministic stand-in for OpenAI's random ``obfuscation`` padding."""
    digest = hashlib.sha256(seed.encode()).digest()
    alphabet = string.ascii_letters + string.digits
    return "".join(alphabet[b % len(alphabet)] for b in digest[: 2 + digest[0] % 12])


class ChatStream:
    """Builds a Chat Completions SSE body chunk by chunk."""

    def __init__(
        self,
        *,
        id: str,
        created: int,
        model: str,
        fingerprint: str | None = None,
        service_tier: str | None = "default",
        obfuscate: bool = True,
        usage_null: bool = True,
        refusal: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.head: dict[str, Any] = {"id": id, "object": "chat.completion.chunk", "created": created, "model": model}
        if service_tier is not None:
            self.head["service_tier"] = service_tier
        if fingerprint is not None:
            self.head["system_fingerprint"] = fingerprint
        self.head.update(extra or {})
        self.obfuscate = obfuscate
        self.usage_null = usage_null
        self.refusal = refusal  # OpenAI's first delta carries "refusal": null
        self.events: list[bytes] = []

    def chunk(self, delta: Mapping[str, Any], finish: str | None = None, **top: Any) -> ChatStream:
        choice: dict[str, Any] = {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}
        return self.raw({"choices": [choice], **top})

    def raw(self, fields: Mapping[str, Any]) -> ChatStream:
        payload = {**self.head, **fields}
        if self.usage_null:
            payload.setdefault("usage", None)
        if self.obfuscate:
            payload["obfuscation"] = pad(f"{self.head['id']}:{len(self.events)}")
        self.events.append(data(payload))
        return self

    def start(self, **delta: Any) -> ChatStream:
        first: dict[str, Any] = {"role": "assistant", "content": ""}
        if self.refusal:
            first["refusal"] = None
        return self.chunk({**first, **delta})

    def text(self, *pieces: str) -> ChatStream:
        for piece in pieces:
            self.chunk({"content": piece})
        return self

    def tool(self, index: int, call_id: str, name: str, *arguments: str) -> ChatStream:
        first = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        self.chunk({"tool_calls": [first]})
        for piece in arguments:
            self.chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        return self

    def usage(self, prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0) -> ChatStream:
        return self.raw({"choices": [], "usage": openai_usage(prompt, completion, cached=cached, reasoning=reasoning)})

    def done(self) -> list[bytes]:
        return [*self.events, data("[DONE]")]


def openai_usage(prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


# -- network fragments -----------------------------------------------------------------------


def streamed(
    events: Sequence[bytes],
    headers: Mapping[str, str],
    *,
    merge: Iterable[int] = (),
    split: Mapping[int, int] | None = None,
    delay: float = 0.004,
) -> ScriptedResponse:
    """One fragment per event, as servers flush them, with a few realistic exceptions.

    ``merge``: events that travel in one fragment with the next one (two flushes
    coalesced); ``split``: event index → byte offset where the network cut it.
    """
    joined = set(merge)
    fragments: list[bytes] = []
    pending = b""
    for position, event in enumerate(events):
        cut = (split or {}).get(position)
        pieces = [event[:cut], event[cut:]] if cut else [event]
        for piece in pieces[:-1]:
            fragments.append(pending + piece)
            pending = b""
        pending += pieces[-1]
        if position not in joined:
            fragments.append(pending)
            pending = b""
    if pending:
        fragments.append(pending)
    return ScriptedResponse(headers=dict(headers), fragments=fragments, delay=delay)


def inside_chars(events: Sequence[bytes]) -> dict[int, int]:
    """For every event with non-ASCII text, an offset that cuts its first multi-byte character."""
    cuts: dict[int, int] = {}
    for position, event in enumerate(events):
        offset = next((i for i, byte in enumerate(event) if byte & 0xC0 == 0x80), None)
        if offset is not None:
            cuts[position] = offset
    return cuts


def error_response(
    status: int, payload: Mapping[str, Any], headers: Mapping[str, str], *, indent: int | None = 4
) -> ScriptedResponse:
    # OpenAI pretty-prints its error bodies; most others send them compact
    body = json.dumps(payload, indent=indent).encode() + b"\n"
    return ScriptedResponse(
        status=status,
        headers={"content-type": "application/json; charset=utf-8", **headers},
        fragments=[body],
        chunked=False,
    )


def openai_headers(request_id: str, processing_ms: int) -> dict[str, str]:
    return {
        "content-type": "text/event-stream; charset=utf-8",
        "access-control-expose-headers": "X-Request-ID",
        "openai-organization": "dsh-replay-fixtures",
        "openai-processing-ms": str(processing_ms),
        "openai-project": "proj_dshReplayFixtures01",
        "openai-version": "2020-10-01",
        "x-envoy-upstream-service-time": str(processing_ms + 7),
        "x-ratelimit-limit-requests": "5000",
        "x-ratelimit-limit-tokens": "2000000",
        "x-ratelimit-remaining-requests": "4999",
        "x-ratelimit-remaining-tokens": "1999962",
        "x-ratelimit-reset-requests": "12ms",
        "x-ratelimit-reset-tokens": "1ms",
        "x-request-id": request_id,
        "strict-transport-security": "max-age=31536000; includeSubDomains; preload",
        "cf-cache-status": "DYNAMIC",
        "x-content-type-options": "nosniff",
        "alt-svc": 'h3=":443"; ma=86400',
    }


# -- conversations (shared with the other chat routes) ---------------------------------------


def ask(model: str, question: str, **kwargs: Any) -> GenerateOptions:
    return GenerateOptions(model=model, messages=[SYSTEM, Message(role="user", content=question)], **kwargs)


def weather_followup(model: str, call_id: str) -> GenerateOptions:
    """A second turn: the assistant called get_weather and the tool answered."""
    return GenerateOptions(
        model=model,
        messages=[
            SYSTEM,
            Message(role="user", content="What's the weather in Paris?"),
            Message(
                role="assistant",
                tool_calls=[MessageToolCall(id=CallId(call_id), name="get_weather", arguments='{"city":"Paris"}')],
            ),
            Message(role="tool", call_id=CallId(call_id), content='{"temperature_c": 18, "sky": "overcast"}'),
        ],
        tools=[WEATHER],
        temperature=0.2,
    )


# -- the openai cases ---------------------------------------------------------------------------

MODEL = "gpt-4.1-mini"
SERVED = "gpt-4.1-mini-2025-04-14"
FP = "fp_6f2eabb9a5"


def _stream(n: int) -> ChatStream:
    return ChatStream(id=f"chatcmpl-DshRpl{n:02d}Qx7vTz3mKfA9bWcE1yHn", created=1767225600 + 37 * n, model=SERVED, fingerprint=FP)


def _text() -> Case:
    s = _stream(1).start().text("Hello", "!", " How", " can", " I", " help", " you", " today", "?")
    s.chunk({}, "stop").usage(24, 9)
    return Case(
        "text",
        ask(MODEL, "Say hello."),
        PATH,
        [streamed(s.done(), openai_headers("req_0a1b2c3d4e5f60718293a4b5c6d7e8f9", 212), merge=[9], split={4: 41})],
    )


def _tool_call() -> Case:
    s = _stream(2).chunk({"role": "assistant", "content": None, "refusal": None, "tool_calls": [
        {"index": 0, "id": "call_Q2xWm1bT7rLk9sVdE4nFh0aJ", "type": "function",
         "function": {"name": "get_weather", "arguments": ""}}]})
    for piece in ['{"', "city", '":"', "Paris", '","', "unit", '":"', "c", "elsius", '"}']:
        s.chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    s.chunk({}, "tool_calls").usage(81, 19)
    return Case(
        "tool-call",
        ask(MODEL, "What's the weather in Paris, in celsius?", tools=[WEATHER]),
        PATH,
        [streamed(s.done(), openai_headers("req_1b2c3d4e5f60718293a4b5c6d7e8f90a", 388), merge=[6])],
    )


def _parallel() -> Case:
    s = _stream(3).start()
    s.chunk({"tool_calls": [{"index": 0, "id": "call_Pa7rIsW3ath3rC4ll0000001", "type": "function",
                             "function": {"name": "get_weather", "arguments": ""}}]})
    for piece in ['{"ci', 'ty": "P', 'aris"}']:
        s.chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    s.tool(1, "call_T0ky0W3ath3rC4ll00000002", "get_weather", '{"ci', 'ty": "T', 'okyo"}')
    s.chunk({}, "tool_calls").usage(90, 52)
    return Case(
        "parallel-tool-calls",
        ask(MODEL, "Compare the weather in Paris and Tokyo.", tools=[WEATHER]),
        PATH,
        [streamed(s.done(), openai_headers("req_2c3d4e5f60718293a4b5c6d7e8f90a1b", 455), split={5: 96})],
    )


def _no_args() -> Case:
    s = _stream(4).start().tool(0, "call_Cl0ckN0Ar9s000000000003", "get_current_time", "{}")
    s.chunk({}, "tool_calls").usage(67, 11)
    return Case(
        "tool-call-no-args",
        ask(MODEL, "What time is it in UTC?", tools=[CLOCK]),
        PATH,
        [streamed(s.done(), openai_headers("req_3d4e5f60718293a4b5c6d7e8f90a1b2c", 301))],
    )


def _text_then_tool() -> Case:
    s = _stream(5).start().text("Let", " me", " check", " the", " weather", " in", " Paris", " for", " you", ".")
    s.tool(0, "call_T3xtTh3nT00l00000000005", "get_weather", '{"city"', ':"Paris"}')
    s.chunk({}, "tool_calls").usage(83, 27)
    return Case(
        "text-then-tool-call",
        ask(MODEL, "Is it raining in Paris?", tools=[WEATHER]),
        PATH,
        [streamed(s.done(), openai_headers("req_4e5f60718293a4b5c6d7e8f90a1b2c3d", 264), merge=[3, 11])],
    )


def _non_ascii() -> Case:
    s = _stream(6).start().text("Bonjour", " ! À", " Tōkyō", " il", " fait", " 18 °C", " — ", "東京", "は晴れ", " ☀️")
    s.chunk({}, "stop").usage(30, 21)
    events = s.done()
    return Case(
        "non-ascii-split",
        ask(MODEL, "Greet me in French, then say the Tokyo weather in Japanese."),
        PATH,
        [streamed(events, openai_headers("req_5f60718293a4b5c6d7e8f90a1b2c3d4e", 198), split=inside_chars(events))],
    )


def _length() -> Case:
    s = _stream(7).start().text("The", " Eiffel", " Tower", " was", " completed", " in", " 1889", " for", " the", " World", "'s", " Fair")
    s.chunk({}, "length").usage(26, 12)
    return Case(
        "length-stop",
        ask(MODEL, "Tell me the history of the Eiffel Tower.", max_tokens=12),
        PATH,
        [streamed(s.done(), openai_headers("req_60718293a4b5c6d7e8f90a1b2c3d4e5f", 233))],
    )


def _refusal() -> Case:
    s = _stream(8).chunk({"role": "assistant", "content": None, "refusal": ""})
    for piece in ["I'm", " sorry", ",", " but", " I", " can't", " help", " with", " that", "."]:
        s.chunk({"refusal": piece})
    s.chunk({}, "stop").usage(31, 10)
    return Case(
        "refusal",
        ask(MODEL, "Explain how to pick the lock on my neighbour's door."),
        PATH,
        [streamed(s.done(), openai_headers("req_718293a4b5c6d7e8f90a1b2c3d4e5f60", 175))],
    )


def _followup() -> Case:
    s = _stream(9).start().text("It", "'s", " 18", " °C", " and", " overcast", " in", " Paris", ".")
    s.chunk({}, "stop").usage(112, 10, cached=0)
    return Case(
        "tool-result-followup",
        weather_followup(MODEL, "call_Q2xWm1bT7rLk9sVdE4nFh0aJ"),
        PATH,
        [streamed(s.done(), openai_headers("req_8293a4b5c6d7e8f90a1b2c3d4e5f6071", 243))],
    )


def _error_mid_stream() -> Case:
    s = _stream(10).start().text("Quantum", " computers", " use")
    # what api.openai.com sends when the generation fails after it started; then it closes
    s.events.append(data({"error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error", "param": None, "code": None}}))
    return Case(
        "error-mid-stream",
        ask(MODEL, "Explain quantum computing."),
        PATH,
        [streamed(s.events, openai_headers("req_93a4b5c6d7e8f90a1b2c3d4e5f607182", 140))],
    )


RATE_LIMIT_BODY = {
    "error": {
        "message": "Rate limit reached for gpt-4.1-mini in organization org-dshReplayFixtures on requests "
        "per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 20s. Visit "
        "https://platform.openai.com/account/rate-limits to learn more.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}


def rate_limit_headers(request_id: str, retry_after: str) -> dict[str, str]:
    return {
        "retry-after": retry_after,
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": f"{retry_after}s",
        "x-request-id": request_id,
        "openai-organization": "dsh-replay-fixtures",
        "openai-version": "2020-10-01",
    }


def _rate_limited() -> Case:
    # Retry-After beyond RetryPolicy.max_delay (8 s): the adapter gives up at once
    return Case(
        "rate-limited",
        ask(MODEL, "Say hello."),
        PATH,
        [error_response(429, RATE_LIMIT_BODY, rate_limit_headers("req_a4b5c6d7e8f90a1b2c3d4e5f60718293", "20"))],
    )


def _rate_limited_then_ok() -> Case:
    s = _stream(11).start().text("Hi", " there", "!").chunk({}, "stop").usage(24, 3)
    brief = {**rate_limit_headers("req_b5c6d7e8f90a1b2c3d4e5f60718293a4", "1"), "retry-after-ms": "40"}
    return Case(
        "rate-limited-then-recovers",
        ask(MODEL, "Say hi."),
        PATH,
        [error_response(429, RATE_LIMIT_BODY, brief),
         streamed(s.done(), openai_headers("req_c6d7e8f90a1b2c3d4e5f60718293a4b5", 156))],
    )


CASES = [
    _text(),
    _tool_call(),
    _parallel(),
    _no_args(),
    _text_then_tool(),
    _non_ascii(),
    _length(),
    _refusal(),
    _followup(),
    _error_mid_stream(),
    _rate_limited(),
    _rate_limited_then_ok(),
]
