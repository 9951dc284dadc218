"""ROOM_CALL at the RoomWriter: JOIN_ROOM, ROOM_SEND, LEAVE_ROOM of one gateway link
(docs/protocol.md "Rooms"; docs/decisions/0045-rooms-phase-one-in-process-ring.md).

Every request is checked again here whoever sent it (qim/wire/room.py: the gateway's
checks), the actor is the envelope's (from AUTH, never from the request), and the room
must belong to this node: its room shard mod QIM_ROOM_ADDRS' length is this node's
index, else UNAVAILABLE (a gateway with another list: the operator's error, refused
rather than served by two owners). Nothing awaits between reading a room and answering
(Room), so a join's snapshot and the live events after it stay in order on the link. With
a send policy (QIM_SEND_POLICY, docs/decisions/0099) a post awaits its verdict before it
reads the room, in its room's line (qim/policy/line.py), so posts still apply in arrival
order.
"""

from __future__ import annotations

import logging
from typing import Optional

from qim._core import ids
from qim.errors import ErrorCode, RequestError
from qim.policy import PolicySeam, SendFacts
from qim.policy.line import Line
from qim.proto.v1 import internal_pb2, room_pb2
from qim.services.room.book import RoomBook
from qim.services.room.links import GatewayLink
from qim.services.room.metrics import RoomMetrics
from qim.services.room.room import Room
from qim.topology import ROOM
from qim.wire.calls import Dispatch
from qim.wire.room import check_join, check_room_id, check_send, room_shard, send_identity
from qim.wire.validate import parse_request

logger = logging.getLogger(__name__)


async def _posted(room: Optional[Room], user: int, cmid: bytes) -> bool:
    """The room (if still held) applied this user's post with this cmid (its commit fact)."""
    return room is not None and room.posted(user, cmid)


class RoomService:
    """Serves the rooms of node `node_index` of `node_count` from `book`; posts up to
    `max_body` bytes (QIM_MAX_MESSAGE_BODY)."""

    def __init__(self, book: RoomBook, node_index: int, node_count: int, max_body: int,
                 metrics: RoomMetrics, policy: Optional[PolicySeam] = None) -> None:
        self.book = book
        self.node_index, self.node_count, self.max_body = node_index, node_count, max_body
        self._m = metrics
        self.policy = policy if policy is not None else PolicySeam(None)  # QIM_SEND_POLICY (0099)
        self._line = Line()  # posts of a room in arrival order while their verdicts are asked
        self.member_total = 0  # member connections over every room (the gauge)
        self._dispatch = Dispatch(ROOM, self)

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
        return await self._dispatch(call.opcode, call.upstream, link, call, tenant)  # qim/wire/calls.py

    async def join(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int, req: room_pb2.JoinRoom) -> bytes:
        """JOIN_ROOM: the snapshot or replay (RoomJoined bytes); the link carries the member from now on."""
        check_join(req)
        room = await self.book.open(tenant, req.room_id, self._shard(tenant, req.room_id))
        reply, new = room.join(link, call.connection, call.actor.user_id, call.actor.display_name, req)
        link.rooms[(tenant, req.room_id)] = room
        self._m.joins.labels(replay="since" if req.HasField("since") else "fresh").inc()
        self.member_total += new
        self._m.members.set(self.member_total)
        return reply

    async def post(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int, req: room_pb2.RoomSend) -> bytes:
        """ROOM_SEND: a post or recall (RoomAck bytes); through the send policy when one is
        set (a recall never asks it). Without one nothing awaits (module doc)."""
        if self.policy.active and not req.HasField("recall"):
            return await self._send_checked(link, call, tenant, req)
        return self._send(link, call, tenant, req)

    def _joined_room(self, link: GatewayLink, tenant: int, req: room_pb2.RoomSend) -> Room:
        check_send(req, self.max_body)
        self._shard(tenant, req.room_id)
        room = self.book.get(tenant, req.room_id)
        if room is None or (tenant, req.room_id) not in link.rooms:
            raise RequestError(ErrorCode.FORBIDDEN, "join the room before posting to it")
        return room

    async def _send_checked(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int,
                            req: room_pb2.RoomSend) -> bytes:
        """A post through the send policy (docs/decisions/0099): its place in the room's
        line first (arrival order), the verdict unless the room already holds this post
        (a retry of an accepted one gets its ROOM_ACK whatever the policy says now), then
        applied whole once the earlier posts are."""
        place = self._line.place((tenant, req.room_id))
        try:
            room = self._joined_room(link, tenant, req)
            user, cmid = call.actor.user_id, req.client_message_id
            replacement = None
            if not room.posted(user, cmid):
                facts = SendFacts(kind="room", tenant=tenant, user_id=user, device_id=call.actor.device_id,
                                  conversation_id=ids.conversation_id_room(tenant, req.room_id),
                                  message_type=req.message_type, custom_type=req.custom_type, body=req.body,
                                  client_message_id=cmid, room_id=req.room_id)
                replacement = await self.policy.check(facts, lambda: _posted(self.book.get(tenant, req.room_id), user,
                                                                             cmid))
            await place.wait()
            # read again: the room may have moved meanwhile; a replaced body (decision 0126) is
            # posted under the identity of the sent one, so a retry is answered from the dedup window
            return self._send(link, call, tenant, req, replacement)
        finally:
            place.release()

    def _send(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int, req: room_pb2.RoomSend,
              replacement: Optional[bytes] = None) -> bytes:
        room = self._joined_room(link, tenant, req)
        identity = send_identity(req)
        if replacement is not None and len(replacement) <= self.max_body:
            sent, req = req, room_pb2.RoomSend()
            req.CopyFrom(sent)
            req.body = replacement
        elif replacement is not None:
            raise RequestError(ErrorCode.POLICY_REFUSED, "the moderator's replacement exceeds the body limit")
        ack, retry = room.post(link.link_id, call.connection, call.actor.user_id, call.actor.display_name, req,
                               identity, replacement is not None)
        if retry:
            self._m.retries.inc()
        return ack

    async def leave(self, link: GatewayLink, call: internal_pb2.RoomCall, tenant: int, req: room_pb2.LeaveRoom) -> bytes:
        """LEAVE_ROOM: the connection leaves the room (RoomLeft bytes: the members left)."""
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
