"""FramedStream interleaving (docs/design.md §4, §12 "a 4 MiB frame does not stall PONG")."""

from __future__ import annotations

import asyncio
import os

from qim._core import frame
from qim.net.framed import FramedStream
from qim.protocol import Opcode


async def pair():
    accepted: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_conn(reader, writer):
        accepted.set_result(FramedStream(reader, writer))

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    return server, FramedStream(reader, writer), await accepted


async def test_a_small_frame_queued_after_a_4mib_frame_overtakes_it():
    server, a, b = await pair()
    big = os.urandom(4 * 1024 * 1024)
    a.send(Opcode.MAILBOX_BATCH, 1, big)
    a.send(Opcode.PONG, 2, b"pong")
    first = await asyncio.wait_for(b.read_frame(), 10)
    second = await asyncio.wait_for(b.read_frame(), 10)
    assert first == (Opcode.PONG, 2, b"pong")  # round-robin: the PONG went between the chunks
    assert second == (Opcode.MAILBOX_BATCH, 1, big)
    a.abort(), b.abort()
    server.close()


async def test_two_frames_with_one_key_are_never_interleaved():
    server, a, b = await pair()
    bodies = [os.urandom(300_000), os.urandom(200_000)]
    for body in bodies:  # server pushes share (PUSH_EVENTS, 0)
        a.send(Opcode.PUSH_EVENTS, 0, body)
    got = [await asyncio.wait_for(b.read_frame(), 10) for _ in bodies]
    assert [g[2] for g in got] == bodies
    a.abort(), b.abort()
    server.close()


async def test_gateway_answers_ping_between_the_chunks_of_a_big_request(stack):
    from tests.e2e.rawclient import RawClient

    client = await RawClient.login(stack, 4242)
    chunks = frame.encode_frame(Opcode.SEND_MESSAGE, 77, os.urandom(4 * 1024 * 1024 - 1024))
    writer = client.stream._writer
    for chunk in chunks[:32]:
        writer.write(chunk)
    writer.write(frame.encode_frame(Opcode.PING, 78, b"")[0])
    await writer.drain()
    op, rid, _ = await client.next_frame(10)
    assert (op, rid) == (Opcode.PONG, 78)  # answered while the big frame is half received
    for chunk in chunks[32:]:
        writer.write(chunk)
    await writer.drain()
    op, rid, _ = await client.next_frame(10)
    assert (op, rid) == (Opcode.ERROR, 77)  # the 4 MiB send itself is refused (body > 1 MiB)
    await client.close()
