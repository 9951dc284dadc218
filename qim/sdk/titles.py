"""Group titles in the LocalStore (docs/sdk.md "Names"; schema version 4).

A group's title comes from three places, each holding it as of one conversation_seq:
the session list (`SessionEntry.group_title`, as of the entry's head), the group's
CREATED notice (`MembershipChange.title`) and its title notices
(`ControlEvent.title_change`, sent by SET_GROUP_TITLE). The newest wins (`title_seq`),
so a notice applied late never undoes a newer title. Title notices are CONTROL
messages: never unread, never stored as messages. The functions run inside the
caller's transaction (qim/sdk/conversations.py).
"""

from __future__ import annotations

import sqlite3
from typing import Optional

from qim.proto.v1 import message_pb2

CREATED = message_pb2.MembershipChange.CREATED


def set_title(db: sqlite3.Connection, conversation_id: bytes, title: str, seq: int) -> None:
    """The group's title as of conversation_seq `seq` (kept unless a newer one is known)."""
    db.execute("UPDATE conversations SET title = ?, title_seq = ? WHERE conversation_id = ? AND title_seq <= ?",
               (title, seq, bytes(conversation_id), seq))


def notice_title(event: message_pb2.ControlEvent) -> Optional[tuple[int, str]]:
    """(group_id, title) that a CONTROL notice sets, None when it sets none."""
    if event.HasField("title_change"):
        return event.title_change.group_id, event.title_change.title
    if event.HasField("membership") and event.membership.kind == CREATED and event.membership.title:
        return event.membership.group_id, event.membership.title
    return None
