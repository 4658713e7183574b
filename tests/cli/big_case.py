"""A big ``dsh-replay check`` case: one OpenAI chat generation of many small content deltas.

``write_big_case(folder, target)`` writes ``openai/big.yaml`` (about ``target``
bytes of SSE body, recorded in 4 KiB fragments) and its golden. The cassette is
the bundled ``cassettes/openai/text.yaml`` with its body swapped: its metadata
and request are those of a real recording, so the OpenAI adapter's request
matches. The body is spliced into the literal block ``Cassette.dumps`` writes
(dumping a 200 MB body through PyYAML would take minutes), and the golden is
written line by line in the canonical bytes, as the adapter's chunks serialize.

Used by the memory test of ``check`` and by ``benchmarks/bench_memory.py``;
``python -m tests.cli.big_case FOLDER MB`` writes one by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "cassettes" / "openai" / "text.yaml"
MB = 1_000_000

#: one token each, some of them non-ASCII as providers send them (raw UTF-8)
WORDS = (" the", " stream", " adapter", " chunk", ",", " golden", ".", " caf\u00e9", " \u6771\u4eac", " replay",
         "\n\n", " \U0001f600", " token", " of")
_HEAD = b'data: {"id":"chatcmpl-big","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
_PROMPT_TOKENS = 24


def _event(delta: bytes, finish: bytes = b"null") -> bytes:
    return _HEAD + delta + b',"finish_reason":' + finish + b"}]}\n\n"


def body_and_golden(target: int) -> tuple[bytes, bytes, int]:
    """(about ``target`` bytes of SSE body, its golden, the number of chunks in it)."""
    deltas = [_event(b'{"content":' + orjson.dumps(word) + b"}") for word in WORDS]
    lines = [b'{"type":"text-delta","index":0,"text":' + orjson.dumps(word) + b"}\n" for word in WORDS]
    rounds = max(1, round(target / sum(map(len, deltas))))
    count = rounds * len(WORDS)
    usage = (b'data: {"id":"chatcmpl-big","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":%d,'
             b'"completion_tokens":%d,"total_tokens":%d}}\n\n' % (_PROMPT_TOKENS, count, _PROMPT_TOKENS + count))
    body = b"".join([
        _event(b'{"role":"assistant","content":""}'),
        b"".join(deltas) * rounds,
        _event(b"{}", b'"stop"'),
        usage,
        b"data: [DONE]\n\n",
    ])
    text = orjson.dumps("".join(WORDS) * rounds)
    golden = b"".join([
        b'{"type":"block-start","index":0,"blockType":"text"}\n',
        b"".join(lines) * rounds,
        b'{"type":"block-end","index":0,"block":{"type":"text","text":' + text + b"}}\n",
        b'{"type":"usage","usage":{"inputTokens":%d,"outputTokens":%d}}\n' % (_PROMPT_TOKENS, count),
        b'{"type":"finish","reason":{"kind":"stop","raw":"stop"}}\n',
    ])
    return body, golden, count + 4


def write_big_case(folder: Path, target: int, piece: int = 4096) -> tuple[Path, int, int]:
    """Write ``folder/openai/big.yaml`` and its golden; (the cassette, body bytes, chunks)."""
    from dsh_replay.cassette.store import Cassette

    body, golden, chunks = body_and_golden(target)
    cassette = Cassette.load(TEMPLATE)
    marker = b"data: BODY-GOES-HERE\n\n"
    interaction = cassette.interactions[0]
    interaction.body, interaction.fragments = marker, [(0.0, len(marker))]
    text = cassette.dumps().encode()
    literal = _literal_block(marker)
    if text.count(literal) != 1 or text.count(b"[[0.0, %d]]" % len(marker)) != 1:
        raise AssertionError("Cassette.dumps no longer writes the body as an indented literal block")
    sizes = [min(piece, len(body) - at) for at in range(0, len(body), piece)]
    flow = b"[" + b", ".join(b"[%.1f, %d]" % (n * 0.2, size) for n, size in enumerate(sizes)) + b"]"
    path = folder / "openai" / "big.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace(literal, _literal_block(body)).replace(b"[[0.0, %d]]" % len(marker), flow))
    path.with_name("big.chunks.jsonl").write_bytes(golden)
    return path, len(body), chunks


def _literal_block(body: bytes, indent: bytes = b" " * 8) -> bytes:
    """The lines of an SSE ``body`` as ``Cassette.dumps`` writes them in a literal block (blank lines unindented)."""
    return (indent + body.replace(b"\n", b"\n" + indent))[: -len(indent)].replace(b"\n" + indent + b"\n", b"\n\n")


if __name__ == "__main__":
    written, size, count = write_big_case(Path(sys.argv[1]), int(float(sys.argv[2]) * MB))
    print(f"{written}: {size / MB:.1f} MB body, {count:,} chunks")
