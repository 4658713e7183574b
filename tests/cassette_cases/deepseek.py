"""Route ``deepseek``: api.deepseek.com chat streams.

Written after ``shared/real-traffic/deepseek__*``: uuid ids, a
``system_fingerprint`` ending in ``_prod…_fp8_kvcache``, ``"usage": null`` on
every chunk until the ``finish_reason`` chunk, which carries the usage with the
context-cache counts (``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens``);
deepseek-reasoner streams ``reasoning_content`` while ``content`` is ``null``,
then the answer with ``reasoning_content: null``. Under load the server sends
``: keep-alive`` SSE comments before the first chunk
(https://api-docs.deepseek.com/quick_start/rate_limit).
"""

# ruff: noqa: RUF001 - look-alike non-ASCII characters (multiplication sign, fullwidth
# punctuation, curly quotes) are the point of this test data

from __future__ import annotations

from typing import Any

from . import Case
from .openai import (
    CLOCK,
    WEATHER,
    ChatStream,
    ask,
    data,
    error_response,
    inside_chars,
    streamed,
    weather_followup,
)

PATH = "/chat/completions"
CHAT = "deepseek-chat"
REASONER = "deepseek-reasoner"
KEEP_ALIVE = b": keep-alive\n\n"


def headers(trace: str) -> dict[str, str]:
    return {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "vary": "origin, access-control-request-method, access-control-request-headers",
        "access-control-allow-credentials": "true",
        "x-ds-trace-id": trace,
        "strict-transport-security": "max-age=31536000; includeSubDomains; preload",
        "x-content-type-options": "nosniff",
        "cf-cache-status": "DYNAMIC",
    }


def usage(prompt: int, completion: int, *, hit: int = 0, reasoning: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": hit},
    }
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    out["prompt_cache_hit_tokens"] = hit
    out["prompt_cache_miss_tokens"] = prompt - hit
    return out


def stream(n: int, model: str = CHAT) -> ChatStream:
    return ChatStream(
        id=f"5c0e{n:04d}-7a3b-4f1d-9e2c-8b6a4d2f0e{n:02d}",
        created=1767240000 + 53 * n,
        model=model,
        fingerprint="fp_ffc7281d48_prod0820_fp8_kvcache",
        service_tier=None,
        obfuscate=False,
        refusal=False,
    )


def finish(s: ChatStream, reason: str, **counts: Any) -> list[bytes]:
    prompt, completion = counts.pop("prompt"), counts.pop("completion")
    s.chunk({"content": ""}, reason, usage=usage(prompt, completion, **counts))
    return s.done()


def _text() -> Case:
    s = stream(1).start().text("Hello", "!", " How", " can", " I", " assist", " you", " today", "?")
    events = finish(s, "stop", prompt=21, completion=9, hit=0)
    return Case("text", ask(CHAT, "Say hello."), PATH,
                [streamed(events, headers("4f1c9a2e7b3d45e8a0c6b2d9e1f3a5c7"), merge=[3])])


def _tool_call() -> Case:
    s = stream(2).start().tool(0, "call_00_Rk4m9Pq2Xv7sLw1Tn8Zb3Hc6", "get_weather",
                              '{"', "city", '":', ' "', "Paris", '",', ' "', "unit", '":', ' "', "celsius", '"}')
    events = finish(s, "tool_calls", prompt=312, completion=24, hit=256)
    return Case("tool-call", ask(CHAT, "What's the weather in Paris, in celsius?", tools=[WEATHER]), PATH,
                [streamed(events, headers("7a2e4c6b8d0f41a3b5c7d9e1f3a5b7c9"), split={6: 88})])


def _parallel() -> Case:
    s = stream(3).start()
    s.tool(0, "call_00_Pa7r1sQ9mW2xK5vB8nL3dF6h", "get_weather", '{"city":', ' "Paris"}')
    s.tool(1, "call_01_T0ky0R3nE8wY4uI7oP2aS5g", "get_weather", '{"city":', ' "Tokyo"}')
    events = finish(s, "tool_calls", prompt=318, completion=46, hit=256)
    return Case("parallel-tool-calls", ask(CHAT, "Compare the weather in Paris and Tokyo.", tools=[WEATHER]),
                PATH, [streamed(events, headers("1b3d5f7a9c0e42b4d6f8a0c2e4b6d8f0"), merge=[4])])


def _no_args() -> Case:
    s = stream(4).start().tool(0, "call_00_Cl0ck7Vb2Nm5Qw8Er1Ty4Ui9", "get_current_time", "{}")
    events = finish(s, "tool_calls", prompt=276, completion=11, hit=0)
    return Case("tool-call-no-args", ask(CHAT, "What time is it in UTC?", tools=[CLOCK]), PATH,
                [streamed(events, headers("9e8d7c6b5a4f43e2d1c0b9a8f7e6d5c4"))])


