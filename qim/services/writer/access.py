"""Who may read a conversation, and which part of it (docs/design.md §7).

Direct: the actor must be one of the two participants (the request names the peer and
the conversation_id must be theirs). Group: the actor's member intervals bound what is
visible: seq in (joined_at, left_at] of some interval (qim/stores/intervals.py). A
non-member or a stranger gets FORBIDDEN, never an empty page.
"""

from __future__ import annotations

from typing import Sequence

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT
from qim.errors import ErrorCode, IdError, RequestError
from qim.stores.groups import GroupStore
from qim.stores.intervals import OPEN, Interval, contains, is_current


class Visible:
    """The actor's visible conversation_seq intervals (ascending, disjoint)."""

    __slots__ = ("intervals", "current_member")

    def __init__(self, intervals: Sequence[Interval] = OPEN) -> None:
        self.intervals = tuple(intervals)
        self.current_member = is_current(self.intervals)

    def contains(self, seq: int) -> bool:
        """Whether conversation_seq `seq` is visible to the actor."""
        return contains(self.intervals, seq)


async def visible_interval(groups: GroupStore, tenant: int, actor_user: int, conversation_id: bytes,
                           peer_user: int) -> Visible:
    """The actor's visible intervals of the conversation. FORBIDDEN when it has none,
    INVALID_ARGUMENT for an unknown kind, INTERNAL (StoreCorrupt) for a corrupt member
    entry."""
    try:
        kind = ids.conversation_kind(conversation_id)
    except IdError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id has an unknown kind") from None
    if kind == CONVERSATION_KIND_DIRECT:
        if not peer_user or ids.conversation_id_direct(tenant, actor_user, peer_user) != conversation_id:
            raise RequestError(ErrorCode.FORBIDDEN, "not a participant of this conversation")
        return Visible()
    intervals = await groups.intervals_of(tenant, conversation_id, actor_user)
    if intervals is None:
        raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")
    return Visible(intervals)
