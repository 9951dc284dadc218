"""The gateway's half of the RoomWriter: the checks its declared calls name
(qim/wire/calls.py: `join_key`, `send_key`, `leave_key`, each returning the room
shard) and local membership and local fan-out (docs/design.md §13 "Rooms";
docs/decisions/0045-rooms-phase-one-in-process-ring.md): the row's LocalBackend
(qim/topology.py, qim/services/gateway/routes.py).

- The gateway's own RPC connection to a RoomWriter is its subscription to every room one
  of its connections joined there: the RoomWriter sends each flush of a room once per
  gateway (ROOM_PUSH), and this module queues its RoomEvents bytes, unchanged, to every
  member connection of that room here. One post to a room of 5,000 online members costs
  the RoomWriter one frame per gateway.
- A JOIN_ROOM makes the connection a local member before it is forwarded, so live events
  that arrive during the join reach it (the client merges them with the replay by seq);
  a join that fails undoes it. A LEAVE_ROOM, or the connection's end, removes it (the
  end also tells the RoomWriter, in the background). A ROOM_SEND of a connection that
  has not joined is FORBIDDEN here already. A connection joins at most
  QIM_ROOM_MAX_PER_CONNECTION rooms (FORBIDDEN past it).
- A member whose outbound queue holds more than ROOM_MEMBER_QUEUE_BYTES gets no room
  events (each drop counted) until it drained to half; then one ROOM_EVENTS with
  `rejoin` per room it missed events of: it joins again with its last position. Nobody
  else waits for it.
- When the connection to a RoomWriter drops, the rooms it served are gone from this
  gateway (the RoomWriter dropped this gateway's members with the connection): each
  member gets a ROOM_EVENTS with `rejoin`, and its JOIN_ROOM goes to the node that now
  serves the room (a restarted RoomWriter starts a new room_epoch).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from google.protobuf.message import DecodeError

from qim.consts import ROOM_MEMBER_QUEUE_BYTES
from qim.errors import ErrorCode, RequestError
from qim.net.transport import StreamClosed
from qim.proto.v1 import internal_pb2, room_pb2
from qim.protocol import Opcode
from qim.services.gateway.context import ClientSession, GatewayContext, RouteKey
from qim.topology import ROOM
from qim.wire.calls import calls_of
from qim.wire.room import check_join, check_room_id, check_send, room_shard
from qim.wire.validate import parse_request

logger = logging.getLogger(__name__)
RoomKey = tuple[int, int]  # (tenant, room_id)


def join_key(conn: ClientSession, body: bytes) -> int:
    """JOIN_ROOM at the gateway: a valid JoinRoom; the key is the room's shard."""
    req = parse_request(room_pb2.JoinRoom, body, "JOIN_ROOM")
    check_join(req)
    return room_shard(conn.tenant, req.room_id)


def send_key(conn: ClientSession, body: bytes) -> int:
    """ROOM_SEND at the gateway: a valid post or recall (QIM_MAX_MESSAGE_BODY); the key is the room's shard."""
    req = parse_request(room_pb2.RoomSend, body, "ROOM_SEND")
    check_send(req, conn.gw.config.max_body)
    return room_shard(conn.tenant, req.room_id)


def leave_key(conn: ClientSession, body: bytes) -> int:
    """LEAVE_ROOM at the gateway: a valid room id; the key is the room's shard."""
    req = parse_request(room_pb2.LeaveRoom, body, "LEAVE_ROOM")
    check_room_id(req.room_id)
    return room_shard(conn.tenant, req.room_id)


def room_of(opcode: int, body: bytes) -> int:
    """The room_id a JOIN_ROOM, ROOM_SEND or LEAVE_ROOM names (the body was checked):
    every request message of the RoomWriter's declared calls has `room_id`."""
    return calls_of(ROOM)[opcode].request.FromString(body).room_id  # type: ignore[attr-defined]


@dataclass
class LocalRoom:
    """The members here of one room served by the RoomWriter at `addr`."""

    addr: str
    members: dict[int, ClientSession] = field(default_factory=dict)  # conn_id -> its DeviceSession


def rejoin_body(room_id: int) -> bytes:
    """A ROOM_EVENTS body telling the member to join `room_id` again."""
    return room_pb2.RoomEvents(room_id=room_id, rejoin=True).SerializeToString()


