"""FramedStream edge cases at the Python level (qim/net/framed.py; docs/design.md §4): clean
and truncated EOF, the pre-auth buffer cap, send after close, close vs abort, chunk-size
bounds, at most MAX_OPEN_MULTI multi-chunk frames open at once, and the address form.
Real loopback sockets."""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from qim._core import frame as frame_codec
from qim.consts import FRAME_HEADER_LEN, STREAM_WRITE_CHUNK_BYTES
from qim.errors import FrameTooLarge, TruncatedFrame
from qim.net.framed import MAX_OPEN_MULTI, FramedStream, StreamClosed, parse_addr
from qim.protocol import Opcode


async def pair(**kw) -> tuple[FramedStream, asyncio.StreamReader, asyncio.StreamWriter, asyncio.AbstractServer]:
    """(server-side stream, raw client reader, raw client writer, server)."""
    accepted: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_conn(reader, writer):
        accepted.set_result(FramedStream(reader, writer, **kw))

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*server.sockets[0].getsockname()[:2])
    return await accepted, reader, writer, server


async def test_clean_eof_is_none_and_eof_inside_a_frame_is_truncated():
    stream, _, writer, server = await pair()
    writer.write(b"".join(frame_codec.encode_frame(Opcode.PING, 1, b"", False, STREAM_WRITE_CHUNK_BYTES)))
    writer.write_eof()
    assert await stream.read_frame() == (Opcode.PING, 1, b"")
    assert await stream.read_frame() is None
    stream2, _, writer2, server2 = await pair()
    whole = b"".join(frame_codec.encode_frame(Opcode.PING, 2, b"abc", False, STREAM_WRITE_CHUNK_BYTES))
    writer2.write(whole[:-1])
    writer2.write_eof()
    with pytest.raises(TruncatedFrame):
        await stream2.read_frame()
    for s in (server, server2):
        s.close()


async def test_partial_frames_past_the_buffer_limit_close_the_stream():
    stream, _, writer, server = await pair()
    stream.buffer_limit = 1024
    chunks = frame_codec.encode_frame(Opcode.SEND_MESSAGE, 3, os.urandom(8192), False, 4096)
    writer.write(b"".join(chunks[:-1]))  # two chunks of an unfinished frame: 8 KiB held
    with pytest.raises(FrameTooLarge):
        await stream.read_frame()
    writer.close()
    server.close()


async def test_send_after_close_raises_and_close_flushes_what_was_queued_but_abort_does_not():
    stream, reader, writer, server = await pair()
    stream.send(Opcode.PONG, 1, b"queued before close")
    stream.close()
    with pytest.raises(StreamClosed):
        stream.send(Opcode.PONG, 2, b"too late")
    data = await asyncio.wait_for(reader.read(), 5)
    assert frame_codec.FrameDecoder().feed(data) == [(Opcode.PONG, 1, b"queued before close")]
    stream2, reader2, writer2, server2 = await pair()
    stream2.send(Opcode.MAILBOX_BATCH, 1, os.urandom(1 << 20))
    stream2.abort()
    assert len(await asyncio.wait_for(reader2.read(), 5)) < 1 << 20  # dropped, connection reset
    for w, s in ((writer, server), (writer2, server2)):
        w.close()
        s.close()


def test_chunk_size_must_be_within_the_frame_limit():
    loop = asyncio.new_event_loop()
    try:
        for bad in (0, STREAM_WRITE_CHUNK_BYTES + 1):
            with pytest.raises(ValueError):
                FramedStream(asyncio.StreamReader(loop=loop), None, chunk_bytes=bad)  # type: ignore[arg-type]
    finally:
        loop.close()


async def test_at_most_max_open_multi_chunk_frames_interleave():
    stream, reader, writer, server = await pair(chunk_bytes=1024)
    count = MAX_OPEN_MULTI + 4
    for rid in range(1, count + 1):
        stream.send(Opcode.MAILBOX_BATCH, rid, os.urandom(4096))  # 4+ chunks each
    await stream.flush()
    data = await asyncio.wait_for(reader.readexactly(stream_bytes(count, 4096, 1024)), 10)
    open_now: set[int] = set()
    peak = 0
    pos = 0
    while pos < len(data):
        flags, rid, body_len = data[pos + 3], struct.unpack(">I", data[pos + 8:pos + 12])[0], \
            struct.unpack(">I", data[pos + 12:pos + 16])[0]
        if flags & 0x02:  # MORE: this frame continues
            open_now.add(rid)
        else:
            open_now.discard(rid)
        peak = max(peak, len(open_now))
        pos += FRAME_HEADER_LEN + body_len
    assert peak == MAX_OPEN_MULTI
    writer.close()
    server.close()


def stream_bytes(frames: int, body: int, chunk: int) -> int:
    chunks = -(-body // chunk)
    return frames * (chunks * FRAME_HEADER_LEN + body)


def test_addresses_are_host_colon_port():
    assert parse_addr("127.0.0.1:7100") == ("127.0.0.1", 7100)
    assert parse_addr("[::1]:80") == ("::1", 80)
    assert parse_addr("gw.example:0") == ("gw.example", 0)
    for bad in ("127.0.0.1", ":80", "host:", "host:x1"):
        with pytest.raises(ValueError, match="expected host:port"):
            parse_addr(bad)
    # a port out of range is named as such, not as a wrong form
    with pytest.raises(ValueError, match="port 65536 is outside 0..65535"):
        parse_addr("host:65536")
