"""ROOM_CALL at the RoomWriter: JOIN_ROOM, ROOM_SEND, LEAVE_ROOM of one gateway link
(docs/protocol.md "Rooms"; docs/decisions/0045-rooms-phase-one-in-process-ring.md).

Every request is checked again here whoever sent it (qim/wire/room.py: the gateway's
checks), the actor is the envelope's (from AUTH, never from the request), and the room
must belong to this node: its room shard mod QIM_ROOM_ADDRS' length is this node's
index, else UNAVAILABLE (a gateway with another list: the operator's error, refused
rather than served by two owners). Nothing awaits between reading a room and answering
(Room), so a join's snapshot and the live events after it stay in order on the link.
"""

from __future__ import annotations

import logging

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, room_pb2
from qim.protocol import Opcode
from qim.services.room.book import RoomBook
from qim.services.room.links import GatewayLink
from qim.services.room.metrics import RoomMetrics
from qim.wire.room import check_join, check_room_id, check_send, room_shard, send_identity
from qim.wire.validate import parse_request

logger = logging.getLogger(__name__)


class RoomService:
    """Serves the rooms of node `node_index` of `node_count` from `book`; posts up to
    `max_body` bytes (QIM_MAX_MESSAGE_BODY)."""

    def __init__(self, book: RoomBook, node_index: int, node_count: int, max_body: int,
                 metrics: RoomMetrics) -> None:
        self.book = book
        self.node_index, self.node_count, self.max_body = node_index, node_count, max_body
        self._m = metrics
        self.member_total = 0  # member connections over every room (the gauge)

    def _shard(self, tenant: int, room_id: int) -> int:
        shard = room_shard(tenant, room_id)
        if shard % self.node_count != self.node_index:
            raise RequestError(ErrorCode.UNAVAILABLE, f"room shard {shard} is not served by room node "
                               f"{self.node_index} of {self.node_count} (QIM_ROOM_ADDRS differs)")
        return shard

    async def handle(self, link: GatewayLink, body: bytes) -> tuple[int, bytes]:
        """One ROOM_CALL -> (ROOM_JOINED | ROOM_ACK | ROOM_LEFT, body); RequestError otherwise."""
        try:
            return await self._handle(link, body)
        except RequestError as exc:
            self._m.refused.labels(code=exc.code.name).inc()
            raise

    async def _handle(self, link: GatewayLink, body: bytes) -> tuple[int, bytes]:
        call = parse_request(internal_pb2.RoomCall, body, "ROOM_CALL")
        tenant = int.from_bytes(call.actor.tenant_id, "big")
        if not call.actor.user_id:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "ROOM_CALL without an actor")
        if call.opcode == Opcode.JOIN_ROOM:
            return Opcode.ROOM_JOINED, await self._join(link, call, tenant)
        if call.opcode == Opcode.ROOM_SEND:
            return Opcode.ROOM_ACK, self._send(link, call, tenant)
        if call.opcode == Opcode.LEAVE_ROOM:
            return Opcode.ROOM_LEFT, self._leave(link, call, tenant)
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"ROOM_CALL does not carry opcode 0x{call.opcode:04x}")

    async def _join(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int) -> bytes:
        req = parse_request(room_pb2.JoinRoom, call.upstream, "JOIN_ROOM")
        check_join(req)
        room = await self.book.open(tenant, req.room_id, self._shard(tenant, req.room_id))
        reply, new = room.join(link, call.connection, call.actor.user_id, call.actor.display_name, req)
        link.rooms[(tenant, req.room_id)] = room
        self._m.joins.labels(replay="since" if req.HasField("since") else "fresh").inc()
        self.member_total += new
        self._m.members.set(self.member_total)
        return reply

    def _send(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int) -> bytes:
        req = parse_request(room_pb2.RoomSend, call.upstream, "ROOM_SEND")
        check_send(req, self.max_body)
        self._shard(tenant, req.room_id)
        room = self.book.get(tenant, req.room_id)
        if room is None or (tenant, req.room_id) not in link.rooms:
            raise RequestError(ErrorCode.FORBIDDEN, "join the room before posting to it")
        ack, retry = room.post(link.link_id, call.connection, call.actor.user_id, call.actor.display_name, req,
                               send_identity(req))
        if retry:
            self._m.retries.inc()
        return ack

    def _leave(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int) -> bytes:
        req = parse_request(room_pb2.LeaveRoom, call.upstream, "LEAVE_ROOM")
        check_room_id(req.room_id)
        self._shard(tenant, req.room_id)
        room = self.book.get(tenant, req.room_id)
        count = 0
        if room is not None:
            self.member_total -= room.leave(link.link_id, call.connection)
            if link.link_id not in room.links:
                link.rooms.pop((tenant, req.room_id), None)
            count = room.member_count
        self._m.members.set(self.member_total)
        return room_pb2.RoomLeft(room_id=req.room_id, member_count=count).SerializeToString()

    def link_closed(self, link: GatewayLink) -> None:
        """A gateway's connection closed: every member it carried leaves every room."""
        for room in link.rooms.values():
            self.member_total -= room.drop_link(link.link_id)
        link.rooms.clear()
        link.close()
        self._m.members.set(self.member_total)
