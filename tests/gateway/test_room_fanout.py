"""The gateway's half of chatrooms without a network (qim/services/gateway/backends/room.py):
one ROOM_PUSH reaches every local member once, bytes unchanged; a slow member alone
misses events (counted) and is told to re-join once it drained, nobody else waits; a
post from a connection that has not joined is FORBIDDEN before any backend; a failed
join undoes the local membership; a lost RoomWriter link tells every member to re-join."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, room_pb2
from qim.protocol import Opcode
from qim.services.gateway.backends.room import RoomFanout
from qim.services.gateway.metrics import GatewayMetrics

ROOM, ADDR = 4242, "127.0.0.1:7106"


class Conn:
    """A client connection stand-in: what it was sent, a settable outbound backlog."""

    def __init__(self, conn_id: int) -> None:
        self.tenant, self.conn_id, self.user_id = 0, conn_id, 1000 + conn_id
        self.sent: list[tuple[int, bytes]] = []
        self.queued_bytes = 0
        self.drained = asyncio.Event()

    async def wait_writable(self, limit: int) -> None:
        await self.drained.wait()

    def send(self, opcode: int, request_id: int, body: bytes) -> None:
        assert request_id == 0
        self.sent.append((opcode, body))

    def actor(self) -> internal_pb2.Actor:
        return internal_pb2.Actor(user_id=self.user_id)


def fanout() -> RoomFanout:
    gw = SimpleNamespace(config=SimpleNamespace(room_max_per_connection=2),
                         router=SimpleNamespace(address=lambda backend, key: ADDR),
                         metrics=GatewayMetrics(CollectorRegistry()))
    return RoomFanout(gw, member_queue_bytes=1000)


def push(*bodies: bytes) -> tuple[bytes, bytes]:
    events = room_pb2.RoomEvents(room_id=ROOM, room_epoch=7, events=[
        room_pb2.RoomEvent(room_seq=i + 1, kind=room_pb2.RoomEvent.POST, body=b) for i, b in enumerate(bodies)])
    wire = events.SerializeToString()
    return internal_pb2.RoomPush(room_id=ROOM, events=wire).SerializeToString(), wire


async def joined(f: RoomFanout, conn: Conn, room: int = ROOM) -> None:
    async def call():
        return Opcode.ROOM_JOINED, b""
    await f.request(conn, Opcode.JOIN_ROOM, 0, room_pb2.JoinRoom(room_id=room).SerializeToString(), call)


async def test_one_push_reaches_every_member_once_and_a_slow_one_is_told_to_rejoin_after_draining():
    f = fanout()
    conns = [Conn(i) for i in range(1, 6)]
    for c in conns:
        await joined(f, c)
    body, wire = push(b"one")
    f.on_push(ADDR, body)
    assert all(c.sent == [(Opcode.ROOM_EVENTS, wire)] for c in conns)  # the RoomWriter's bytes, unchanged

    slow = conns[0]
    slow.queued_bytes = 5000  # above the member limit
    body2, wire2 = push(b"two")
    f.on_push(ADDR, body2)
    f.on_push(ADDR, push(b"three")[0])
    assert slow.sent == [(Opcode.ROOM_EVENTS, wire)]  # dropped for it alone
    assert all(c.sent[1] == (Opcode.ROOM_EVENTS, wire2) and len(c.sent) == 3 for c in conns[1:])
    assert f._m.room_dropped._value.get() == 2
    slow.queued_bytes = 0
    f.on_push(ADDR, push(b"four")[0])
    assert len(slow.sent) == 1  # still gapped until it drained: no event after a hole
    slow.drained.set()
    for _ in range(5):
        await asyncio.sleep(0)
    notice = room_pb2.RoomEvents.FromString(slow.sent[-1][1])
    assert len(slow.sent) == 2 and notice.room_id == ROOM and notice.rejoin  # re-join: the ring replays the gap


async def test_post_without_join_is_forbidden_before_any_backend_and_the_join_cap_holds():
    f = fanout()
    c = Conn(1)
    called = []

    async def call():
        called.append(1)
        return Opcode.ROOM_ACK, b""
    post = room_pb2.RoomSend(room_id=ROOM, client_message_id=b"x" * 16, message_type=1, body=b"hi")
    with pytest.raises(RequestError) as err:
        await f.request(c, Opcode.ROOM_SEND, 0, post.SerializeToString(), call)
    assert err.value.code == ErrorCode.FORBIDDEN and not called
    await joined(f, c, 1)
    await joined(f, c, 2)
    with pytest.raises(RequestError) as err:
        await joined(f, c, 3)
    assert err.value.code == ErrorCode.FORBIDDEN  # QIM_ROOM_MAX_PER_CONNECTION


async def test_a_failed_join_undoes_the_membership_and_a_lost_link_tells_every_member():
    f = fanout()
    c, d = Conn(1), Conn(2)

    async def refused():
        raise RequestError(ErrorCode.UNAVAILABLE, "room node down")
    with pytest.raises(RequestError):
        await f.request(c, Opcode.JOIN_ROOM, 0, room_pb2.JoinRoom(room_id=ROOM).SerializeToString(), refused)
    f.on_push(ADDR, push(b"x")[0])
    assert c.sent == []  # not a member after the failed join
    await joined(f, c)
    await joined(f, d)
    f.on_lost(ADDR)
    for conn in (c, d):
        (op, body), = conn.sent
        assert op == Opcode.ROOM_EVENTS and room_pb2.RoomEvents.FromString(body).rejoin
    f.on_push(ADDR, push(b"after")[0])
    assert len(c.sent) == 1 and f._m.room_stale._value.get() == 2  # no room here: before the join, after the loss
