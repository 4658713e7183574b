"""A reply's bytes on the wire: the body framed as h11 frames it, though only its first piece goes through h11."""

from __future__ import annotations

import asyncio

import h11
import pytest

from dsh_replay.server.wire import Reply

PIECES = [b"data: one\n\n", b"x" * 70000, b"\r\n", b"data: [DONE]\n\n"]


class _Transport:
    def __init__(self) -> None:
        self.sent = bytearray()

    def write(self, data: bytes) -> None:
        self.sent += data

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


class _Writer:
    def __init__(self) -> None:
        self.transport = _Transport()

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    async def drain(self) -> None:
        pass


def _receiving(version: bytes) -> h11.Connection:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"POST /v1/chat/completions HTTP/%s\r\nhost: x\r\ncontent-length: 0\r\n\r\n" % version)
    assert isinstance(conn.next_event(), h11.Request)
    assert isinstance(conn.next_event(), h11.EndOfMessage)
    return conn


@pytest.mark.parametrize("version", [b"1.1", b"1.0"])
def test_the_body_goes_out_as_h11_would_frame_it(version: bytes) -> None:
    writer = _Writer()
    reply = Reply(_receiving(version), None, writer, stall_seconds=0)  # type: ignore[arg-type]
    expected = _receiving(version)
    wire = bytearray(expected.send(h11.Response(status_code=200, headers=[("content-type", "text/event-stream")]))
                     or b"")

    async def answer() -> None:
        await reply.head(200, [("content-type", "text/event-stream")])
        for piece in PIECES:
            await reply.piece(piece)
        await reply.end("complete")

    asyncio.run(answer())
    for piece in PIECES:
        wire += expected.send(h11.Data(data=piece)) or b""
    wire += expected.send(h11.EndOfMessage()) or b""
    assert bytes(writer.transport.sent) == bytes(wire)
    assert (b"Transfer-Encoding: chunked" in wire) is (version == b"1.1")
    assert reply.conn.our_state is h11.DONE or reply.conn.our_state is h11.MUST_CLOSE
