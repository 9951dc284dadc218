"""Chatrooms in the SDK (docs/sdk.md "Chatrooms"; docs/protocol.md "Rooms"): join,
leave, post, recall, and the events of every joined room told once, in room_seq order.

State is in memory only (qim/sdk/room_events.py): per room its position (room_epoch,
room_seq), whether a join is in flight, the live frames that arrived meanwhile, and the
(sender, client_message_id) of the posts already told (a post re-sent into a new epoch
after its RoomWriter was lost is told once). Rules:
- a join answers with a replay ending at `RoomJoined.room_seq`; live frames that came
  during the join are merged after it: those of the joined epoch above that seq, in
  order, the rest dropped;
- a live event at last + 1 is told, one at or below is dropped, one above (a gap) or of
  another epoch, and a `rejoin` notice, make the SDK join again with its last position;
  so does every reconnect (after the mailbox sync). The replay of a re-join is told with
  `truncated` when the server no longer had everything since the last position;
- posts get a random 16-byte client_message_id (rooms keep nothing durable) and are
  retried with it on UNAVAILABLE, RATE_LIMITED and a lost connection (after the room is
  joined again) until the send timeout: a retry the RoomWriter recognises gets the
  original ROOM_ACK.
Errors: SendRefused (a post the server would refuse: nothing sent), ServerError
(FORBIDDEN, INVALID_ARGUMENT, CONFLICT, NOT_FOUND, or a transient code past the
budget), NotConnected, SendTimeout; RequestError(INVALID_ARGUMENT) for a bad room_id.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any, Optional

from qim.consts import MESSAGE_TYPE_TEXT, ROOM_DEDUP_ENTRIES
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import room_pb2
from qim.protocol import Opcode
from qim.sdk.events import ConnectionLost, NotConnected, SendRefused, SendTimeout, ServerError
from qim.sdk.retry import RETRYABLE, Backoff
from qim.sdk.room_events import RoomAck, RoomEventsAdded, RoomInfo, RoomMessage, RoomStateChanged
from qim.wire.room import check_room_id, check_send

logger = logging.getLogger(__name__)
RECENT_KEPT = 1000  # events of each room kept for `Rooms.events()` (the app's view)


@dataclass
class _Room:
    room_id: int
    recent: int = 0
    epoch: int = 0
    seq: int = 0
    member_count: int = 0
    info: Optional[RoomInfo] = None
    joined: asyncio.Event = field(default_factory=asyncio.Event)
    joining: bool = False
    again: bool = False  # another join was asked for while one ran
    buffered: list[room_pb2.RoomEvents] = field(default_factory=list)
    told: collections.OrderedDict = field(default_factory=collections.OrderedDict)  # (sender, cmid) -> None
    kept: collections.deque = field(default_factory=lambda: collections.deque(maxlen=RECENT_KEPT))


def _refuse_early(req: room_pb2.RoomSend, max_body: int) -> None:
    """SendRefused (nothing sent) for what the server would refuse (qim/wire/room.py)."""
    try:
        check_send(req, max_body)
    except RequestError as exc:
        raise SendRefused(exc.code, exc.message) from None


class Rooms:
    """The rooms of one ClientRuntime `rt` (its `request`, `max_body_bytes`,
    `send_timeout`, `retry_budget_s`, and its core's `emit`, `after_sync`, `on_room_events`)."""

    def __init__(self, rt: Any) -> None:
        self._rt = rt
        self._rooms: dict[int, _Room] = {}
        self._tasks: set[asyncio.Task] = set()

    def attach(self) -> None:
        """Hook into the runtime: re-join after every (re)connect, live frames."""
        self._rt.core.after_sync.append(self._after_sync)
        self._rt.core.on_room_events = self.on_frame

    # --- the app's calls ------------------------------------------------------------
    async def join(self, room_id: int, recent: int = 0) -> RoomInfo:
        """Join `room_id` (the newest `recent` events are told first); a room joined
        already is joined again from its position. The RoomInfo of the join."""
        check_room_id(room_id)
        room = self._rooms.get(room_id)
        if room is None:
            room = self._rooms[room_id] = _Room(room_id, recent)
        await self._join(room)
        assert room.info is not None
        return room.info

    async def leave(self, room_id: int) -> int:
        """Leave `room_id` (its state is forgotten); the member count after it."""
        check_room_id(room_id)
        room = self._rooms.pop(room_id, None)
        if room is not None:
            self._rt.core.emit(RoomStateChanged(room_id, "left", room.member_count, "left by the app"))
        body = room_pb2.LeaveRoom(room_id=room_id).SerializeToString()
        try:
            _, reply = await self._rt.request(Opcode.LEAVE_ROOM, body)
        except (ConnectionLost, NotConnected):
            return 0  # a lost connection left every room
        return room_pb2.RoomLeft.FromString(reply).member_count

    async def send(self, room_id: int, body: bytes, message_type: int = MESSAGE_TYPE_TEXT,
                   custom_type: bytes = b"", timeout: Optional[float] = None) -> RoomAck:
        """Post to a joined room (module doc for retries). ServerError FORBIDDEN when
        the room is not joined; the shape checks of docs/protocol.md before any frame."""
        req = room_pb2.RoomSend(room_id=room_id, client_message_id=secrets.token_bytes(16),
                                message_type=message_type, custom_type=custom_type, body=body)
        _refuse_early(req, self._rt.max_body_bytes)
        return await self._post(req, timeout)

    async def recall(self, room_id: int, room_epoch: int, room_seq: int, timeout: Optional[float] = None) -> RoomAck:
        """Recall this user's post at (room_epoch, room_seq). ServerError FORBIDDEN (not
        ours), NOT_FOUND (no longer in the room's ring, or another epoch)."""
        req = room_pb2.RoomSend(room_id=room_id, client_message_id=secrets.token_bytes(16))
        req.recall.room_epoch, req.recall.room_seq = room_epoch, room_seq
        _refuse_early(req, self._rt.max_body_bytes)
        return await self._post(req, timeout)

    def events(self, room_id: int) -> list[RoomMessage]:
        """The newest events told for `room_id` (at most RECENT_KEPT), oldest first."""
        room = self._rooms.get(room_id)
        return list(room.kept) if room is not None else []

    def info(self, room_id: int) -> Optional[RoomInfo]:
        """The last join's RoomInfo of a joined room (None when not joined)."""
        room = self._rooms.get(room_id)
        return room.info if room is not None else None

    @property
    def joined(self) -> list[int]:
        """The rooms this client is in (joined, or joining again)."""
        return list(self._rooms)

    # --- joins ----------------------------------------------------------------------
    async def _join(self, room: _Room) -> None:
        if room.joining:  # single flight: the running join goes again when it ends
            room.again = True
            await room.joined.wait()
            return
        room.joining = True
        room.joined.clear()
        self._rt.core.emit(RoomStateChanged(room.room_id, "rejoining" if room.epoch else "joining", room.member_count))
        backoff = Backoff(budget=self._rt.retry_budget_s)
        try:
            while True:
                room.again = False
                req = room_pb2.JoinRoom(room_id=room.room_id, recent=0 if room.epoch else room.recent)
                if room.epoch:
                    req.since.room_epoch, req.since.room_seq = room.epoch, room.seq
                try:
                    _, body = await self._rt.request(Opcode.JOIN_ROOM, req.SerializeToString())
                except ServerError as exc:
                    if exc.code not in RETRYABLE:
                        raise
                    await backoff.wait(exc)
                    continue
                self._joined(room, room_pb2.RoomJoined.FromString(body))
                if not room.again:
                    break
        except BaseException as exc:
            room.buffered.clear()
            if self._rooms.get(room.room_id) is room and not isinstance(exc, (ConnectionLost, NotConnected)):
                del self._rooms[room.room_id]  # refused for good: not a member any more
                self._rt.core.emit(RoomStateChanged(room.room_id, "left", room.member_count, str(exc)))
            raise
        finally:
            room.joining = False
        room.joined.set()
        self._rt.core.emit(RoomStateChanged(room.room_id, "joined", room.member_count))

    def _joined(self, room: _Room, reply: room_pb2.RoomJoined) -> None:
        """Apply a ROOM_JOINED, then the live frames that came during the join."""
        room.epoch, room.seq, room.member_count = reply.room_epoch, 0, reply.member_count
        room.info = RoomInfo(room.room_id, reply.room_epoch, reply.room_seq, reply.member_count, reply.recovered,
                             reply.truncated, reply.first_seq)
        if reply.events:
            room.seq = reply.events[0].room_seq - 1
        self._tell(room, list(reply.events), truncated=reply.truncated, first_seq=reply.first_seq)
        room.seq = reply.room_seq
        buffered, room.buffered = room.buffered, []
        for frame in buffered:
            if frame.room_epoch == room.epoch and not frame.rejoin:
                self._live(room, frame)
            elif frame.rejoin or frame.room_epoch != room.epoch:
                room.again = True  # it happened after the join was served: join once more

    # --- live frames ------------------------------------------------------------------
    def on_frame(self, frame: room_pb2.RoomEvents) -> None:
        """A ROOM_EVENTS frame from the connection (module doc)."""
        room = self._rooms.get(frame.room_id)
        if room is None:
            return
        if room.joining:
            room.buffered.append(frame)
            return
        if frame.rejoin or frame.room_epoch != room.epoch:
            self._rejoin(room)
            return
        self._live(room, frame)

    def _live(self, room: _Room, frame: room_pb2.RoomEvents) -> None:
        fresh = [e for e in frame.events if e.room_seq > room.seq]
        if fresh and fresh[0].room_seq != room.seq + 1:
            self._rejoin(room)  # a gap: the ring replays it
            return
        if frame.member_count:
            room.member_count = frame.member_count
        self._tell(room, fresh)

    def _tell(self, room: _Room, events: list, truncated: bool = False, first_seq: int = 0) -> None:
        out = []
        for e in events:
            room.seq = e.room_seq
            if e.kind == room_pb2.RoomEvent.POST:
                key = (e.sender_id, bytes(e.client_message_id))
                if key in room.told:
                    continue  # posted again into a new epoch: told already
                room.told[key] = None
                if len(room.told) > ROOM_DEDUP_ENTRIES:
                    room.told.popitem(last=False)
            out.append(RoomMessage.of(room.room_id, room.epoch, e))
        room.kept.extend(out)
        if out or truncated:
            self._rt.core.emit(RoomEventsAdded(room.room_id, tuple(out), truncated, first_seq, room.member_count))

    def _rejoin(self, room: _Room) -> None:
        if room.joining:
            room.again = True
            return
        task = asyncio.get_running_loop().create_task(self._join(room))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.debug("room re-join ended: %r", task.exception())

    async def _after_sync(self, conn: Any) -> None:
        """Every (re)connect: join every room again from its position."""
        for room in list(self._rooms.values()):
            room.joined.clear()
            self._rejoin(room)

    # --- posts ------------------------------------------------------------------------
    async def _post(self, req: room_pb2.RoomSend, timeout: Optional[float]) -> RoomAck:
        body = req.SerializeToString()
        limit = timeout or self._rt.send_timeout
        try:
            return await asyncio.wait_for(self._post_until(req.room_id, body), limit)
        except asyncio.TimeoutError:
            raise SendTimeout(bytes(req.client_message_id)) from None

    async def _post_until(self, room_id: int, body: bytes) -> RoomAck:
        backoff = Backoff(budget=None)
        rejoined = False
        while True:
            room = self._rooms.get(room_id)
            if room is None:
                raise ServerError(ErrorCode.FORBIDDEN, "join the room before posting to it", Opcode.ROOM_SEND)
            await room.joined.wait()
            try:
                _, reply = await self._rt.request(Opcode.ROOM_SEND, body)
            except (ConnectionLost, NotConnected) as exc:
                room.joined.clear()  # a new connection joins again first (after its sync)
                await backoff.wait(exc)  # same client_message_id
                continue
            except ServerError as exc:
                if exc.code in RETRYABLE:
                    await backoff.wait(exc)
                    continue
                if exc.code == ErrorCode.FORBIDDEN and not rejoined:
                    # the server lost this connection's membership (a reconnect the room has not
                    # re-joined yet, its RoomWriter restarted): join again, then once more
                    rejoined = True
                    room.joined.clear()
                    self._rejoin(room)
                    continue
                raise
            ack = room_pb2.RoomAck.FromString(reply)
            return RoomAck(ack.room_id, bytes(ack.client_message_id), ack.room_epoch, ack.room_seq, ack.created_at_ms)

    async def close(self) -> None:
        """Stop background re-joins."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
