"""Liveness is progress: a PING probe does not kill a connection
whose PONG is queued behind bytes still arriving, and does kill a silent one; the
mailbox page budget follows the measured throughput."""

from __future__ import annotations

import asyncio
import time

import pytest

from qim._core import frame as frame_codec
from qim.consts import MAILBOX_PAGE_MAX_BYTES, STREAM_WRITE_CHUNK_BYTES
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.sdk import ConnectionLost
from qim.sdk.connection import Connection
from qim.sdk.puller import PAGE_MIN_BYTES, PAGE_START_BYTES, Puller


class SlowPeer:
    """AUTH_OK at once; a PING is answered only after `page` bytes of another frame
    trickled out at `bps` (bytes/s), or never when `bps` is 0."""

    def __init__(self, page: int, bps: int) -> None:
        self.page, self.bps = page, bps

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader, writer) -> None:
        decoder = frame_codec.FrameDecoder(4 << 20)
        try:
            while data := await reader.read(65536):
                for op, rid, _body in decoder.feed(data):
                    if op == Opcode.AUTH:
                        auth = connection_pb2.AuthOk(user_id=1, device_id=1, heartbeat_s=60)
                        writer.write(b"".join(frame_codec.encode_frame(Opcode.AUTH_OK, rid, auth.SerializeToString(),
                                                                       False, STREAM_WRITE_CHUNK_BYTES)))
                    elif op == Opcode.PING and self.bps:
                        asyncio.get_running_loop().create_task(self._page_then_pong(writer, rid))
        except (ConnectionError, OSError):
            pass

    async def _page_then_pong(self, writer, rid: int) -> None:
        raw = b"".join(frame_codec.encode_frame(Opcode.PUSH_EVENTS, 0, bytes(self.page), False,
                                                STREAM_WRITE_CHUNK_BYTES))
        step = max(1, self.bps // 20)
        for i in range(0, len(raw), step):
            writer.write(raw[i:i + step])
            await asyncio.sleep(step / self.bps)
        writer.write(b"".join(frame_codec.encode_frame(Opcode.PONG, rid, connection_pb2.Pong().SerializeToString(),
                                                       False, STREAM_WRITE_CHUNK_BYTES)))

    async def stop(self) -> None:
        self.server.close()


async def test_pong_behind_arriving_bytes_keeps_the_connection():
    peer = SlowPeer(page=60_000, bps=60_000)  # ~1 s of bytes ahead of the PONG
    conn = await Connection.open(await peer.start(), "token")
    start = time.monotonic()
    await conn.ping(0.3)  # the probe window is shorter than the page: progress keeps it alive
    assert time.monotonic() - start > 0.6 and conn.is_open
    await conn.close()
    await peer.stop()


async def test_silent_peer_fails_the_probe():
    peer = SlowPeer(page=0, bps=0)
    conn = await Connection.open(await peer.start(), "token")
    start = time.monotonic()
    with pytest.raises(ConnectionLost):
        await conn.ping(0.3)
    assert time.monotonic() - start < 1.0 and not conn.is_open
    await peer.stop()


def test_page_budget_follows_throughput():
    p = Puller(None)
    assert p.page_bytes == PAGE_START_BYTES
    p._adapt(PAGE_START_BYTES, 6.4)  # 20 KiB/s: aim at ~1 s of it
    assert p.page_bytes == 20 * 1024
    p._adapt(1000, 3.0)  # a tiny slow page is latency, not the link: unchanged
    assert p.page_bytes == 20 * 1024
    p._adapt(100, 0.01)  # fast but nearly empty: no reason to grow
    assert p.page_bytes == 20 * 1024
    for _ in range(10):
        p._adapt(p.page_bytes, 0.05)  # full pages coming back fast: grow, up to the cap
    assert p.page_bytes == MAILBOX_PAGE_MAX_BYTES
    p._adapt(MAILBOX_PAGE_MAX_BYTES, 600.0)  # a crawling link: never below the floor
    assert p.page_bytes == PAGE_MIN_BYTES


def test_a_page_cut_short_shrinks_the_next_one():
    p = Puller(None)
    p._shrink(24_000, 2.0)  # the session ended after 24 kB in 2 s of a 128 KiB page
    assert p.page_bytes == 12_000
    p._shrink(1_000, 0.5)  # too short to measure: unchanged
    assert p.page_bytes == 12_000
    p._shrink(100, 30.0)  # never below the floor
    assert p.page_bytes == PAGE_MIN_BYTES
