"""Route ``openai-compatible``: the Chat Completions dialects of other servers.

Each case talks to the server whose dialect it shows, written after the
recordings in ``shared/real-traffic`` (``groq__*``, ``mistral__*``, ``other__*``):

- **Groq** (``https://api.groq.com/openai/v1``): ``x_groq`` metadata on the
  first chunk, usage both in ``x_groq.usage`` and at the top level of the finish
  chunk, whole tool calls in one delta, reasoning in ``delta.reasoning``, and
  in-stream failures as ``event: error``;
- **Mistral** (``https://api.mistral.ai/v1``): a whole tool call without
  ``index`` sharing its chunk with ``finish_reason`` and usage;
- **vLLM** on a workstation (``http://localhost:8000/v1``): ``reasoning_content``,
  ``stop_reason`` beside ``finish_reason``, and the ``include_usage`` chunk;
- **Gemini's OpenAI-compatible endpoint**
  (``https://generativelanguage.googleapis.com/v1beta/openai``, see
  https://ai.google.dev/gemini-api/docs/openai): keys in alphabetical order, no
  ``finish_reason`` key until the last chunk, each call whole in one delta with
  ``"id": ""`` and no ``index`` (several calls in one delta, or one chunk each),
  ``finish_reason: "stop"`` even after tool calls, usage on the finishing chunk;
- **xAI** (``https://api.x.ai/v1``): a whole call (with ``index``) in one
  delta, and a cumulative usage on every chunk.
"""

# ruff: noqa: RUF001 - look-alike non-ASCII characters (multiplication sign, fullwidth
# punctuation, curly quotes) are the point of this test data

from __future__ import annotations

import json
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

GROQ = "https://api.groq.com/openai/v1"
MISTRAL = "https://api.mistral.ai/v1"
VLLM = "http://localhost:8000/v1"
GEMINI = "https://generativelanguage.googleapis.com/v1beta/openai"
XAI = "https://api.x.ai/v1"

GROQ_MODEL = "llama-3.3-70b-versatile"
QWEN = "Qwen/Qwen3-8B"


def groq_headers(request_id: str) -> dict[str, str]:
    return {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "vary": "Origin",
        "x-groq-region": "us-east-1",
        "x-ratelimit-limit-requests": "1000",
        "x-ratelimit-limit-tokens": "12000",
        "x-ratelimit-remaining-requests": "999",
        "x-ratelimit-remaining-tokens": "11873",
        "x-ratelimit-reset-requests": "1m26.4s",
        "x-ratelimit-reset-tokens": "635ms",
        "x-request-id": request_id,
        "via": "1.1 google",
        "alt-svc": 'h3=":443"; ma=86400',
        "cf-cache-status": "DYNAMIC",
    }


def groq_usage(prompt: int, completion: int, *, reasoning: int | None = None) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "queue_time": 0.052731447,
        "prompt_tokens": prompt,
        "prompt_time": 0.004120917,
        "completion_tokens": completion,
        "completion_time": round(completion / 275, 9),
        "total_tokens": prompt + completion,
        "total_time": round(0.004120917 + completion / 275, 9),
    }
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


class Groq(ChatStream):
    def __init__(self, n: int, request_id: str, model: str = GROQ_MODEL) -> None:
        super().__init__(
            id=f"chatcmpl-6f0c{n:04d}-3b1e-4c2a-9d7e-52a1b8c4e0f{n % 10}",
            created=1767230000 + 41 * n,
            model=model,
            fingerprint="fp_3f39b2c1a7",
            service_tier=None,
            obfuscate=False,
            usage_null=False,
        )
        self.request_id = request_id

    def begin(self) -> Groq:
        self.chunk({"role": "assistant", "content": ""}, x_groq={"id": self.request_id, "seed": 1840213337})
        return self

    def end(self, reason: str, prompt: int, completion: int, **usage: Any) -> list[bytes]:
        both = groq_usage(prompt, completion, **usage)
        self.chunk({}, reason, x_groq={"id": self.request_id, "usage": both}, usage=both)
        return self.done()


