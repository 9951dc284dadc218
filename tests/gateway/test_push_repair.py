"""Gateway side of push repair (docs/decisions/0012-push-link-repair.md):
readiness waits for every mailbox node's push link, a link that comes back after a loss
wakes that node's devices, and a device whose push was dropped for a full queue gets a
wake-up once its queue drains. Pure logic with stand-in connections, plus one real
ClientConnection over loopback for the drain case.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct

from qim.consts import FRAME_HEADER_LEN
from qim.net.framed import FramedStream
from qim.proto.v1 import internal_pb2, mailbox_pb2
from qim.protocol import Opcode
from qim.services.gateway.conn import CLIENT_CHUNK_BYTES, ClientConnection
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.online import OnlineRegistry
from qim.services.gateway.pushlink import PushListener
from tests.gateway.standin import gateway


class FakeConn:
    def __init__(self, user: int, shard: int, queued: int = 0) -> None:
        self.tenant, self.user_id, self.device_id, self.shard = 0, user, 1, shard
        self.lane = user % 7
        self.queued_bytes = queued
        self.sent: list[tuple[int, bytes]] = []
        self.wake_requests = 0

    def send(self, opcode: int, request_id: int, body: bytes) -> None:
        self.sent.append((opcode, body))

    def kick(self) -> None:
        pass

    def wake_when_drained(self, limit: int, wake) -> None:
        self.wake_requests += 1


NODES = {"mailbox@0": [0, 2], "mailbox@1": [1, 3]}  # the shards each node serves


def hello(node: str, wake_all: bool = False) -> bytes:
    return internal_pb2.PushBatch(hello=True, node_id=node, shards=NODES[node], wake_all=wake_all).SerializeToString()


def wakes(conn: FakeConn) -> int:
    """Wake-ups: PUSH_EVENTS without a position (docs/decisions/0033)."""
    return sum(1 for op, body in conn.sent
               if op == Opcode.PUSH_EVENTS and not mailbox_pb2.PushEvents.FromString(body).mailbox_seq)


def setup(metrics: GatewayMetrics | None = None, live=("mailbox@0", "mailbox@1")):
    online = OnlineRegistry(metrics)
    conns = [FakeConn(100 + s, s) for s in range(4)]  # one device on each of shards 0..3
    for c in conns:
        online.register(c)
    return PushListener(online, lambda: live, metrics), conns


def test_not_ready_until_every_live_mailbox_node_has_linked():
    pl, _ = setup()
    assert list(pl.not_ready()) == ["no push link from mailbox node(s) mailbox@0, mailbox@1"]
    a, b = object(), object()
    node_a = pl.on_frame(a, None, Opcode.PUSH_BATCH, hello("mailbox@0"))
    assert node_a == "mailbox@0" and list(pl.not_ready()) == ["no push link from mailbox node(s) mailbox@1"]
    pl.on_frame(b, None, Opcode.PUSH_BATCH, hello("mailbox@1"))
    assert list(pl.not_ready()) == []
    pl.on_closed(a, node_a)
    assert list(pl.not_ready()) == ["no push link from mailbox node(s) mailbox@0"]


def test_a_first_link_wakes_nobody_but_a_link_back_after_a_loss_wakes_its_nodes_devices():
    pl, conns = setup()
    link = object()
    node = pl.on_frame(link, None, Opcode.PUSH_BATCH, hello("mailbox@1"))
    assert [wakes(c) for c in conns] == [0, 0, 0, 0]  # devices logged in after it pulled anyway
    pl.on_closed(link, node)
    pl.on_frame(object(), None, Opcode.PUSH_BATCH, hello("mailbox@1"))
    assert [wakes(c) for c in conns] == [0, 1, 0, 1]  # shards 1 and 3 are served by mailbox@1


def test_a_superseding_link_and_a_wake_all_request_wake_the_named_shards():
    pl, conns = setup()
    pl.on_frame(object(), None, Opcode.PUSH_BATCH, hello("mailbox@0"))
    pl.on_frame(object(), None, Opcode.PUSH_BATCH, hello("mailbox@0"))  # the old link's frames may be lost
    assert [wakes(c) for c in conns] == [1, 0, 1, 0]
    pl.on_frame(object(), None, Opcode.PUSH_BATCH, hello("mailbox@1", wake_all=True))  # the node dropped pushes
    assert [wakes(c) for c in conns] == [1, 1, 1, 1]
    taken = internal_pb2.PushBatch(wake_all=True, node_id="mailbox@0", shards=[3]).SerializeToString()
    pl.on_frame(object(), "mailbox@0", Opcode.PUSH_BATCH, taken)  # a shard taken over by mailbox@0
    assert [wakes(c) for c in conns] == [1, 1, 1, 2]


def test_a_hello_without_a_node_id_is_refused_and_counted():
    metrics = GatewayMetrics()
    pl, conns = setup(metrics=metrics)
    anonymous = internal_pb2.PushBatch(hello=True, shards=[0]).SerializeToString()
    assert pl.on_frame(object(), None, Opcode.PUSH_BATCH, anonymous) is None
    assert metrics.value("qim_gateway_bad_push_batches_total") == 1
    assert list(pl.not_ready()) == ["no push link from mailbox node(s) mailbox@0, mailbox@1"]


def test_a_full_device_queue_drops_the_push_and_asks_for_a_wake_up_and_entries_go_out_as_a_position():
    online = OnlineRegistry()
    slow, ok = FakeConn(7, 0, queued=5 * 1024 * 1024), FakeConn(8, 0)
    online.register(slow)
    online.register(ok)
    entry = mailbox_pb2.MailboxEntry(mailbox_seq=1, message_id=b"m" * 16, body=b"x" * 100)
    huge = mailbox_pb2.MailboxEntry(mailbox_seq=2, message_id=b"h" * 16, body=b"y" * (256 * 1024 + 1))
    online.deliver(internal_pb2.PushBatch(tenant_id=bytes(16), targets=[  # a mailbox node from before 0033
        internal_pb2.PushBatch.Target(user_id=7, entries=[entry]),
        internal_pb2.PushBatch.Target(user_id=8, entries=[huge])]))
    assert slow.sent == [] and slow.wake_requests == 1
    (op, body), = ok.sent
    push = mailbox_pb2.PushEvents.FromString(body)
    assert op == Opcode.PUSH_EVENTS and (push.lane, push.mailbox_seq, list(push.message_ids)) == (8 % 7, 2, [b"h" * 16])
    assert push.entries == [] and len(body) < 64  # a position, never the body


def test_a_position_reaches_every_online_recipient_with_its_own_lane():
    online = OnlineRegistry()
    conns = [FakeConn(u, 0) for u in (10, 11, 17)]  # lanes 3, 4, 3
    for c in conns:
        online.register(c)
    batch = internal_pb2.PushBatch(tenant_id=bytes(16))
    batch.positions.add(mailbox_seq=(1 << 48) | 5, message_id=b"p" * 16, user_ids=[10, 11, 12, 17])  # 12 offline
    online.deliver(batch)
    got = [[(p.lane, p.mailbox_seq, list(p.message_ids)) for p in map(mailbox_pb2.PushEvents.FromString,
                                                                    (b for _, b in c.sent))] for c in conns]
    assert got == [[(3, (1 << 48) | 5, [b"p" * 16])], [(4, (1 << 48) | 5, [b"p" * 16])],
                   [(3, (1 << 48) | 5, [b"p" * 16])]]


async def test_a_device_whose_push_was_dropped_is_woken_when_its_queue_drains():
    gw = gateway()
    accepted: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_conn(reader, writer):
        accepted.set_result(FramedStream(reader, writer, chunk_bytes=CLIENT_CHUNK_BYTES))

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    peer = socket.socket()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024)
    peer.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(peer, server.sockets[0].getsockname())
    conn = ClientConnection(await accepted, gw).session
    conn.tenant, conn.user_id, conn.device_id, conn.shard, conn.lane = 0, 42, 1, 3, 5
    gw.online.register(conn)
    conn.send(Opcode.MAILBOX_BATCH, 9, os.urandom(3 * 1024 * 1024))  # a page the device reads slowly
    await asyncio.sleep(0.1)
    entry = mailbox_pb2.MailboxEntry(mailbox_seq=1, body=b"pushed")
    gw.online.deliver(internal_pb2.PushBatch(tenant_id=bytes(16), targets=[
        internal_pb2.PushBatch.Target(user_id=42, entries=[entry])]))
    frames, buf = [], b""
    async with asyncio.timeout(20):  # the device now reads everything
        while not any(op == Opcode.PUSH_EVENTS for op, _ in frames):
            buf += await loop.sock_recv(peer, 65536)
            while len(buf) >= FRAME_HEADER_LEN:
                _, _, flags, op, _, _, n, _ = struct.unpack_from(">HBBHHIII", buf)
                if len(buf) < FRAME_HEADER_LEN + n:
                    break
                frames.append((op, buf[FRAME_HEADER_LEN:FRAME_HEADER_LEN + n]))
                buf = buf[FRAME_HEADER_LEN + n:]
    pushes = [body for op, body in frames if op == Opcode.PUSH_EVENTS]
    assert pushes == [b""]  # the dropped push became one empty wake-up after the drain
    assert sum(1 for op, _ in frames if op == Opcode.MAILBOX_BATCH) > 100  # it came after the page's chunks
    peer.close()
    conn.stream.abort()
    server.close()
