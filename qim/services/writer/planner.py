"""Audience planners of the MessageCommitter, one per conversation kind (docs/design.md §5.2
"freeze the audience (direct recipients, or group membership_version + target shards,
checked against the group meta in the same script)"; §7).

Given to the committer at construction (qim/services/writer/server.py wiring): the
committer never knows how an audience is found, only that a group's may move between
plan and reserve (MembershipMoved: planned again, from fresh reads).

A group send plans from the group's (membership_version, member count) kept per group
in a bounded LRU: the reserve script checks that the sender is a current member and
that the version is still the group's, atomically, so a stale entry costs one refused
reserve and a fresh read, never a wrong audience. A read of the group on every send was
the one Redis round trip on a group send's ACK path that a direct send does not have
(and under fan-out load the slowest one; docs/perf-profile.md).
"""

from __future__ import annotations

from collections import OrderedDict

from qim.consts import GROUP_PLAN_CACHE_GROUPS
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.writer.committer import SendPlan, inline_decision
from qim.stores.commits import GroupSendCheck
from qim.stores.groups import GroupStore
from qim.stores.intervals import is_current
from qim.wire.validate import direct_audience


class DirectAudience:
    """Direct conversations: the frozen audience is (peer, sender), sorted, distinct."""

    async def plan(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage,
                   fresh: bool = False) -> SendPlan:
        """INVALID_ARGUMENT without a peer, FORBIDDEN when the conversation_id is not the
        direct conversation of sender and recipient (qim/wire/validate.py). Reads nothing."""
        recipients = direct_audience(tenant, actor.user_id, msg)
        return SendPlan({"recipients": recipients, "inline_body": inline_decision(len(recipients), len(msg.body))})


class GroupAudience:
    """Group conversations: the audience is the member snapshot of a membership_version
    (the fanout reads exactly that snapshot); the reserve checks atomically that it is
    still the group's and that the sender is a current member (module docstring).
    `cache_groups`: how many groups' (version, member count) are kept."""

    def __init__(self, groups: GroupStore, cache_groups: int = GROUP_PLAN_CACHE_GROUPS) -> None:
        self._groups = self.groups = groups  # `groups`: the committer reads a mute there (mutefirst.py)
        self._limit = cache_groups
        self._known: OrderedDict[tuple[int, bytes], tuple[int, int]] = OrderedDict()

    async def plan(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage,
                   fresh: bool = False) -> SendPlan:
        """FORBIDDEN unless the actor is a current member of an existing group (from the
        reserve when the group's version is known, else from a read of the version, the
        member count and the actor's own intervals: O(1) in the group's size). `fresh`:
        the last plan was refused (MembershipMoved), read again."""
        key = (tenant, bytes(msg.conversation_id))
        known = None if fresh else self._known.get(key)
        if known is None:
            view = await self._groups.send_view(tenant, msg.conversation_id, actor.user_id)
            if view.version is None or view.intervals is None or not is_current(view.intervals):
                raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")
            known = (view.version, view.member_count)
            self._known[key] = known
            if len(self._known) > self._limit:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(key)
        version, count = known
        return SendPlan({"group_conversation_id": msg.conversation_id, "membership_version": version,
                         "inline_body": inline_decision(count, len(msg.body))},
                        GroupSendCheck(version, actor.user_id))
