"""Per-connection in-flight limit at the gateway (docs/design.md §11 writer in-flight
requests per connection): past the limit the connection stops reading, nothing is
dropped, and every request is answered once the backend frees up.

Pure logic of the gateway connection over a real loopback socket; the backend is a
stand-in router that holds requests until released.
"""

from __future__ import annotations

import asyncio
import os

from qim._core import ids
from qim.net.framed import FramedStream
from qim.proto.v1 import connection_pb2, message_pb2
from qim.protocol import Opcode
from qim.services.gateway.conn import ClientConnection
from tests.gateway.standin import gateway, token


class HoldingRouter:
    def __init__(self) -> None:
        self.inflight = 0
        self.max_inflight = 0
        self.calls = 0
        self.release = asyncio.Event()

    async def call(self, backend, key, opcode, body):
        return await getattr(self, f"call_{backend}")(key, opcode, body)

    async def call_writer(self, conversation_id, opcode, body):
        self.calls += 1
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        await self.release.wait()
        self.inflight -= 1
        return Opcode.SEND_ACK, message_pb2.SendAck(conversation_seq=self.calls).SerializeToString()


async def test_inflight_limit_holds_back_reading_and_drops_nothing():
    router = HoldingRouter()
    gw = gateway(router, inflight_limit=2)

    async def on_client(reader, writer):
        await ClientConnection(FramedStream(reader, writer), gw).run()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = FramedStream(reader, writer)
    client.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token(5, 1)).SerializeToString())
    assert (await client.read_frame())[0] == Opcode.AUTH_OK
    conv = ids.conversation_id_direct(0, 5, 6)
    for rid in range(10, 20):
        client.send(Opcode.SEND_MESSAGE, rid, message_pb2.SendMessage(
            client_message_id=os.urandom(16), conversation_id=conv, recipient_user_id=6, body=b"x").SerializeToString())
    await asyncio.sleep(0.3)
    assert router.calls == 2 and router.inflight == 2  # the rest wait unread
    router.release.set()
    replies = [await asyncio.wait_for(client.read_frame(), 5) for _ in range(10)]
    assert sorted(rid for _, rid, _ in replies) == list(range(10, 20))
    assert all(op == Opcode.SEND_ACK for op, _, _ in replies)
    assert router.max_inflight == 2 and router.calls == 10
    client.abort()
    server.close()
