"""Groups and chatrooms of the app-facing Client (qim/sdk/client.py; docs/sdk.md
"Groups", "Chatrooms"): create, rename and leave a group (each GroupOk applied to the
store and told, as one unit), its members, and the chatroom calls (qim/sdk/rooms.py).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Optional, Union

from qim.consts import MESSAGE_TYPE_TEXT
from qim.sdk import names, requests
from qim.sdk.model import Conversation
from qim.sdk.room_events import RoomAck, RoomInfo, RoomMessage
from qim.sdk.rooms import Rooms
from qim.sdk.runtime import ClientRuntime
from qim.sdk.store import LocalStore


@dataclass(frozen=True)
class Member:
    """A current member of a group (PULL_MEMBERS): sees conversation_seq > joined_at."""

    user_id: int
    joined_at: int
    owner: bool


class GroupsAndRooms:
    """The group and chatroom calls of Client, which provides runtime, store, rooms,
    user_id and _listed (a conversation just listed)."""

    runtime: ClientRuntime
    store: LocalStore
    rooms: Rooms

    @property
    def user_id(self) -> int:
        """The authenticated user (Client.user_id)."""
        return self.store.user_id

    async def _listed(self, conversation_id: bytes) -> Conversation:
        """A conversation this client has just listed (Client._listed)."""
        raise NotImplementedError

    async def create_group(self, members: list[int], group_id: Optional[int] = None, title: str = "") -> Conversation:
        """Create a group (a new random id unless `group_id`) with this user as owner
        and `members`, named `title` (≤ 64 bytes UTF-8; "" none); returns its list
        entry. ServerError(CONFLICT) when it exists, INVALID_ARGUMENT for a bad title."""
        gid = group_id or secrets.randbits(62) + 1
        ok = await requests.create_group(self.runtime, gid, [m for m in members if m != self.user_id], title)
        await self.runtime.apply(self.store.note_group, bytes(ok.conversation_id), gid,
                                  ok.conversation_seq, True, title)
        return await self._listed(bytes(ok.conversation_id))

    async def set_group_title(self, group_id: int, title: str) -> Conversation:
        """Rename the group ("" removes the title); members learn it from a CONTROL
        notice (never unread). ServerError FORBIDDEN unless this user owns the group."""
        ok = await names.set_group_title(self.runtime, group_id, title)
        await self.runtime.apply(self.store.note_title, bytes(ok.conversation_id), group_id, title,
                                  ok.conversation_seq)
        return await self._listed(bytes(ok.conversation_id))

    async def leave_group(self, group_id: int) -> Conversation:
        """Leave the group; it stays listed with `left_at` set (what came before stays
        readable). ServerError(FORBIDDEN) when not a member."""
        ok = await requests.leave_group(self.runtime, group_id)
        await self.runtime.apply(self.store.note_group, bytes(ok.conversation_id), group_id,
                                         ok.conversation_seq, False)
        return await self._listed(bytes(ok.conversation_id))

    async def members(self, group_id: int) -> list[Member]:
        """Current members, by user id. ServerError(FORBIDDEN) for a non-member."""
        return [Member(m.user_id, m.joined_at, m.owner) for m in await requests.pull_members(self.runtime, group_id)]

    # --- chatrooms (docs/sdk.md "Chatrooms"; qim/sdk/rooms.py) -----------------------
    async def join_room(self, room_id: int, recent: int = 0) -> RoomInfo:
        """Join a chatroom; its events arrive as RoomEventsAdded (the newest `recent`
        first). Joined again by itself after a reconnect or a lost RoomWriter (a replay
        that could not be complete is told with `truncated`). ServerError, NotConnected."""
        return await self.rooms.join(room_id, recent)

    async def leave_room(self, room_id: int) -> int:
        """Leave a chatroom; the member count after it."""
        return await self.rooms.leave(room_id)

    async def send_room(self, room_id: int, body: Union[str, bytes], message_type: int = MESSAGE_TYPE_TEXT,
                        custom_type: bytes = b"", timeout: Optional[float] = None) -> RoomAck:
        """Post to a joined chatroom (text as str or bytes, or a custom type); retried with
        the same client_message_id until `timeout`. SendRefused, ServerError (FORBIDDEN:
        not joined), SendTimeout."""
        data = body.encode() if isinstance(body, str) else body
        return await self.rooms.send(room_id, data, message_type, custom_type, timeout)

    async def recall_room(self, room_id: int, room_epoch: int, room_seq: int) -> RoomAck:
        """Recall this user's post at (room_epoch, room_seq) in a joined room."""
        return await self.rooms.recall(room_id, room_epoch, room_seq)

    def room_events(self, room_id: int) -> list[RoomMessage]:
        """The newest events told for a joined room, oldest first (memory only)."""
        return self.rooms.events(room_id)
