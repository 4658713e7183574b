"""Route ``openai-responses``: OpenAI Responses API streams (``POST /v1/responses``).

Written after ``shared/real-traffic/openai-responses__*`` and the streaming
events reference (https://platform.openai.com/docs/api-reference/responses-streaming):
``event: <type>`` lines, a ``sequence_number`` on every event, the full
response object in ``response.created`` / ``response.in_progress`` and in the
terminal event, items announced by ``response.output_item.added`` and closed
by ``response.output_item.done``, ``obfuscation`` pads on deltas, usage only in
the terminal event, and no ``[DONE]``.
"""

# ruff: noqa: RUF001 - look-alike non-ASCII characters (multiplication sign, fullwidth
# punctuation, curly quotes) are the point of this test data

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_replay import GenerateOptions, Message

from . import Case
from .openai import (
    CLOCK,
    RATE_LIMIT_BODY,
    SYSTEM,
    WEATHER,
    ask,
    data,
    error_response,
    inside_chars,
    openai_headers,
    pad,
    rate_limit_headers,
    streamed,
    weather_followup,
)

PATH = "/v1/responses"
MODEL = "gpt-4.1-mini"
SERVED = "gpt-4.1-mini-2025-04-14"
REASONER = "o4-mini"


def usage(prompt: int, output: int, *, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + output,
    }


