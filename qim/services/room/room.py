"""One chatroom at its RoomWriter: room_seq, the replay ring, members, idempotent posts
(docs/design.md §7, §13 "Rooms"; docs/decisions/0045-rooms-phase-one-in-process-ring.md).

Rules (every one checked by tests/room/):
- room_seq grows by exactly one per event within the room's room_epoch; an event is a
  POST, a RECALL, or a JOINED / LEFT of a user while the room has at most
  MEMBERSHIP_EVENT_BROADCAST_MAX members (above it only member counts are sent);
- a member is one client connection (gateway link id, connection id), its user is the
  actor of its join; a user counts once however many of its connections joined;
- JOIN with `since` in this epoch replays every event after it the ring holds:
  `recovered` when that is all of them, else `truncated` with the first seq held; with
  `since` of another epoch: the whole ring, `truncated`; without: the newest `recent`;
- a post from a connection that has not joined is FORBIDDEN; a post whose
  client_message_id this user used before in this room (within ROOM_DEDUP_WINDOW_S and
  the last ROOM_DEDUP_ENTRIES posts) gets the original ROOM_ACK when its content is the
  same, CONFLICT when not; a recall names a POST of the same sender held by the ring
  (FORBIDDEN for another's, NOT_FOUND when gone);
- live events go out in one ROOM_PUSH per gateway link per flush (the node flushes once
  per event-loop turn: qim/services/room/book.py), never per member.
Nothing here awaits: a request is applied whole before the next one starts.
"""

from __future__ import annotations

import collections
import time
from typing import Callable, Optional, Protocol

from qim.consts import MEMBERSHIP_EVENT_BROADCAST_MAX, ROOM_DEDUP_ENTRIES, ROOM_DEDUP_WINDOW_S, ROOM_RECENT_MAX
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, room_pb2
from qim.services.room.ring import Entry, Ring

POST, RECALL, JOINED, LEFT = (room_pb2.RoomEvent.POST, room_pb2.RoomEvent.RECALL, room_pb2.RoomEvent.JOINED,
                              room_pb2.RoomEvent.LEFT)
MemberKey = tuple[int, int]  # (link id, connection id within that gateway)


class Link(Protocol):
    """What a room needs of a gateway link (qim/services/room/links.py GatewayLink)."""

    link_id: int

    def push(self, room: "Room", frame: bytes) -> None:
        """Queue one ROOM_PUSH frame body for the gateway (never blocks or raises)."""