def vllm(n: int) -> ChatStream:
    return ChatStream(
        id=f"chatcmpl-9d4b7e2a61f04c{n:02d}8a3e5b7c1d0f2a6e",
        created=1767233000 + 29 * n,
        model=QWEN,
        service_tier=None,
        obfuscate=False,
        usage_null=False,
    )


def vllm_usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}


VLLM_HEADERS = {"content-type": "text/event-stream; charset=utf-8"}
GROQ_PATH = "/openai/v1/chat/completions"
LOCAL_PATH = "/v1/chat/completions"


def _text() -> Case:
    rid = "req_01kdshreplay0text0000000001"
    s = Groq(1, rid).begin().text("Hello", "!", " What", " can", " I", " do", " for", " you", "?")
    return Case("text", ask(GROQ_MODEL, "Say hello."), GROQ_PATH,
                [streamed(s.end("stop", 45, 10), groq_headers(rid), merge=[2, 6])], base_url=GROQ)


def _tool_call() -> Case:
    # Mistral: one delta holds the whole call, no index, beside finish_reason and usage
    s = ChatStream(id="3f9e1c7a2b5d4e8f9a0b1c2d3e4f5a6b", created=1767231200, model="mistral-small-latest",
                   service_tier=None, obfuscate=False, usage_null=False)
    s.chunk({"role": "assistant", "content": ""})
    call = {"id": "Wx7dQ2pLm", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}
    s.chunk({"content": None, "tool_calls": [call]}, "tool_calls",
            usage={"prompt_tokens": 131, "total_tokens": 158, "completion_tokens": 27})
    headers = {"content-type": "text/event-stream; charset=utf-8", "mistral-correlation-id": "019b7c2e-5d41-7a3f-9e60-2c8d1f4a7b90",
               "x-kong-request-id": "1f6e8a2b4c0d3e5f7a9b1c2d", "x-envoy-upstream-service-time": "183"}
    return Case("tool-call", ask("mistral-small-latest", "What's the weather in Paris, in celsius?", tools=[WEATHER]),
                "/v1/chat/completions", [streamed(s.done(), headers)], base_url=MISTRAL)


def _parallel() -> Case:
    rid = "req_01kdshreplay0parallel00002"
    calls = [
        {"id": "call_8kR2vN5xQ1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}, "index": 0},
        {"id": "call_3mT7yW9zB4", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'}, "index": 1},
    ]
    s = Groq(2, rid).begin().chunk({"tool_calls": calls})
    return Case("parallel-tool-calls", ask(GROQ_MODEL, "Compare the weather in Paris and Tokyo.", tools=[WEATHER]),
                GROQ_PATH, [streamed(s.end("tool_calls", 262, 38), groq_headers(rid))], base_url=GROQ)


def _no_args() -> Case:
    # vLLM's tool parser: the first fragment names the call, the arguments follow
    s = vllm(3).chunk({"role": "assistant", "content": ""})
    s.chunk({"tool_calls": [{"id": "chatcmpl-tool-5b8e2d7c91a3f046", "type": "function", "index": 0,
                             "function": {"name": "get_current_time"}}]})
    s.chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})
    s.chunk({"content": ""}, "tool_calls", stop_reason=None)
    s.raw({"choices": [], "usage": vllm_usage(188, 14)})
    return Case("tool-call-no-args", ask(QWEN, "What time is it in UTC?", tools=[CLOCK]), LOCAL_PATH,
                [streamed(s.done(), VLLM_HEADERS)], base_url=VLLM)