class ResponsesStream:
    """Builds a Responses API SSE body event by event."""

    def __init__(self, n: int, options: GenerateOptions, *, model: str = SERVED, effort: str | None = None) -> None:
        self.id = f"resp_68d5f1a2b3c4d5e6f7{n:02d}a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2"
        self.suffix = self.id[-30:]
        self.response: dict[str, Any] = {
            "id": self.id, "object": "response", "created_at": 1767250000 + 61 * n, "status": "in_progress",
            "background": False, "error": None, "incomplete_details": None, "instructions": None,
            "max_output_tokens": options.max_tokens, "max_tool_calls": None, "model": model, "output": [],
            "parallel_tool_calls": True, "previous_response_id": None, "prompt_cache_key": None,
            "reasoning": {"effort": effort, "summary": "auto" if effort else None}, "safety_identifier": None,
            "service_tier": "auto", "store": True, "temperature": 1.0 if effort else (options.temperature or 1.0),
            "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
            "tools": [{"type": "function", "description": t.description, "name": t.name,
                       "parameters": dict(t.parameters), "strict": False} for t in options.tools],
            "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled", "usage": None, "user": None, "metadata": {},
        }
        self.events: list[bytes] = []
        self.output: list[dict[str, Any]] = []
        self.emit("response.created", response=dict(self.response))
        self.emit("response.in_progress", response=dict(self.response))

    def emit(self, kind: str, **fields: Any) -> ResponsesStream:
        payload = {"type": kind, "sequence_number": len(self.events), **fields}
        self.events.append(f"event: {kind}\n".encode() + data(payload))
        return self

    def _item(self, item: dict[str, Any]) -> int:
        index = len(self.output)
        self.emit("response.output_item.added", output_index=index, item=item)
        return index

    def _done(self, index: int, item: dict[str, Any]) -> None:
        self.output.append(item)
        self.emit("response.output_item.done", output_index=index, item=item)

    def message(self, key: str, *pieces: str, status: str = "completed", annotations: Sequence[Any] = ()) -> ResponsesStream:
        item_id = f"msg_{key}{self.suffix}"
        index = self._item({"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"})
        at = {"item_id": item_id, "output_index": index, "content_index": 0}
        self.emit("response.content_part.added", **at, part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""})
        for piece in pieces:
            self.emit("response.output_text.delta", **at, delta=piece, logprobs=[], obfuscation=pad(item_id + piece))
        for position, annotation in enumerate(annotations):
            self.emit("response.output_text.annotation.added", **at, annotation_index=position, annotation=annotation)
        text = "".join(pieces)
        part = {"type": "output_text", "annotations": list(annotations), "logprobs": [], "text": text}
        self.emit("response.output_text.done", **at, text=text, logprobs=[])
        self.emit("response.content_part.done", **at, part=part)
        self._done(index, {"id": item_id, "type": "message", "status": status, "content": [part], "role": "assistant"})
        return self

    def function_call(self, key: str, call_id: str, name: str, *pieces: str) -> ResponsesStream:
        item_id = f"fc_{key}{self.suffix}"
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id, "name": name}
        index = self._item(item)
        for piece in pieces:
            self.emit("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece,
                      obfuscation=pad(item_id + piece))
        arguments = "".join(pieces)
        self.emit("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments)
        self._done(index, {**item, "status": "completed", "arguments": arguments})
        return self

    def custom_tool_call(self, key: str, call_id: str, name: str, *pieces: str) -> ResponsesStream:
        """A free-form (custom) tool call: its input streams as plain text, not JSON."""
        item_id = f"ctc_{key}{self.suffix}"
        item = {"id": item_id, "type": "custom_tool_call", "status": "in_progress", "call_id": call_id,
                "input": "", "name": name}
        index = self._item(item)
        for piece in pieces:
            self.emit("response.custom_tool_call_input.delta", item_id=item_id, output_index=index, delta=piece,
                      obfuscation=pad(item_id + piece))
        text = "".join(pieces)
        self.emit("response.custom_tool_call_input.done", item_id=item_id, output_index=index, input=text)
        self._done(index, {**item, "status": "completed", "input": text})
        return self

    def reasoning(self, key: str, *parts: Sequence[str]) -> ResponsesStream:
        item_id = f"rs_{key}{self.suffix}"
        index = self._item({"id": item_id, "type": "reasoning", "summary": []})
        summary = []
        for position, pieces in enumerate(parts):
            at = {"item_id": item_id, "output_index": index, "summary_index": position}
            self.emit("response.reasoning_summary_part.added", **at, part={"type": "summary_text", "text": ""})
            for piece in pieces:
                self.emit("response.reasoning_summary_text.delta", **at, delta=piece, obfuscation=pad(item_id + piece))
            text = "".join(pieces)
            self.emit("response.reasoning_summary_text.done", **at, text=text)
            self.emit("response.reasoning_summary_part.done", **at, part={"type": "summary_text", "text": text})
            summary.append({"type": "summary_text", "text": text})
        self._done(index, {"id": item_id, "type": "reasoning", "summary": summary})
        return self

    def web_search(self, key: str, query: str) -> ResponsesStream:
        item_id = f"ws_{key}{self.suffix}"
        index = self._item({"id": item_id, "type": "web_search_call", "status": "in_progress", "action": {"type": "search"}})
        for phase in ("in_progress", "searching", "completed"):
            self.emit(f"response.web_search_call.{phase}", output_index=index, item_id=item_id)
        self._done(index, {"id": item_id, "type": "web_search_call", "status": "completed",
                           "action": {"type": "search", "query": query}})
        return self

    def end(self, kind: str, counts: dict[str, Any], *, reason: str | None = None) -> list[bytes]:
        status = "completed" if kind == "response.completed" else "incomplete"
        final = {**self.response, "status": status, "output": self.output, "usage": counts}
        if reason:
            final["incomplete_details"] = {"reason": reason}
        self.emit(kind, response=final)
        return self.events


def _case(name: str, options: GenerateOptions, events: list[bytes], request_id: str, ms: int, **cut: Any) -> Case:
    return Case(name, options, PATH, [streamed(events, openai_headers(request_id, ms), **cut)])


def _text() -> Case:
    options = ask(MODEL, "Say hello.")
    s = ResponsesStream(1, options).message("a1", "Hello", "!", " How", " can", " I", " help", " you", " today", "?")
    return _case("text", options, s.end("response.completed", usage(24, 10)),
                 "req_d7e8f90a1b2c3d4e5f60718293a4b5c6", 187, merge=[3], split={8: 77})


def _tool_call() -> Case:
    options = ask(MODEL, "What's the weather in Paris, in celsius?", tools=[WEATHER])
    s = ResponsesStream(2, options).function_call("b2", "call_R8sT2uV4wX6yZ8aB0cD2eF4g", "get_weather",
                                                  '{"', "city", '":"', "Paris", '","', "unit", '":"', "celsius", '"}')
    return _case("tool-call", options, s.end("response.completed", usage(92, 21)),
                 "req_e8f90a1b2c3d4e5f60718293a4b5c6d7", 412, merge=[5])


def _parallel() -> Case:
    options = ask(MODEL, "Compare the weather in Paris and Tokyo.", tools=[WEATHER])
    s = ResponsesStream(3, options)
    s.function_call("c3", "call_Pa1r2i3s4W5e6a7t8h9e0r1X", "get_weather", '{"ci', 'ty":"Pa', 'ris"}')
    s.function_call("c4", "call_To1k2y3o4W5e6a7t8h9e0r1Y", "get_weather", '{"ci', 'ty":"To', 'kyo"}')
    return _case("parallel-tool-calls", options, s.end("response.completed", usage(101, 44)),
                 "req_f90a1b2c3d4e5f60718293a4b5c6d7e8", 498, split={9: 120})


def _no_args() -> Case:
    options = ask(MODEL, "What time is it in UTC?", tools=[CLOCK])
    s = ResponsesStream(4, options).function_call("d5", "call_Cl0ckN0Ar9sR3sp0ns3s0004", "get_current_time", "{}")
    return _case("tool-call-no-args", options, s.end("response.completed", usage(71, 12)),
                 "req_0a1b2c3d4e5f60718293a4b5c6d7e8f9", 276)


def _text_then_tool() -> Case:
    options = ask(MODEL, "Is it raining in Paris?", tools=[WEATHER])
    s = ResponsesStream(5, options).message("e6", "Let", " me", " check", " the", " weather", " in", " Paris", ".")
    s.function_call("e7", "call_T3xtTh3nT00lR3sp0ns3s05", "get_weather", '{"city"', ':"Paris"}')
    return _case("text-then-tool-call", options, s.end("response.completed", usage(88, 30)),
                 "req_1b2c3d4e5f60718293a4b5c6d7e8f90a", 305, merge=[6, 14])


def _non_ascii() -> Case:
    options = ask(MODEL, "Greet me in Spanish, then say the Seoul weather in Korean.")
    s = ResponsesStream(6, options).message("f8", "¡Hola", "!", " En", " Seúl", " hace", " 12", " °C", " — ", "서울", "은", " 맑아요", " ☀️")
    events = s.end("response.completed", usage(33, 22))
    return _case("non-ascii-split", options, events, "req_2c3d4e5f60718293a4b5c6d7e8f90a1b", 221,
                 split=inside_chars(events))


def _length() -> Case:
    options = ask(MODEL, "Tell me the history of the Eiffel Tower.", max_tokens=16)
    s = ResponsesStream(7, options).message("g9", "The", " Eiffel", " Tower", " was", " built", " for", " the", " 1889",
                                            " World", "'s", " Fair", " in", " Paris", " and", " was", " initially", status="incomplete")
    return _case("length-stop", options, s.end("response.incomplete", usage(29, 16), reason="max_output_tokens"),
                 "req_3d4e5f60718293a4b5c6d7e8f90a1b2c", 264)


def _reasoning() -> Case:
    options = GenerateOptions(model=REASONER, messages=[SYSTEM, Message(role="user", content="What is 23 × 17?")],
                              extra={"reasoning": {"effort": "low", "summary": "auto"}})
    s = ResponsesStream(8, options, model="o4-mini-2025-04-16", effort="low")
    s.reasoning("h1", ["**Multiplying", " numbers**\n\n", "I", " split", " 23", " into", " 20", " and", " 3", "."],
                ["**Adding", " up**\n\n", "340", " plus", " 51", " is", " 391", "."])
    s.message("h2", "23", " ×", " 17", " =", " **", "391", "**")
    return _case("reasoning", options, s.end("response.completed", usage(27, 214, reasoning=192)),
                 "req_4e5f60718293a4b5c6d7e8f90a1b2c3d", 2213, merge=[4])


def _web_search() -> Case:
    # a server-side tool: OpenAI runs the search; its item is not a tool call for the caller
    options = GenerateOptions(model=MODEL, messages=[Message(role="user", content="Who won the 2024 Tour de France?")],
                              extra={"tools": [{"type": "web_search"}]})
    s = ResponsesStream(9, options)
    s.response["tools"] = [{"type": "web_search", "filters": None, "search_context_size": "medium", "user_location": None}]
    s.web_search("i1", "2024 Tour de France winner")
    url = "https://en.wikipedia.org/wiki/2024_Tour_de_France"
    text = ["Tadej", " Pogačar", " won", " the", " 2024", " Tour", " de", " France", " (", "wikipedia.org", ")."]
    start = "".join(text).index("wikipedia.org")
    citation = {"type": "url_citation", "start_index": start, "end_index": start + len("wikipedia.org"),
                "title": "2024 Tour de France", "url": url}
    s.message("i2", *text, annotations=[citation])
    return _case("web-search", options, s.end("response.completed", usage(8164, 31)),
                 "req_5f60718293a4b5c6d7e8f90a1b2c3d4e", 3120)


#: a patch as the apply_patch tool takes it: free text with quotes, tabs and non-ASCII, escaped in the arguments
PATCH = (
    "*** Begin Patch\n*** Update File: app/hi.py\n@@ def greet(n):\n"
    "-    return \"Hi, \" + name\n+    return f\"Grüß dich, {name}!\"\t# ☀️\n*** End Patch\n"
)
APPLY_PATCH = {"type": "custom", "name": "apply_patch",
               "description": "Apply a patch to the repository, in the *** Begin Patch format."}


def _custom_tool_call() -> Case:
    # a free-form tool: its input is text, streamed in custom_tool_call_input.delta events
    options = GenerateOptions(model="gpt-5", messages=[SYSTEM, Message(role="user", content="Greet in German in app/hi.py.")],
                              extra={"tools": [APPLY_PATCH]})
    s = ResponsesStream(12, options, model="gpt-5-2025-08-07")
    s.response["tools"] = [{**APPLY_PATCH, "format": {"type": "text"}}]
    pieces = [PATCH[i:i + 3] for i in range(0, len(PATCH), 3)]  # 47 pieces, cut inside words and escapes
    s.custom_tool_call("l1", "call_Ap9lyP4tchCust0mT00l012", "apply_patch", *pieces)
    return _case("custom-tool-call", options, s.end("response.completed", usage(96, 188, reasoning=64)),
                 "req_8293a4b5c6d7e8f90a1b2c3d4e5f6172", 1893, merge=[7, 30])


def _followup() -> Case:
    options = weather_followup(MODEL, "call_R8sT2uV4wX6yZ8aB0cD2eF4g")
    s = ResponsesStream(10, options).message("j1", "It", "'s", " 18", " °C", " and", " overcast", " in", " Paris", ".")
    return _case("tool-result-followup", options, s.end("response.completed", usage(131, 11, cached=0)),
                 "req_60718293a4b5c6d7e8f90a1b2c3d4e5f", 254)


def _error_mid_stream() -> Case:
    options = ask(MODEL, "Explain quantum computing.")
    s = ResponsesStream(11, options)
    item_id = f"msg_k1{s.suffix}"
    s.emit("response.output_item.added", output_index=0,
           item={"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"})
    s.emit("response.content_part.added", item_id=item_id, output_index=0, content_index=0,
           part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""})
    for piece in ["Quantum", " computers", " use"]:
        s.emit("response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=piece,
               logprobs=[], obfuscation=pad(item_id + piece))
    message = ("An error occurred while processing your request. You can retry your request, or contact us through "
               "our help center at help.openai.com if the error persists.")
    s.emit("error", code="server_error", message=message, param=None)
    failed = {**s.response, "status": "failed", "error": {"code": "server_error", "message": message}}
    s.emit("response.failed", response=failed)
    return _case("error-mid-stream", options, s.events, "req_718293a4b5c6d7e8f90a1b2c3d4e5f60", 1402)


def _rate_limited() -> Case:
    return Case("rate-limited", ask(MODEL, "Say hello."), PATH,
                [error_response(429, RATE_LIMIT_BODY, rate_limit_headers("req_8293a4b5c6d7e8f90a1b2c3d4e5f6071", "20"))])


CASES = [
    _text(),
    _tool_call(),
    _parallel(),
    _no_args(),
    _text_then_tool(),
    _non_ascii(),
    _length(),
    _reasoning(),
    _web_search(),
    _custom_tool_call(),
    _followup(),
    _error_mid_stream(),
    _rate_limited(),
]