class RoomFanout:
    """LocalBackend of the RoomWriter (module doc). `gateway` is the GatewayContext
    (context.py): `config.room_max_per_connection`, `router` (BackendRouter: `address()`,
    `call()`), `metrics`; the node calls `close()` when it stops (server.py)."""

    def __init__(self, gateway: GatewayContext, member_queue_bytes: int = ROOM_MEMBER_QUEUE_BYTES) -> None:
        self.gw = gateway
        self._m = gateway.metrics
        self._limit = member_queue_bytes
        self._rooms: dict[RoomKey, LocalRoom] = {}
        self._joined: dict[int, set[RoomKey]] = {}  # conn_id -> rooms joined
        self._gapped: dict[int, set[RoomKey]] = {}  # conn_id -> rooms it missed events of
        self._tasks: set[asyncio.Task] = set()
        self._members = 0  # member sessions over every room here (the gauge)

    # --- client requests ------------------------------------------------------------
    async def request(self, conn: ClientSession, opcode: int, key: RouteKey, body: bytes,
                      call: Callable[[], Awaitable[tuple[int, bytes]]]) -> tuple[int, bytes]:
        """JOIN_ROOM / ROOM_SEND / LEAVE_ROOM of `conn` (module doc); `call()` forwards."""
        rkey = (conn.tenant, room_of(opcode, body))
        joined = self._joined.get(conn.conn_id, set())
        if opcode == Opcode.ROOM_SEND:
            if rkey not in joined:
                raise RequestError(ErrorCode.FORBIDDEN, "join the room before posting to it")
            return await call()
        if opcode == Opcode.LEAVE_ROOM:
            self._remove(conn, rkey)
            return await call()
        if rkey not in joined and len(joined) >= self.gw.config.room_max_per_connection:
            raise RequestError(ErrorCode.FORBIDDEN, f"a connection joins at most "
                               f"{self.gw.config.room_max_per_connection} rooms (QIM_ROOM_MAX_PER_CONNECTION)")
        room = self._rooms.get(rkey)
        if room is None:
            room = self._rooms[rkey] = LocalRoom(self.gw.router.address(ROOM, key))
        was_member = conn.conn_id in room.members
        room.members[conn.conn_id] = conn  # live events from now on (merged by seq in the client)
        self._joined.setdefault(conn.conn_id, set()).add(rkey)
        self._members += not was_member
        self._count()
        try:
            reply = await call()
        except BaseException:
            if not was_member:
                self._remove(conn, rkey)
            raise
        if self._rooms.get(rkey) is not room:  # the RoomWriter's connection dropped meanwhile
            asyncio.get_running_loop().call_soon(self._notice, conn, rkey, "link_lost")  # after the reply
        return reply

    def _remove(self, conn: ClientSession, rkey: RoomKey) -> None:
        room = self._rooms.get(rkey)
        if room is not None and room.members.pop(conn.conn_id, None) is not None:
            self._members -= 1
            if not room.members:
                del self._rooms[rkey]
        joined = self._joined.get(conn.conn_id)
        if joined is not None:
            joined.discard(rkey)
            if not joined:
                del self._joined[conn.conn_id]
        self._count()

    def closed(self, conn: ClientSession) -> None:
        """`conn` ended: it leaves its rooms here and, in the background, at the RoomWriter."""
        self._gapped.pop(conn.conn_id, None)
        for rkey in list(self._joined.get(conn.conn_id, ())):
            self._remove(conn, rkey)
            self._spawn(self._leave(conn, rkey))

    async def _leave(self, conn: ClientSession, rkey: RoomKey) -> None:
        # imported here: routes.py loads this module's checks when it builds ROUTES
        from qim.services.gateway.routes import ROUTES, forward

        body = room_pb2.LeaveRoom(room_id=rkey[1]).SerializeToString()
        route = ROUTES[Opcode.LEAVE_ROOM]
        try:
            await forward(self.gw.router, route, route.check(conn, body), conn.actor(), Opcode.LEAVE_ROOM, body,
                          conn.conn_id)
        except RequestError:  # the RoomWriter drops this gateway's members with the connection anyway
            self._m.room_leaves_failed.inc()

    # --- frames from RoomWriters ------------------------------------------------------
    def on_push(self, addr: str, body: bytes) -> None:
        """A ROOM_PUSH: its RoomEvents to every member here of the room."""
        try:
            push = internal_pb2.RoomPush.FromString(body)
        except DecodeError:
            self._m.room_stale.inc()
            return
        rkey = (int.from_bytes(push.tenant_id, "big"), push.room_id)
        room = self._rooms.get(rkey)
        if room is None or room.addr != addr:
            self._m.room_stale.inc()
            return
        for conn_id, conn in list(room.members.items()):
            gapped = self._gapped.get(conn_id)
            if (gapped is not None and rkey in gapped) or conn.queued_bytes > self._limit:
                self._m.room_dropped.inc()
                if gapped is None:
                    gapped = self._gapped[conn_id] = set()
                    self._spawn(self._after_drain(conn))
                gapped.add(rkey)
                continue
            try:
                conn.send(Opcode.ROOM_EVENTS, 0, push.events)
                self._m.room_frames.inc()
            except (StreamClosed, ConnectionError):
                pass  # closing: closed() removes it

    def on_lost(self, addr: str) -> None:
        """The connection to the RoomWriter at `addr` dropped: its rooms are gone here;
        every member is told to join again."""
        for rkey, room in [(k, r) for k, r in self._rooms.items() if r.addr == addr]:
            del self._rooms[rkey]
            self._members -= len(room.members)
            for conn_id, conn in room.members.items():
                joined = self._joined.get(conn_id)
                if joined is not None:
                    joined.discard(rkey)
                    if not joined:
                        del self._joined[conn_id]
                self._notice(conn, rkey, "link_lost")
        self._count()

    async def _after_drain(self, conn: ClientSession) -> None:
        try:
            await conn.wait_writable(self._limit // 2)
        finally:
            gapped = self._gapped.pop(conn.conn_id, set())
        for rkey in gapped:
            if rkey in self._joined.get(conn.conn_id, ()):
                self._notice(conn, rkey, "slow")

    def _notice(self, conn: ClientSession, rkey: RoomKey, reason: str) -> None:
        try:
            conn.send(Opcode.ROOM_EVENTS, 0, rejoin_body(rkey[1]))
            self._m.room_rejoins.labels(reason=reason).inc()
        except (StreamClosed, ConnectionError):
            pass

    # --- plumbing ---------------------------------------------------------------------
    def _count(self) -> None:
        self._m.rooms.set(len(self._rooms))
        self._m.room_members.set(self._members)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Cancel the background leaves and drain watchers (the node stops)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
