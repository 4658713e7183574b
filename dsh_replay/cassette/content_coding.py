"""A body as the server sent it, its ``Content-Encoding`` undone: gzip, deflate, brotli, zstd (sans-I/O).

httpx and requests record a compressed answer compressed (a replay hands the
client the same bytes, which it decompresses again). What reads the bytes for
their meaning undoes the coding first: the importer, which stores bodies
decoded, and the credential scan before a write, for which a body it cannot
decode is a body it cannot vouch for. Brotli and zstd are undone with whichever
of their modules is installed (``brotli`` or ``brotlicffi``, ``zstandard``);
an HTTP client offers those codings only when it has them, so a body recorded
in one was decodable where it was recorded.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable, Iterable

__all__ = ["DECODED_LIMIT", "UndecodableBody", "content_encodings", "decode_content", "inflate_sniffed"]


class UndecodableBody(ValueError):
    """A body whose content-encoding cannot be undone here; the message says why."""


def content_encodings(headers: Iterable[tuple[str, str]]) -> list[str]:
    """The codings ``Content-Encoding`` headers name, in the order they were applied (``identity`` left out)."""
    named = [coding.strip().lower() for name, value in headers if name.lower() == "content-encoding"
             for coding in value.split(",")]
    return [coding for coding in named if coding and coding != "identity"]


def decode_content(body: bytes, encodings: list[str], part: str = "response") -> bytes:
    """``body`` with ``encodings`` undone, the last applied first; ``UndecodableBody`` if one cannot be."""
    for encoding in reversed(encodings):
        body = _undo(encoding, body, part)
    return body


#: the most a body may decompress to: past it, a few hundred KB of a hostile cassette would take gigabytes
DECODED_LIMIT = 512 << 20


def _undo(encoding: str, body: bytes, part: str) -> bytes:
    if encoding in ("gzip", "x-gzip", "deflate"):
        # deflate is zlib-wrapped, or raw as some servers send it
        for wbits in ((16 + zlib.MAX_WBITS,) if encoding != "deflate" else (zlib.MAX_WBITS, -zlib.MAX_WBITS)):
            out, stopped = _inflate(body, wbits, DECODED_LIMIT)
            if stopped is _PAST_LIMIT:
                raise UndecodableBody(f"its {part} body decompresses ({encoding}) to more than "
                                      f"{DECODED_LIMIT >> 20} MiB; it is not read")
            if not stopped:
                return bytes(out)
        raise UndecodableBody(f"its {part} body does not decode as {encoding} ({stopped})")
    decoder = _DECODERS.get(encoding)
    if decoder is None:
        raise UndecodableBody(f"its {part} body has content-encoding {encoding!r}, which is not decoded here")
    decompress = decoder()
    if decompress is None:
        modules = " or ".join(_MODULES[encoding])
        raise UndecodableBody(f"its {part} body is {encoding}-encoded; install {modules} to decode it")
    try:
        return decompress(body)
    except Exception as exc:  # each module has its own error class
        raise UndecodableBody(f"its {part} body does not decode as {encoding} ({exc})") from None


#: the modules that undo each optional coding, the first one installed used
_MODULES = {"br": ("brotli", "brotlicffi"), "zstd": ("zstandard",)}


def _module_decoder(encoding: str) -> Callable[[bytes], bytes] | None:
    for name in _MODULES[encoding]:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if encoding == "zstd":
            # a frame need not state its size: the streaming decompressor reads it to its end
            return lambda body: bytes(module.ZstdDecompressor().decompressobj().decompress(body))
        return lambda body: bytes(module.decompress(body))
    return None


#: the codings undone by an optional module: encoding -> what finds its decompressor (None: not installed)
_DECODERS: dict[str, Callable[[], Callable[[bytes], bytes] | None]] = {
    "br": lambda: _module_decoder("br"),
    "zstd": lambda: _module_decoder("zstd"),
}


# -- bodies whose coding is not said -------------------------------------------------

# What a scan of files on disk meets: a ``!!binary`` body whose headers it does
# not read. gzip (magic 1f 8b) and zlib-wrapped deflate (RFC 1950 header) are
# told by their first bytes; a binary body that is neither, and is no UTF-8
# text, is tried as raw deflate (no header at all: arbitrary bytes fail within
# a few, and what came out before is all that is read). The output is capped,
# so a zip bomb costs memory in proportion to the cap and well under a second;
# what came out before the cap, or before a truncated or damaged stream ends,
# is still returned. One layer only: a compressed body inside a compressed body
# is not HTTP's doing.
_INFLATE_LIMIT = 16 << 20
_INFLATE_CHUNK = 64 << 10


def inflate_sniffed(data: bytes) -> tuple[str, bytearray] | None:
    """(codec, at most 16 MiB of output) for a body that looks compressed, else None."""
    if data[:2] == b"\x1f\x8b":
        return "gzip", _inflate(data, 16 + zlib.MAX_WBITS, _INFLATE_LIMIT)[0]
    # RFC 1950: method 8 (deflate), window <= 32 KiB, header a multiple of 31
    if len(data) >= 2 and data[0] & 0x0F == 8 and data[0] >> 4 <= 7 and int.from_bytes(data[:2], "big") % 31 == 0:
        return "deflate", _inflate(data, zlib.MAX_WBITS, _INFLATE_LIMIT)[0]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        out = _inflate(data, -zlib.MAX_WBITS, _INFLATE_LIMIT)[0]
        return ("raw deflate", out) if out else None
    return None


#: what :func:`_inflate` says when the output would pass its limit
_PAST_LIMIT = "past the limit"


def _inflate(data: bytes, wbits: int, limit: int) -> tuple[bytearray, str]:
    """At most ``limit`` bytes of what ``data`` decompresses to, over concatenated members, and why it stopped
    before the input's end ("" when it did not; :data:`_PAST_LIMIT`, or the stream's damage).

    Fed in chunks so that a stream damaged partway still gives what came before the damage.
    """
    out = bytearray()
    while data:
        inflater = zlib.decompressobj(wbits)
        for at in range(0, len(data), _INFLATE_CHUNK):
            try:
                out += inflater.decompress(data[at : at + _INFLATE_CHUNK], limit + 1 - len(out))
            except zlib.error as exc:
                return out, str(exc)
            if len(out) > limit:
                del out[limit:]  # in place: a 16 MiB buffer is not copied to drop a byte
                return out, _PAST_LIMIT
            if inflater.eof:
                data = inflater.unused_data + data[at + _INFLATE_CHUNK :]
                break
        else:
            return out, "the compressed data ends early"
    return out, ""