def _text_then_tool() -> Case:
    s = stream(5).start().text("I", "'ll", " check", " the", " current", " weather", " in", " Paris", ".")
    s.tool(0, "call_00_Tx7Tl2Zq9Wm4Xn1Vb6Rc3Ys8", "get_weather", '{"city":', ' "Paris"}')
    events = finish(s, "tool_calls", prompt=301, completion=29, hit=256)
    return Case("text-then-tool-call", ask(CHAT, "Is it raining in Paris?", tools=[WEATHER]), PATH,
                [streamed(events, headers("3c5e7a9b1d2f44a6c8e0b2d4f6a8c0e2"))])


def _non_ascii() -> Case:
    s = stream(6).start().text("你好", "！", "今天", "北京", "晴", "，", "气温", " 21", "°C", "。", " Привет", " из", " Москвы", "! 😊")
    events = finish(s, "stop", prompt=19, completion=23, hit=0)
    return Case("non-ascii-split", ask(CHAT, "用中文和俄语问候我。"), PATH,
                [streamed(events, headers("6d8f0a2c4e6b45d7f9a1c3e5b7d9f1a3"), split=inside_chars(events))])


def _length() -> Case:
    s = stream(7).start().text("##", " The", " Silk", " Road", "\n\n", "The", " Silk", " Road", " was", " a", " network")
    events = finish(s, "length", prompt=16, completion=11, hit=0)
    return Case("length-stop", ask(CHAT, "Write an essay about the Silk Road.", max_tokens=11), PATH,
                [streamed(events, headers("8f0b2d4a6c8e46f1a3c5e7b9d1f3a5c7"))])


def _reasoning_body(n: int) -> list[bytes]:
    s = stream(n, REASONER).chunk({"role": "assistant", "content": None, "reasoning_content": ""})
    for piece in ["We", " need", " 23", " ×", " 17", ".", " 20", "×17", "=340", ",", " 3", "×17", "=51", ",", " total", " 391", "."]:
        s.chunk({"content": None, "reasoning_content": piece})
    for piece in ["23", " ×", " 17", " =", " **", "391", "**"]:
        s.chunk({"content": piece, "reasoning_content": None})
    s.chunk({"content": "", "reasoning_content": None}, "stop", usage=usage(18, 52, hit=0, reasoning=38))
    return [KEEP_ALIVE, KEEP_ALIVE, *s.done()]


def _reasoning() -> Case:
    return Case("reasoning", ask(REASONER, "What is 23 × 17?"), PATH,
                [streamed(_reasoning_body(8), headers("0a1c3e5b7d9f47a2c4e6b8d0f2a4c6e8"), merge=[5, 12], split={20: 70})])


def _reasoning_dropped() -> Case:
    return Case("reasoning-dropped", ask(REASONER, "What is 23 × 17?"), PATH,
                [streamed(_reasoning_body(9), headers("2b4d6f8a0c1e48b3d5f7a9c1e3b5d7f9"))],
                adapter_kwargs={"drop_reasoning": True})


def _followup() -> Case:
    s = stream(10).start().text("It", "'s", " 18", "°C", " and", " overcast", " in", " Paris", ".")
    events = finish(s, "stop", prompt=356, completion=10, hit=320)
    return Case("tool-result-followup", weather_followup(CHAT, "call_00_Rk4m9Pq2Xv7sLw1Tn8Zb3Hc6"), PATH,
                [streamed(events, headers("4d6f8b0a2c3e49c5e7a9b1d3f5c7e9a1"))])


def _error_mid_stream() -> Case:
    s = stream(11).start().text("The", " history", " of")
    error = {"error": {"message": "Service is too busy. Please try again later.",
                       "type": "server_error", "param": None, "code": "service_unavailable"}}
    return Case("error-mid-stream", ask(CHAT, "Tell me about the history of tea."), PATH,
                [streamed([*s.events, data(error)], headers("5e7a9c1b3d4f40d6f8b0c2e4a6d8f0b2"))])


def _rate_limited() -> Case:
    body = {"error": {"message": "Rate Limit Reached", "type": "rate_limit_reached_error",
                      "param": None, "code": "rate_limit_reached"}}
    return Case("rate-limited", ask(CHAT, "Say hello."), PATH,
                [error_response(429, body, {"retry-after": "20", "x-ds-trace-id": "6f8b0d2c4e5a41e7a9c1d3f5b7e9a1c3"}, indent=None)])


CASES = [
    _text(),
    _tool_call(),
    _parallel(),
    _no_args(),
    _text_then_tool(),
    _non_ascii(),
    _length(),
    _reasoning(),
    _reasoning_dropped(),
    _followup(),
    _error_mid_stream(),
    _rate_limited(),
]
