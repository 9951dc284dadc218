"""A slow WebSocket reader gets what a slow TCP reader gets (tests/e2e/test_slow_reader.py;
docs/protocol.md "WebSocket"): the same one-chunk socket buffering and control replies
first, so a PING is answered while a 900 KiB page crawls to a browser at 100 KiB/s, the
page arrives whole, and another client of the gateway is served meanwhile. The client
is the `websockets` library's own (one message per chunk, checked)."""

from __future__ import annotations

import asyncio
import os

from websockets.asyncio.client import connect

from qim._core import frame as frame_codec
from qim.consts import WS_PATH
from qim.net.tls import ALPN_HTTP, client_port_context
from qim.proto.v1 import connection_pb2, mailbox_pb2
from qim.protocol import Opcode
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import RawClient
from tests.e2e.test_slow_reader import KIB, PROBE_DEADLINE_S, materialized, send_many, users
from tests.net.throttle import ThrottleProxy


async def test_ping_is_answered_while_a_900kib_page_reaches_a_websocket_client_at_100kib_s(stack):
    a, b = users(2)
    bodies = [os.urandom(900 * KIB) for _ in range(2)]
    await send_many(stack, a, b, bodies)
    await materialized(stack, b, 2)
    proxy = ThrottleProxy(stack.gateway_addr, rate=100 * KIB)
    addr = await proxy.start()
    ws = await connect(f"wss://{addr}{WS_PATH}", ssl=client_port_context(stack.ca_file, ALPN_HTTP),
                       compression=None, max_size=None, ping_interval=None, open_timeout=20)
    dec = frame_codec.FrameDecoder()
    loop = asyncio.get_running_loop()

    async def until(rid: int) -> list[tuple[int, int, bytes, float]]:
        got = []
        while True:
            message = await asyncio.wait_for(ws.recv(), 30)
            assert isinstance(message, bytes) and len(message) == 20 + int.from_bytes(message[12:16], "big")
            for op, frid, body in dec.feed(message):
                got.append((op, frid, body, loop.time()))
                if frid == rid:
                    return got

    token = issue_dev_token(stack.token_key, 0, b, 7)
    await ws.send(frame_codec.encode_frame(Opcode.AUTH, 1, connection_pb2.Auth(token=token).SerializeToString())[0])
    assert (await until(1))[-1][0] == Opcode.AUTH_OK
    started = loop.time()
    await ws.send(frame_codec.encode_frame(Opcode.PULL_MAILBOX, 10, mailbox_pb2.PullMailbox(
        cursor=0).SerializeToString())[0])
    while proxy.received[0] < 200 * KIB:  # the page is arriving
        await asyncio.sleep(0.05)
    other = await RawClient.login(stack, users(1)[0])  # the gateway serves others meanwhile
    op, _ = await other.request(Opcode.PING, b"")
    assert op == Opcode.PONG
    await other.close()
    ping_at = loop.time()
    await ws.send(frame_codec.encode_frame(Opcode.PING, 11, b"")[0])
    frames = await until(11)
    pong_after = frames[-1][3] - ping_at
    print(f"PONG after {pong_after:.2f}s with the page arriving over WebSocket")
    assert frames[-1][0] == Opcode.PONG and pong_after < PROBE_DEADLINE_S
    rest = await until(10)
    op, _, body, done_at = rest[-1]
    assert op == Opcode.MAILBOX_BATCH
    assert [e.body for e in mailbox_pb2.MailboxBatch.FromString(body).entries] == bodies[:1]
    assert done_at - started > 6.0  # the page really crossed the 100 KiB/s link after the PONG
    await ws.close()
    await proxy.close()
