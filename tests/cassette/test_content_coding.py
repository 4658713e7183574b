"""A body's Content-Encoding undone: the codings HTTP servers send, and what a hostile body cannot make it do."""

from __future__ import annotations

import gzip
import zlib

import pytest

from dsh_replay.cassette import content_coding
from dsh_replay.cassette.content_coding import UndecodableBody, content_encodings, decode_content

TEXT = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n' * 20


def _raw_deflate(data: bytes) -> bytes:
    squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return squeeze.compress(data) + squeeze.flush()


@pytest.mark.parametrize(
    ("body", "codings"),
    [
        (gzip.compress(TEXT), ["gzip"]),
        (gzip.compress(TEXT[:300]) + gzip.compress(TEXT[300:]), ["x-gzip"]),  # two members, one body
        (zlib.compress(TEXT), ["deflate"]),
        (_raw_deflate(TEXT), ["deflate"]),  # no zlib header, as some servers send it
        (zlib.compress(gzip.compress(TEXT)), ["gzip", "deflate"]),  # undone last-applied first
        (TEXT, []),
    ],
    ids=["gzip", "gzip-members", "zlib-deflate", "raw-deflate", "gzip-then-deflate", "none"],
)
def test_each_coding_is_undone(body: bytes, codings: list[str]) -> None:
    assert decode_content(body, codings) == TEXT


def test_the_codings_are_read_from_every_header_in_order_without_identity() -> None:
    headers = [("Content-Type", "text/event-stream"), ("Content-Encoding", "gzip, identity"),
               ("content-encoding", " BR ")]
    assert content_encodings(headers) == ["gzip", "br"]


def test_a_body_that_would_decompress_past_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(content_coding, "DECODED_LIMIT", 4096)
    bomb = gzip.compress(bytes(1 << 20))  # 1 MiB of zeros in about 1 KB
    with pytest.raises(UndecodableBody, match=r"^its response body decompresses \(gzip\) to more than 0 MiB"):
        decode_content(bomb, ["gzip"])
    assert decode_content(gzip.compress(bytes(4096)), ["gzip"]) == bytes(4096)  # the limit itself is allowed


@pytest.mark.parametrize(
    ("body", "codings", "message"),
    [
        (gzip.compress(TEXT)[:-12], ["gzip"], "its request body does not decode as gzip"),  # cut short
        (b"not compressed at all", ["gzip"], "its request body does not decode as gzip"),
        (b"...", ["compress"], "its request body has content-encoding 'compress', which is not decoded here"),
    ],
    ids=["truncated", "not-gzip", "unknown-coding"],
)
def test_a_body_that_cannot_be_undone_says_why(body: bytes, codings: list[str], message: str) -> None:
    with pytest.raises(UndecodableBody, match=f"^{message}"):
        decode_content(body, codings, "request")
