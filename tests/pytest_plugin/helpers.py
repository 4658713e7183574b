"""Shared pieces of the plugin tests.

The inner test files (run by ``pytester``) talk to a tiny NDJSON "echo"
provider through :data:`ADAPTER_SOURCE`, an adapter built on the shared
``HttpAdapter``/``Translator``. The outer test plays that provider on loopback
with :func:`provider` while recording, and stops it before replaying, so a
replay that passes provably made no network call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dsh_replay.testing import ProviderEmulator, ScriptedResponse

INI = """\
[pytest]
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
filterwarnings = error
"""



#: ``PYTEST_ADDOPTS`` of the inner runs (the outer run's own options are not the inner project's):
#: the installed plugins no inner test uses stay out. Each costs every inner process, xdist's workers
#: too, its imports at start-up (Hypothesis's ~0.6 s); pytest-asyncio, pytest-recording, pytest-xdist
#: and ours, which the inner tests use or must live beside, still load as in a user's project.
INNER_ADDOPTS = "-p no:hypothesispytest -p no:anyio -p no:respx"


def ini(*lines: str) -> str:
    """The inner ini with extra lines."""
    return INI + "".join(line + "\n" for line in lines)


#: ``echo_adapter.py`` in the inner project: the adapter plus two small factories for tests
ADAPTER_SOURCE = '''\
import os

from dsh_replay import GenerateOptions, Message, NDJSONDecoder, Usage
from dsh_replay.adapters import HttpAdapter, StreamRequest, Translator


class Tr(Translator):
    terminal_event = "the done line"

    def event(self, e):
        if e.get("done"):
            return self.finish(Usage(input_tokens=e["in"], output_tokens=e["out"]), "stop")
        return self.seq.text(e["text"])


class EchoAdapter(HttpAdapter):
    route = "echo"
    default_base_url = None

    def build_request(self, options):
        return StreamRequest(
            route="echo",
            url=self.base_url + "/gen",
            headers={"authorization": "Bearer " + self.api_key},
            json={"m": options.model, "msgs": [m.content for m in options.messages]},
        )

    def decoder(self):
        return NDJSONDecoder()

    def translator(self, seq):
        return Tr("echo", seq)


def make_adapter():
    # recording talks to the emulator; a replay never sends anything, so any URL does
    return EchoAdapter(api_key="sk-test-0123456789abcdef", base_url=os.environ.get("EMU", "http://unused.invalid"))


def make_options(text="hi"):
    return GenerateOptions(model="m", messages=[Message(role="user", content=text)])
'''

#: the first lines of an inner test module that uses the echo adapter
IMPORTS = "import pytest\nfrom echo_adapter import make_adapter, make_options\n"

NDJSON = "application/x-ndjson"


def ndjson(*texts: str, tokens: tuple[int, int] = (3, 2), done: bool = True) -> bytes:
    """An echo-provider body: one line per text piece, then the done line (unless ``done=False``)."""
    lines = [json.dumps({"text": text}, ensure_ascii=False) for text in texts]
    if done:
        lines.append(json.dumps({"done": True, "in": tokens[0], "out": tokens[1]}))
    return "".join(line + "\n" for line in lines).encode()


def streaming(body: bytes, *, delay: float = 0.01) -> ScriptedResponse:
    """The body as the provider flushes it: one fragment per line, ``delay`` apart."""
    return ScriptedResponse.streaming(body, delay=delay, content_type=NDJSON)


def golden_lines(*texts: str, tokens: tuple[int, int] = (3, 2)) -> list[str]:
    """The golden the echo adapter gives for :func:`ndjson` of the same texts."""
    whole = "".join(texts)
    return [
        '{"type":"block-start","index":0,"blockType":"text"}',
        *(json.dumps({"type": "text-delta", "index": 0, "text": t}, separators=(",", ":"), ensure_ascii=False) for t in texts),
        json.dumps({"type": "block-end", "index": 0, "block": {"type": "text", "text": whole}}, separators=(",", ":"), ensure_ascii=False),
        f'{{"type":"usage","usage":{{"inputTokens":{tokens[0]},"outputTokens":{tokens[1]}}}}}',
        '{"type":"finish","reason":{"kind":"stop","raw":"stop"}}',
    ]


@contextmanager
def provider(monkeypatch: pytest.MonkeyPatch, *responses: ScriptedResponse) -> Iterator[ProviderEmulator]:
    """The echo provider on loopback (``POST /gen``), its URL in ``$EMU`` for the inner run.

    Responses are served in order, the last one repeating. On exit the server
    stops and ``$EMU`` is removed, so what runs next cannot reach it.
    """
    with ProviderEmulator() as emu:
        emu.add("POST", "/gen", *(responses or (streaming(ndjson("Hel", "lo")),)))
        monkeypatch.setenv("EMU", emu.base_url)
        try:
            yield emu
        finally:
            monkeypatch.delenv("EMU", raising=False)


def summary(result: pytest.RunResult) -> list[str]:
    """The lines of the dsh-replay terminal summary ([] when there is none)."""
    lines = result.outlines
    starts = [i for i, line in enumerate(lines) if re.fullmatch(r"-+ dsh-replay -+", line)]
    assert len(starts) <= 1, f"more than one dsh-replay summary:\n{result.stdout.str()}"
    if not starts:
        return []
    out = []
    for line in lines[starts[0] + 1 :]:
        if line.startswith(("=", "-")) or not line.strip():
            break
        out.append(line)
    return out


def summary_line(result: pytest.RunResult, prefix: str) -> str:
    """The summary line starting with ``prefix`` (e.g. ``"goldens:"``)."""
    found = [line for line in summary(result) if line.startswith(prefix)]
    assert len(found) == 1, f"no single {prefix!r} line in the summary:\n{result.stdout.str()}"
    return found[0]


def read_lines(path: Path) -> list[str]:
    """A golden's lines (split on ``\\n`` only, as goldens are; it must end with one)."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), f"{path} does not end with a newline"
    return text[:-1].split("\n")


