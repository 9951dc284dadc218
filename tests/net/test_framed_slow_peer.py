"""FramedStream toward a slow peer (docs/design.md §4 "PONG and ACK frames
pass between the chunks of a large frame"): the writer keeps about one chunk in the
socket buffers, so a PONG queued while a large frame is stuck reaches the wire after a
few KiB, not after the whole frame. Real loopback sockets; the peer reads raw bytes.

Observed before the fix: the writer handed up to 1 MiB to the transport before waiting,
so a PONG queued behind a 4 MiB frame followed more than 1 MiB of it on the wire.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct

import pytest

from qim.consts import FRAME_HEADER_LEN
from qim.net.framed import FramedStream
from qim.protocol import Opcode

KIB = 1024


async def slow_pair(chunk_bytes: int = 16 * KIB, peer_rcvbuf: int = 8 * KIB):
    """(server, sender stream, raw peer socket) over loopback; the peer reads nothing
    until told and has a small receive buffer (the link's queue)."""
    accepted: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_conn(reader, writer):
        accepted.set_result(FramedStream(reader, writer, chunk_bytes=chunk_bytes))

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    peer = socket.socket()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, peer_rcvbuf)
    peer.setblocking(False)
    await asyncio.get_running_loop().sock_connect(peer, server.sockets[0].getsockname())
    return server, await accepted, peer


async def read_chunks(peer: socket.socket, until_opcode: int, timeout: float = 20.0) -> list[tuple[int, int, int]]:
    """Chunk headers as (opcode, request_id, bytes on the wire before this chunk) up to
    and including the first chunk of `until_opcode`."""
    loop = asyncio.get_running_loop()
    buf, offset, out = b"", 0, []
    async with asyncio.timeout(timeout):
        while True:
            while len(buf) - offset >= FRAME_HEADER_LEN:
                _, _, _, opcode, _, rid, body_len, _ = struct.unpack_from(">HBBHHIII", buf, offset)
                if len(buf) - offset < FRAME_HEADER_LEN + body_len:
                    break
                out.append((opcode, rid, offset))
                offset += FRAME_HEADER_LEN + body_len
                if opcode == until_opcode:
                    return out
            data = await loop.sock_recv(peer, 65536)
            assert data, "closed"
            buf += data


@pytest.mark.parametrize("chunk_bytes", [16 * KIB, 64 * KIB])
async def test_a_pong_queued_behind_a_stuck_4mib_frame_follows_only_a_few_chunks_of_it(chunk_bytes):
    server, stream, peer = await slow_pair(chunk_bytes)
    stream.send(Opcode.MAILBOX_BATCH, 1, os.urandom(4 * 1024 * KIB - 64))
    await asyncio.sleep(0.3)  # the writer filled what the socket takes and waits
    assert stream.queued_bytes > 3 * 1024 * KIB  # the rest waits in the stream, counted
    stream.send(Opcode.PONG, 2, b"pong")
    chunks = await read_chunks(peer, Opcode.PONG)
    before = chunks[-1][2]
    assert chunks[-1][:2] == (Opcode.PONG, 2)
    # one chunk in the transport, about one unsent in the kernel, the peer's buffer
    assert before < 4 * chunk_bytes + 32 * KIB, f"the PONG followed {before // KIB} KiB of the big frame"
    peer.close()
    stream.abort()
    server.close()


async def test_control_replies_go_before_every_queued_bulk_chunk():
    server, stream, peer = await slow_pair()
    for rid in range(1, 9):  # eight multi-chunk frames interleaving round-robin
        stream.send(Opcode.HISTORY_BATCH, rid, os.urandom(256 * KIB))
    await asyncio.sleep(0.2)
    stream.send(Opcode.PUSH_EVENTS, 0, b"")  # not urgent: waits its turn
    stream.send(Opcode.SEND_ACK, 50, b"ack")
    stream.send(Opcode.ERROR, 51, b"err")
    chunks = await read_chunks(peer, Opcode.ERROR)
    opcodes = [c[0] for c in chunks]
    assert opcodes.index(Opcode.SEND_ACK) == len(opcodes) - 2  # ACK then ERROR, back to back,
    assert Opcode.PUSH_EVENTS not in opcodes  # before the push queued ahead of them
    peer.close()
    stream.abort()
    server.close()


async def test_wait_writable_returns_as_the_peer_drains_the_queue():
    server, stream, peer = await slow_pair()
    stream.send(Opcode.MAILBOX_BATCH, 1, os.urandom(2 * 1024 * KIB))
    await asyncio.sleep(0.1)
    waiter = asyncio.get_running_loop().create_task(stream.wait_writable(512 * KIB))
    await asyncio.sleep(0.2)
    assert not waiter.done()  # back-pressure: the peer reads nothing
    loop = asyncio.get_running_loop()
    got = 0
    async with asyncio.timeout(20):
        while not waiter.done():
            got += len(await loop.sock_recv(peer, 65536))
    assert stream.queued_bytes <= 512 * KIB and got > 1024 * KIB
    peer.close()
    stream.abort()
    server.close()


async def test_flush_returns_once_a_frame_stuck_in_a_slow_socket_is_handed_over():
    server, stream, peer = await slow_pair()
    stream.send(Opcode.MAILBOX_BATCH, 1, os.urandom(1024 * KIB))
    flushed = asyncio.get_running_loop().create_task(stream.flush())
    loop = asyncio.get_running_loop()
    got = 0
    async with asyncio.timeout(20):
        while got < 1024 * KIB:  # a slow reader: the writer's last drain() really waits
            got += len(await loop.sock_recv(peer, 4096))
            await asyncio.sleep(0.001)
        await flushed
    peer.close()
    stream.abort()
    server.close()
