"""Who may read a conversation, and which part of it (DESIGN.md §7, ADR-0021 notes).

Direct: the actor must be one of the two participants (the request names the peer and
the conversation_id must be theirs). Group: the actor's member interval bounds what is
visible: seq > joined_at and, after leaving, seq <= left_at. A non-member or a stranger
gets FORBIDDEN, never an empty page.
"""

from __future__ import annotations

from typing import Optional

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT
from qim.errors import ErrorCode, IdError, RequestError
from qim.services.writer.keys import CommitKeys


class Visible:
    """Visible conversation_seq interval: lo < seq <= hi (hi None = open)."""

    __slots__ = ("lo", "hi", "current_member")

    def __init__(self, lo: int = 0, hi: Optional[int] = None, current_member: bool = True) -> None:
        self.lo, self.hi, self.current_member = lo, hi, current_member

    def contains(self, seq: int) -> bool:
        return seq > self.lo and (self.hi is None or seq <= self.hi)


async def visible_interval(redis, tenant: int, actor_user: int, conversation_id: bytes, peer_user: int) -> Visible:
    """The actor's visible interval of the conversation; FORBIDDEN when it has none."""
    try:
        kind = ids.conversation_kind(conversation_id)
    except IdError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id has an unknown kind") from None
    if kind == CONVERSATION_KIND_DIRECT:
        if not peer_user or ids.conversation_id_direct(tenant, actor_user, peer_user) != conversation_id:
            raise RequestError(ErrorCode.FORBIDDEN, "not a participant of this conversation")
        return Visible()
    entry = await redis.hget(CommitKeys(tenant, conversation_id).group_members(), actor_user)
    if entry is None:
        raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")
    joined, left = (int(x) for x in entry.split(b":"))
    return Visible(joined, left or None, current_member=left == 0)