def echo_test(name: str = "test_echo", text: str = "hi", marker: str = "", body: str = "") -> str:
    """Source of one async inner test that streams the echo adapter through the fixture."""
    return f"""
@pytest.mark.asyncio
{marker}
async def {name}(dsh_replay):
    chunks = await dsh_replay.stream(make_adapter(), make_options({text!r}))
    {body or "assert chunks"}
"""


#: ``scripted_adapter.py``: makes the echo call (so there is something to record and
#: replay), then yields the chunks it was given, right or wrong, as a buggy adapter would
SCRIPTED_SOURCE = '''\
from dsh_replay import (
    BlockEnd, BlockStart, Finish, FinishReason, TextBlock, TextDelta, ToolCallBlock, ToolCallDelta, Usage, UsageChunk,
)
from echo_adapter import EchoAdapter, make_adapter


class ScriptedAdapter(EchoAdapter):
    def __init__(self, chunks, **kwargs):
        super().__init__(**kwargs)
        self.chunks = chunks

    async def stream(self, options):
        async for _ in super().stream(options):
            pass
        for chunk in self.chunks:
            yield chunk


def scripted(*chunks):
    return ScriptedAdapter(list(chunks), api_key="sk-test-0123456789abcdef", base_url=make_adapter().base_url)


END = [UsageChunk(usage=Usage(input_tokens=1, output_tokens=2)), Finish(reason=FinishReason(kind="stop"))]

# two text blocks open at once: P3 unless allow_interleaving
INTERLEAVED = [
    BlockStart(index=0, block_type="text"),
    BlockStart(index=1, block_type="text"),
    TextDelta(index=0, text="a"),
    TextDelta(index=1, text="b"),
    BlockEnd(index=0, block=TextBlock(text="a")),
    BlockEnd(index=1, block=TextBlock(text="b")),
    *END,
]

# a tool call whose arguments are not JSON: P7j unless json_arguments=False
BAD_JSON_CALL = [
    BlockStart(index=0, block_type="tool-call"),
    ToolCallDelta(index=0, id="call_1", name="lookup", arguments_delta="{oops"),
    BlockEnd(index=0, block=ToolCallBlock(id="call_1", name="lookup", arguments="{oops")),
    UsageChunk(usage=Usage(input_tokens=1, output_tokens=2)),
    Finish(reason=FinishReason(kind="tool-calls")),
]

# a delta before its block started, then a block-end whose text does not add up
BROKEN = [
    TextDelta(index=0, text="x"),
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="a"),
    BlockEnd(index=0, block=TextBlock(text="ab")),
    *END,
]
'''
