"""The seed's ``my-llm-adapter`` plugin, in Python.

A complete adapter for a fictional provider whose endpoint ``POST /v1/generate``
streams NDJSON lines: ``{"text": "..."}`` pieces, then
``{"done": true, "stop": "...", "usage": {"in": N, "out": M}}``.

The four exports — ``name``, ``Config``, ``inject``, ``apply`` — are what
``dsh_replay.load_plugins`` reads from ``dsh.yml``. The adapter class stays
private to the module, and its constructor takes the key explicitly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import orjson

from dsh_replay import (
    BlockSequencer,
    GenerateOptions,
    LlmAdapter,
    MalformedStreamError,
    PluginContext,
    StreamChunk,
    StreamInterruptedError,
    Usage,
)


class _MyAdapter(LlmAdapter):
    def __init__(self, api_key: str, *, base_url: str = "https://api.my-provider.example") -> None:
        self._api_key = api_key
        self._base_url = base_url.rstrip("/")

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        # 1. Convert options.messages to the provider format.
        body = {
            "model": options.model,
            "messages": [{"role": m.role, "content": m.content} for m in options.messages],
        }
        sequencer = BlockSequencer()
        # 2. Call the streaming API (the key goes in a header, never in the URL).
        async with httpx.AsyncClient() as client, client.stream(
            "POST",
            f"{self._base_url}/v1/generate",
            json=body,
            headers={"authorization": f"Bearer {self._api_key}"},
        ) as response:
            response.raise_for_status()
            # 3. Convert the response into StreamChunk values, as each line arrives.
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    raise MalformedStreamError(f"not JSON: {line[:80]!r}", raw=line.encode()) from None
                if event.get("done"):
                    usage = event.get("usage", {})
                    for chunk in sequencer.finish(
                        usage=Usage(input_tokens=usage.get("in", 0), output_tokens=usage.get("out", 0)),
                        raw_reason=event.get("stop"),
                    ):
                        yield chunk
                    return
                for chunk in sequencer.text(event.get("text", "")):
                    yield chunk
        raise StreamInterruptedError("the stream ended without its done line", route="my-provider")


@dataclass(frozen=True)
class Config:
    """``apiKey`` and ``providers`` are both required, as in the seed."""

    api_key: str
    providers: list[str]
    base_url: str = "https://api.my-provider.example"


name = "my-llm-adapter"

# the llm service must be ready before apply runs
inject = ["llm"]


def apply(ctx: PluginContext, config: Config) -> None:
    adapter = _MyAdapter(config.api_key, base_url=config.base_url)
    ctx.llm.register_adapter(config.providers, adapter)
