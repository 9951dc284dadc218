"""Helpers of the chatroom end-to-end tests (tests/e2e/test_rooms*.py): SDK clients with
every event recorded, a frame-level room client, and the checks of what an app was told
written apart from qim/sdk/rooms.py (they read only the events, never the SDK's state)."""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Optional

import redis

from qim.proto.v1 import common_pb2, room_pb2
from qim.protocol import Opcode
from qim.sdk import RoomEventsAdded, RoomStateChanged
from tests.e2e.rawclient import RawClient
from tests.e2e.sdkclient import client as sdk_client


def room_id() -> int:
    """A fresh room of its own for each test."""
    return random.getrandbits(62) + 1


async def member(stack, tmp_path, user: int, **kw):
    """A connected SDK Client of `user` (every event in `c.told`)."""
    c = await sdk_client(stack, tmp_path, user, **kw)
    await c.connect()
    return c


def told(c, room: int) -> list:
    """Every RoomEventsAdded `c` was told for `room`, in order."""
    return [e for e in c.told.events if isinstance(e, RoomEventsAdded) and e.room_id == room]


def posts(c, room: int) -> list[bytes]:
    """The bodies of every post `c` was told in `room`, in the order told."""
    return [m.body for e in told(c, room) for m in e.events if m.kind == "post"]


def positions(c, room: int) -> list[tuple[int, int]]:
    """(room_epoch, room_seq) of every event told, in order."""
    return [(m.room_epoch, m.room_seq) for e in told(c, room) for m in e.events]


def states(c, room: int) -> list[str]:
    """The RoomStateChanged states `c` was told for `room`."""
    return [e.state for e in c.told.events if isinstance(e, RoomStateChanged) and e.room_id == room]


def in_order_once(c, room: int) -> None:
    """Positions strictly increase within each epoch and no (epoch, seq) is told twice."""
    seen = positions(c, room)
    assert len(seen) == len(set(seen)), f"an event told twice: {seen}"
    last: dict[int, int] = {}
    for epoch, seq in seen:
        assert seq > last.get(epoch, 0), f"out of order in epoch {epoch}: {seen}"
        last[epoch] = seq


async def until(predicate, timeout: float = 20.0, what: str = "") -> None:
    """Wait until predicate() holds (polling); AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.05)


class RawRoomClient(RawClient):
    """A frame-level client of rooms (no SDK logic): requests, and ROOM_EVENTS kept in `pushes`."""

    async def room(self, opcode: int, message) -> tuple[int, object]:
        """One room request -> (reply opcode, parsed reply)."""
        op, body = await self.request(opcode, message.SerializeToString())
        if op == Opcode.ERROR:
            return op, body
        table = {Opcode.ROOM_JOINED: room_pb2.RoomJoined, Opcode.ROOM_ACK: room_pb2.RoomAck,
                 Opcode.ROOM_LEFT: room_pb2.RoomLeft}
        return op, table[op].FromString(body)

    async def join(self, room: int, since: Optional[tuple[int, int]] = None, recent: int = 0):
        req = room_pb2.JoinRoom(room_id=room, recent=recent)
        if since is not None:
            req.since.room_epoch, req.since.room_seq = since
        return await self.room(Opcode.JOIN_ROOM, req)

    async def post(self, room: int, body: bytes, cmid: Optional[bytes] = None, **kw):
        return await self.room(Opcode.ROOM_SEND, room_pb2.RoomSend(
            room_id=room, client_message_id=cmid or os.urandom(16), message_type=kw.pop("message_type", 1),
            body=body, **kw))

    def room_events(self) -> list[room_pb2.RoomEvents]:
        """Every ROOM_EVENTS received so far (in arrival order)."""
        return [room_pb2.RoomEvents.FromString(b) for op, b in self.pushes if op == Opcode.ROOM_EVENTS]

    async def drain(self, seconds: float = 0.3) -> None:
        """Read server frames for a while (they land in `pushes`)."""
        try:
            while True:
                item = await asyncio.wait_for(self.stream.read_frame(), seconds)
                if item is None:
                    return
                if item[1] == 0:
                    self.pushes.append((item[0], item[2]))
        except asyncio.TimeoutError:
            return


async def join_all(room: int, *clients: RawRoomClient) -> None:
    """Each of `clients` joins `room`; AssertionError with the reply where it is not ROOM_JOINED."""
    for c in clients:
        op, reply = await c.join(room)
        assert op == Opcode.ROOM_JOINED, reply


def error_code(reply) -> int:
    """The code of an ERROR reply (common_pb2.Error)."""
    assert isinstance(reply, (bytes, common_pb2.Error)), reply
    return (reply if isinstance(reply, common_pb2.Error) else common_pb2.Error.FromString(reply)).code


def redis_keys_naming(stack, *needles: str) -> list[str]:
    """Every Redis key of the stack whose name contains one of `needles` (SCAN)."""
    host, port = stack.env["QIM_REDIS_ADDR"].rsplit(":", 1)
    r = redis.Redis(host=host, port=int(port))
    try:
        return [k.decode() for k in r.scan_iter(count=1000) if any(n in k.decode() for n in needles)]
    finally:
        r.close()
