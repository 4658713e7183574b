"""``Translator``: what a third-party translator may call, and what the stream then is."""

from __future__ import annotations

import httpx
import pytest

from dsh_replay import (
    GenerateOptions,
    Message,
    SSEDecoder,
    SSEEvent,
    StreamChunk,
    Usage,
    chunk_to_json,
)
from dsh_replay.adapters import HttpAdapter, StreamRequest, Translator

BODY = b"event: delta\ndata: Hel\n\nevent: delta\ndata: lo\n\nevent: end\ndata: {}\n\n"


class _ThroughSequencer(Translator[SSEEvent]):
    """Finishes through ``self.seq.finish``, as the sequencer's own docstring shows."""

    terminal_event = "the end event"

    def event(self, event: SSEEvent) -> list[StreamChunk]:
        if event.event == "delta":
            return self.seq.text(event.data)
        if event.event == "end":
            return self.seq.finish(usage=Usage(input_tokens=1, output_tokens=2), raw_reason="done")
        return []


class _ThroughTranslator(_ThroughSequencer):
    def event(self, event: SSEEvent) -> list[StreamChunk]:
        if event.event == "end":
            return self.finish(Usage(input_tokens=1, output_tokens=2), "done")
        return super().event(event)


def _adapter(translator: type[Translator[SSEEvent]]) -> HttpAdapter[SSEEvent]:
    class Adapter(HttpAdapter[SSEEvent]):
        route = "toy"
        default_base_url = "http://toy.invalid"
        decoder_class = SSEDecoder
        translator_class = translator

        def build_request(self, options: GenerateOptions) -> StreamRequest:
            return StreamRequest(route="toy", url=self.base_url + "/gen", headers={"x-api-key": self.api_key},
                                 json={"m": options.model})

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=BODY,
                                                                    headers={"content-type": "text/event-stream"}))
    return Adapter(api_key="sk-test-translator", client=httpx.AsyncClient(transport=transport))


@pytest.mark.asyncio
@pytest.mark.parametrize("translator", [_ThroughSequencer, _ThroughTranslator], ids=["seq.finish", "self.finish"])
async def test_finish_through_the_sequencer_completes_the_stream(translator: type[Translator[SSEEvent]]) -> None:
    adapter = _adapter(translator)
    chunks = [chunk_to_json(c) async for c in adapter.stream(GenerateOptions(model="m", messages=[Message(role="user", content="hi")]))]
    assert [c["type"] for c in chunks] == ["block-start", "text-delta", "text-delta", "block-end", "usage", "finish"]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop", "raw": "done"}}
