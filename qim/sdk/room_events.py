"""What the SDK tells an app about chatrooms (docs/sdk.md "Chatrooms"): the values and
events of qim/sdk/rooms.py. Room state lives in memory only: nothing of a room is
stored in the LocalStore, nothing touches conversations, unread or read positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from qim.proto.v1 import room_pb2

KINDS = {room_pb2.RoomEvent.POST: "post", room_pb2.RoomEvent.RECALL: "recall",
         room_pb2.RoomEvent.JOINED: "joined", room_pb2.RoomEvent.LEFT: "left"}


@dataclass(frozen=True)
class RoomMessage:
    """One room event as the app sees it, at position (room_epoch, room_seq). `kind`:
    "post" (sender_id, sender_name, client_message_id, message_type, custom_type, body),
    "recall" (`recalled_seq`: the post it recalls, in the same epoch), "joined" /
    "left" (`sender_id` is the user; only in rooms of at most 500 members), or "other"
    for a kind this SDK does not know. `recalled`: a post replayed after its recall
    (body empty). created_at_ms is the RoomWriter's clock."""

    room_id: int
    room_epoch: int
    room_seq: int
    kind: str
    sender_id: int
    sender_name: str = ""
    client_message_id: bytes = b""
    message_type: int = 0
    custom_type: bytes = b""
    body: bytes = b""
    created_at_ms: int = 0
    recalled_seq: int = 0
    recalled: bool = False

    @classmethod
    def of(cls, room_id: int, epoch: int, event: room_pb2.RoomEvent) -> "RoomMessage":
        """From the wire event."""
        return cls(room_id, epoch, event.room_seq, KINDS.get(event.kind, "other"), event.sender_id,
                   event.sender_name, bytes(event.client_message_id), int(event.message_type),
                   bytes(event.custom_type), bytes(event.body), event.created_at_ms, event.recalled_seq,
                   event.recalled)


@dataclass(frozen=True)
class RoomAck:
    """A post's (or recall's) position once the RoomWriter gave it one."""

    room_id: int
    client_message_id: bytes
    room_epoch: int
    room_seq: int
    created_at_ms: int


@dataclass(frozen=True)
class RoomInfo:
    """The outcome of a join (or of the last automatic re-join): the position the app is
    at, the member count, and whether the replay was complete (`recovered`) or events
    since the last position are gone (`truncated`: show a warning; `first_seq` is the
    oldest event the server still had)."""

    room_id: int
    room_epoch: int
    room_seq: int
    member_count: int
    recovered: bool
    truncated: bool
    first_seq: int


@dataclass(frozen=True)
class RoomEventsAdded:
    """New events of a room, each told once, in room_seq order (a replay after a join,
    or live). `truncated`: the first batch after a join or re-join that could not replay
    everything since the last position (the app shows a truncation bar)."""

    room_id: int
    events: tuple[RoomMessage, ...]
    truncated: bool = False
    first_seq: int = 0
    member_count: int = 0


@dataclass(frozen=True)
class RoomStateChanged:
    """A room's state for this client: "joining", "joined", "rejoining" (the connection
    or the room's server was lost, or events were dropped: the SDK joins again by
    itself), "left" (the app left, or a re-join failed for good: `reason`)."""

    room_id: int
    state: str
    member_count: int = 0
    reason: str = ""