class Room:
    """The state of (tenant, room_id) in epoch `epoch`. `ring_events`/`ring_bytes` bound
    the ring; `clock()` is unix ms, `monotonic()` seconds; `dirty(room)` is called when
    events wait for a flush; `counted(kind, evicted)` after each event (for metrics:
    its kind and how many old events it pushed out of the ring)."""

    def __init__(self, tenant: int, room_id: int, epoch: int, ring_events: int, ring_bytes: int,
                 dirty: Callable[["Room"], None], clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
                 monotonic: Callable[[], float] = time.monotonic,
                 counted: Callable[[int, int], None] = lambda kind, evicted: None) -> None:
        self.tenant, self.room_id, self.epoch = tenant, room_id, epoch
        self.tenant_id = tenant.to_bytes(16, "big")
        self.seq = 0  # the last room_seq of this epoch
        self.ring = Ring(ring_events, ring_bytes)
        self.members: dict[MemberKey, int] = {}  # member -> user
        self.users: collections.Counter[int] = collections.Counter()  # user -> its member connections
        self.links: dict[int, Link] = {}  # link id -> link, while one of its connections is a member
        self._per_link: collections.Counter[int] = collections.Counter()
        self._dedup: collections.OrderedDict[tuple[int, bytes], tuple[bytes, bytes, float]] = collections.OrderedDict()
        self._pending: list[bytes] = []
        self._dirty, self._clock, self._monotonic, self._counted = dirty, clock, monotonic, counted
        self.idle_since: Optional[float] = monotonic()  # no member since (None while it has members)

    @property
    def member_count(self) -> int:
        """Distinct users joined right now."""
        return len(self.users)

    # --- events ---------------------------------------------------------------------
    def _emit(self, kind: int, sender: int, name: str = "", cmid: bytes = b"", message_type: int = 0,
              custom_type: bytes = b"", body: bytes = b"", recalled_seq: int = 0) -> room_pb2.RoomEvent:
        self.seq += 1
        event = room_pb2.RoomEvent(room_seq=self.seq, kind=kind, sender_id=sender, sender_name=name,
                                   client_message_id=cmid, message_type=message_type, custom_type=custom_type,
                                   body=body, created_at_ms=self._clock(), recalled_seq=recalled_seq)
        entry = Entry.of(self.seq, event.SerializeToString(), sender, kind)
        self._counted(kind, self.ring.append(entry))
        if not self._pending:
            self._dirty(self)
        self._pending.append(entry.wire)
        return event

    def header(self, rejoin: bool = False) -> bytes:
        """The RoomEvents fields besides `events` (appended to the event fields)."""
        return room_pb2.RoomEvents(room_id=self.room_id, room_epoch=self.epoch, member_count=self.member_count,
                                   rejoin=rejoin).SerializeToString()

    def push_frame(self, events: bytes, rejoin: bool = False) -> bytes:
        """A ROOM_PUSH body carrying RoomEvents of `events` (concatenated event fields)."""
        return internal_pb2.RoomPush(tenant_id=self.tenant_id, room_id=self.room_id,
                                     events=events + self.header(rejoin)).SerializeToString()

    def flush(self) -> int:
        """Send the waiting events to every subscribed link in one frame each; how many links."""
        if not self._pending:
            return 0
        frame = self.push_frame(b"".join(self._pending))
        self._pending = []
        for link in list(self.links.values()):
            link.push(self, frame)
        return len(self.links)

    # --- members --------------------------------------------------------------------
    def join(self, link: Link, connection: int, user: int, name: str, req: room_pb2.JoinRoom) -> tuple[bytes, bool]:
        """Make (link, connection) a member and answer ROOM_JOINED (module doc): (its body,
        True when the connection was not a member yet). A JOINED event follows when the
        user was not a member yet and the room is small enough."""
        self.flush()  # events before the snapshot go to the links that were there
        reply = self._replay(req)
        key = (link.link_id, connection)
        new = key not in self.members
        if new:
            self.members[key] = user
            self._per_link[link.link_id] += 1
            self.links[link.link_id] = link
            self.users[user] += 1
            self.idle_since = None
            if self.users[user] == 1 and self.member_count <= MEMBERSHIP_EVENT_BROADCAST_MAX:
                self._emit(JOINED, user, name)
        reply.member_count = self.member_count
        return reply.SerializeToString(), new

    def _replay(self, req: room_pb2.JoinRoom) -> room_pb2.RoomJoined:
        out = room_pb2.RoomJoined(room_id=self.room_id, room_epoch=self.epoch, room_seq=self.seq,
                                  first_seq=self.ring.first_seq)
        if req.HasField("since"):
            since = req.since
            if since.room_epoch == self.epoch and since.room_seq > self.seq:
                raise RequestError(ErrorCode.INVALID_ARGUMENT,
                                   f"since.room_seq {since.room_seq} is ahead of the room ({self.seq})")
            if since.room_epoch == self.epoch and since.room_seq + 1 >= (self.ring.first_seq or self.seq + 1):
                out.recovered = True
                entries = self.ring.after(since.room_seq)
            else:  # another epoch (the ring it named is gone), or the ring wrapped past it
                out.truncated = True
                entries = self.ring.after(0)
        else:
            entries = self.ring.newest(min(req.recent, ROOM_RECENT_MAX))
        out.MergeFromString(b"".join(e.wire for e in entries))
        return out

    def leave(self, link_id: int, connection: int) -> bool:
        """Remove (link, connection); False when it was not a member. A LEFT event when it
        was the user's last connection and the room was small enough."""
        user = self.members.pop((link_id, connection), None)
        if user is None:
            return False
        was = self.member_count
        self._per_link[link_id] -= 1
        if self._per_link[link_id] <= 0:
            del self._per_link[link_id]
            self.links.pop(link_id, None)
        self.users[user] -= 1
        if self.users[user] <= 0:
            del self.users[user]
            if was <= MEMBERSHIP_EVENT_BROADCAST_MAX:
                self._emit(LEFT, user)
        if not self.members:
            self.idle_since = self._monotonic()
        return True

    def drop_link(self, link_id: int) -> int:
        """Every member of a gateway link that closed leaves; how many."""
        gone = [c for (lid, c) in self.members if lid == link_id]
        for connection in gone:
            self.leave(link_id, connection)
        return len(gone)

    # --- posts ----------------------------------------------------------------------
    def post(self, link_id: int, connection: int, user: int, name: str, req: room_pb2.RoomSend,
             identity: bytes, replaced: bool = False) -> tuple[bytes, bool]:
        """Apply a ROOM_SEND of a member: (ROOM_ACK body, True when it was a retry of an
        earlier post). FORBIDDEN (not joined, another's post), CONFLICT, NOT_FOUND.
        `replaced`: req.body is the send policy's replacement (the ACK says so, decision 0126)."""
        if (link_id, connection) not in self.members:
            raise RequestError(ErrorCode.FORBIDDEN, "join the room before posting to it")
        now = self._monotonic()
        while self._dedup:  # forget posts older than the window (oldest first)
            _, (_, _, at) = next(iter(self._dedup.items()))
            if now - at <= ROOM_DEDUP_WINDOW_S:
                break
            self._dedup.popitem(last=False)
        seen = self._dedup.get((user, req.client_message_id))
        if seen is not None:
            if seen[0] != identity:
                raise RequestError(ErrorCode.CONFLICT, "client_message_id reused with other content")
            return seen[1], True
        if req.HasField("recall"):
            event = self._recall(user, name, req)
        else:
            event = self._emit(POST, user, name, req.client_message_id, req.message_type, req.custom_type, req.body)
        ack = room_pb2.RoomAck(room_id=self.room_id, client_message_id=req.client_message_id, room_epoch=self.epoch,
                               room_seq=event.room_seq, created_at_ms=event.created_at_ms, replaced=replaced,
                               body=req.body if replaced else b"").SerializeToString()
        self._dedup[(user, req.client_message_id)] = (identity, ack, now)
        if len(self._dedup) > ROOM_DEDUP_ENTRIES:
            self._dedup.popitem(last=False)
        return ack, False

    def posted(self, user: int, cmid: bytes) -> bool:
        """This user's post with this client_message_id is held for retries (the dedup
        window): a retry gets its ROOM_ACK back (the send policy is not asked again)."""
        return (user, cmid) in self._dedup

    def _recall(self, user: int, name: str, req: room_pb2.RoomSend) -> room_pb2.RoomEvent:
        target = req.recall
        entry = self.ring.get(target.room_seq) if target.room_epoch == self.epoch else None
        if entry is None or entry.kind != POST:
            raise RequestError(ErrorCode.NOT_FOUND, "no such post in the room's ring (another epoch, or gone)")
        if entry.sender != user:
            raise RequestError(ErrorCode.FORBIDDEN, "only the sender may recall a post")
        old = room_pb2.RoomEvent.FromString(entry.event)
        old.body, old.recalled = b"", True
        self.ring.replace(Entry.of(entry.seq, old.SerializeToString(), entry.sender, entry.kind))
        return self._emit(RECALL, user, name, req.client_message_id, recalled_seq=target.room_seq)