def _text_then_tool() -> Case:
    rid = "req_01kdshreplay0texttool00005"
    s = Groq(5, rid).begin().text("I", "'ll", " look", " up", " the", " weather", " in", " Paris", ".")
    s.chunk({"tool_calls": [{"id": "call_5pQ8sV2nX6", "type": "function", "index": 0,
                             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]})
    return Case("text-then-tool-call", ask(GROQ_MODEL, "Is it raining in Paris?", tools=[WEATHER]), GROQ_PATH,
                [streamed(s.end("tool_calls", 249, 31), groq_headers(rid), merge=[4])], base_url=GROQ)


def _non_ascii() -> Case:
    s = vllm(6).chunk({"role": "assistant", "content": ""})
    s.text("Ça", " va", " très", " bien", " —", " 谢谢", "！", " Schöne", " Grüße", " aus", " Zürich", " ⛰️")
    s.chunk({"content": ""}, "stop", stop_reason=None)
    s.raw({"choices": [], "usage": vllm_usage(33, 17)})
    events = s.done()
    return Case("non-ascii-split", ask(QWEN, "Answer in French, Chinese and German."), LOCAL_PATH,
                [streamed(events, VLLM_HEADERS, split=inside_chars(events))], base_url=VLLM)


def _length() -> Case:
    rid = "req_01kdshreplay0length0000007"
    s = Groq(7, rid).begin().text("The", " Great", " Wall", " of", " China", " stretches", " more", " than")
    return Case("length-stop", ask(GROQ_MODEL, "Tell me about the Great Wall.", max_tokens=8), GROQ_PATH,
                [streamed(s.end("length", 48, 8), groq_headers(rid))], base_url=GROQ)


def _reasoning() -> Case:
    s = vllm(8).chunk({"role": "assistant", "content": ""})
    for piece in ["Okay", ",", " the", " user", " asks", " for", " 17", " ×", " 3", ".", " 17", " ×", " 3", " =", " 51", "."]:
        s.chunk({"reasoning_content": piece})
    s.chunk({"content": "\n\n"})
    s.text("17", " ×", " 3", " =", " **", "51", "**")
    s.chunk({"content": ""}, "stop", stop_reason=None)
    s.raw({"choices": [], "usage": vllm_usage(21, 38)})
    return Case("reasoning", ask(QWEN, "What is 17 × 3?"), LOCAL_PATH,
                [streamed(s.done(), VLLM_HEADERS, merge=[3, 9], split={12: 57})], base_url=VLLM)


def _followup() -> Case:
    rid = "req_01kdshreplay0followup00009"
    s = Groq(9, rid).begin().text("It", "'s", " 18", "°C", " and", " overcast", " in", " Paris", ".")
    return Case("tool-result-followup", weather_followup(GROQ_MODEL, "call_8kR2vN5xQ1"), GROQ_PATH,
                [streamed(s.end("stop", 301, 10), groq_headers(rid))], base_url=GROQ)


def _error_mid_stream() -> Case:
    # as the recording groq__pydantic-ai__error-event-tool-use-failed.sse: reasoning, then
    # `event: error`; no finish_reason, no [DONE]
    rid = "req_01kdshreplay0error00000010"
    s = Groq(10, rid, model="openai/gpt-oss-120b").begin()
    for piece in ["We", " need", " to", " call", " get", "_weather", "."]:
        s.chunk({"reasoning": piece, "channel": "analysis"})
    error = {"error": {
        "message": "Tool call validation failed: tool call validation failed: parameters for tool get_weather "
                   "did not match schema: errors: [missing properties: 'city']",
        "type": "invalid_request_error", "code": "tool_use_failed",
        "failed_generation": '{"name": "get_weather", "arguments": {}}', "status_code": 400}}
    events = [*s.events, b"event: error\n" + data(error)]
    return Case("error-mid-stream", ask("openai/gpt-oss-120b", "Weather?", tools=[WEATHER]), GROQ_PATH,
                [streamed(events, groq_headers(rid))], base_url=GROQ)


def _rate_limited() -> Case:
    body = {"error": {
        "message": "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_01dshreplayfixtures` "
                   "service tier `on_demand` on tokens per minute (TPM): Limit 12000, Used 11873, Requested 1250. "
                   "Please try again in 20s. Need more tokens? Upgrade to Dev Tier today at "
                   "https://console.groq.com/settings/billing",
        "type": "tokens", "code": "rate_limit_exceeded"}}
    headers = {"retry-after": "20", "x-request-id": "req_01kdshreplay0ratelimit0011",
               "x-ratelimit-limit-tokens": "12000", "x-ratelimit-remaining-tokens": "0",
               "x-ratelimit-reset-tokens": "20s", "vary": "Origin", "via": "1.1 google"}
    return Case("rate-limited", ask(GROQ_MODEL, "Say hello."), GROQ_PATH,
                [error_response(429, body, headers, indent=None)], base_url=GROQ)


def _mistral_incremental() -> Case:
    # as mistral-incremental-tool-call in vercel/ai's fixtures: the call opens with its id,
    # name and "" arguments; the continuation repeats "type" with "name": "" (which must not
    # rename the call) and brings the whole arguments; the finish chunk carries the usage
    s = ChatStream(id="735e4348c1f04b6e9a2d3c5b7f8e0a14", created=1767234800, model="mistral-medium-2508",
                   service_tier=None, obfuscate=False, usage_null=False)
    s.chunk({"tool_calls": [{"id": "chatcmpl-tool-9f14c74c42f265b3", "type": "function",
                             "function": {"name": "get_weather", "arguments": ""}, "index": 0}],
             "index": 0, "content": ""})
    s.chunk({"tool_calls": [{"type": "function", "function": {"name": "", "arguments": '{"city": "Lyon"}'},
                             "index": 0}], "index": 0, "content": ""})
    s.chunk({"index": 0, "content": ""}, "tool_calls",
            usage={"prompt_tokens": 171, "total_tokens": 185, "completion_tokens": 14,
                   "prompt_tokens_details": {"cached_tokens": 128}})
    headers = {"content-type": "text/event-stream; charset=utf-8", "mistral-correlation-id": "019b7d41-2a6c-7e08-b3f1-5c9a0d2e8f47",
               "x-kong-request-id": "6a0c2e4f8b1d3a5c7e9f0b2d", "x-envoy-upstream-service-time": "241"}
    return Case("mistral-continuation-empty-name", ask("mistral-medium-2508", "Weather in Lyon?", tools=[WEATHER]),
                LOCAL_PATH, [streamed(s.done(), headers)], base_url=MISTRAL)


GEMINI_MODEL = "gemini-2.5-flash"
GEMINI_PATH = "/v1beta/openai/chat/completions"
GEMINI_HEADERS = {
    "content-type": "text/event-stream",
    "vary": "Origin, X-Origin, Referer",
    "server-timing": "gfet4t7; dur=688",
    "x-content-type-options": "nosniff",
    "x-xss-protection": "0",
    "alt-svc": 'h3=":443"; ma=2592000,h3-29=":443"; ma=2592000',
}


def gemini_chunk(response_id: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None,
                 usage: dict[str, int] | None = None) -> bytes:
    """A chunk as the endpoint writes it: keys sorted, null fields left out."""
    choice: dict[str, Any] = {"delta": delta, "index": 0}
    if finish is not None:
        choice["finish_reason"] = finish
    payload: dict[str, Any] = {"choices": [choice], "created": created, "id": response_id, "model": model,
                               "object": "chat.completion.chunk"}
    if usage is not None:
        payload["usage"] = usage
    return data(json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def gemini_call(name: str, arguments: str) -> dict[str, Any]:
    return {"function": {"arguments": arguments, "name": name}, "id": "", "type": "function"}


def gemini_usage(prompt: int, completion: int) -> dict[str, int]:
    return {"completion_tokens": completion, "prompt_tokens": prompt, "total_tokens": prompt + completion}


def _gemini_tool_call() -> Case:
    # one chunk: the whole call ("id": "", no index), finish_reason "stop" and the usage
    rid, created = "kDJeaPjWDZXqnvgP3M6R4AU", 1767236400
    events = [
        gemini_chunk(rid, created, GEMINI_MODEL, {"role": "assistant", "tool_calls": [
            gemini_call("get_weather", '{"city":"Paris","unit":"celsius"}')]}, "stop", gemini_usage(94, 21)),
        data("[DONE]"),
    ]
    return Case("gemini-compat-tool-call",
                ask(GEMINI_MODEL, "What's the weather in Paris, in celsius?", tools=[WEATHER]), GEMINI_PATH,
                [streamed(events, {**GEMINI_HEADERS, "x-goog-request-id": "3e7a1c9b5d2f4806"})], base_url=GEMINI)


def _gemini_parallel() -> Case:
    # two calls in one delta (as native Gemini sends two functionCall parts in one chunk)
    rid, created = "nzJeaLeRB_7onvgPq_mB-Ak", 1767236460
    calls = [gemini_call("get_weather", '{"city":"Paris"}'), gemini_call("get_weather", '{"city":"Tokyo"}')]
    events = [
        gemini_chunk(rid, created, GEMINI_MODEL, {"role": "assistant", "tool_calls": calls}, "stop",
                     gemini_usage(97, 30)),
        data("[DONE]"),
    ]
    return Case("gemini-compat-parallel-tool-calls",
                ask(GEMINI_MODEL, "Compare the weather in Paris and Tokyo.", tools=[WEATHER]), GEMINI_PATH,
                [streamed(events, {**GEMINI_HEADERS, "x-goog-request-id": "8b0d2f4a6c1e3957"})], base_url=GEMINI)


def _gemini_text_then_calls() -> Case:
    # text deltas, then each call in its own chunk (both at position 0, both "id": ""),
    # then a closing chunk with only the role, finish_reason "stop" and the usage
    rid, created = "0DNeaNq2L8HInvgPyoqS8Qs", 1767236520
    events = [gemini_chunk(rid, created, GEMINI_MODEL, {"content": piece, "role": "assistant"})
              for piece in ["I'll check the", " weather in Paris and the local", " time there."]]
    events += [
        gemini_chunk(rid, created, GEMINI_MODEL, {"role": "assistant", "tool_calls": [
            gemini_call("get_weather", '{"city":"Paris"}')]}),
        gemini_chunk(rid, created, GEMINI_MODEL, {"role": "assistant", "tool_calls": [
            gemini_call("get_current_time", "{}")]}),
        gemini_chunk(rid, created, GEMINI_MODEL, {"role": "assistant"}, "stop", gemini_usage(121, 37)),
        data("[DONE]"),
    ]
    return Case("gemini-compat-text-then-tool-calls",
                ask(GEMINI_MODEL, "What's the weather in Paris, and what time is it there?", tools=[WEATHER, CLOCK]),
                GEMINI_PATH,
                [streamed(events, {**GEMINI_HEADERS, "x-goog-request-id": "c4e6a8b0d2f13579"}, merge=[0])],
                base_url=GEMINI)


def _xai_whole_call() -> Case:
    # xAI sends a call whole in one delta (with index 0) and a cumulative usage on every chunk
    def xai_usage(completion: int) -> dict[str, Any]:
        return {"prompt_tokens": 412, "completion_tokens": completion, "total_tokens": 412 + completion,
                "prompt_tokens_details": {"text_tokens": 412, "audio_tokens": 0, "image_tokens": 0, "cached_tokens": 384},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
                "num_sources_used": 0}

    s = ChatStream(id="c5a3e0f2-7b19-4d6e-a8c4-2f0b9d1e6a73", created=1767237000, model="grok-3",
                   fingerprint="fp_0d42a4eb3d", service_tier=None, obfuscate=False, usage_null=False)
    call = {"id": "call_58413027", "function": {"name": "get_weather", "arguments": '{"city":"Berlin","unit":"celsius"}'},
            "index": 0, "type": "function"}
    s.raw({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}], "usage": xai_usage(29)})
    s.raw({"choices": [{"index": 0, "delta": {"content": "", "role": "assistant"}, "finish_reason": "tool_calls"}],
           "usage": xai_usage(29)})
    headers = {"content-type": "text/event-stream", "vary": "origin, access-control-request-method, access-control-request-headers",
               "x-zero-data-retention": "false", "cf-cache-status": "DYNAMIC"}
    return Case("xai-whole-tool-call", ask("grok-3", "What's the weather in Berlin, in celsius?", tools=[WEATHER]),
                LOCAL_PATH, [streamed(s.done(), headers)], base_url=XAI)


CASES = [
    _text(),
    _tool_call(),
    _parallel(),
    _no_args(),
    _text_then_tool(),
    _non_ascii(),
    _length(),
    _reasoning(),
    _followup(),
    _error_mid_stream(),
    _rate_limited(),
    _mistral_incremental(),
    _gemini_tool_call(),
    _gemini_parallel(),
    _gemini_text_then_calls(),
    _xai_whole_call(),
]
