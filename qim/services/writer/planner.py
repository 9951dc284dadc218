"""Audience planners of the MessageCommitter, one per conversation kind (docs/design.md §5.2
"freeze the audience (direct recipients, or group membership_version + target shards,
checked against the group meta in the same script)"; §7).

Given to the committer at construction (qim/services/writer/server.py wiring): the
committer never knows how an audience is found, only that a group's may move between
plan and reserve (MembershipChanged: planned again).
"""

from __future__ import annotations

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.writer.committer import SendPlan, inline_decision
from qim.stores.commits import GroupSendCheck
from qim.stores.groups import GroupStore
from qim.stores.intervals import is_current
from qim.wire.validate import direct_audience


class DirectAudience:
    """Direct conversations: the frozen audience is (peer, sender), sorted, distinct."""

    async def plan(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage) -> SendPlan:
        """INVALID_ARGUMENT without a peer, FORBIDDEN when the conversation_id is not the
        direct conversation of sender and recipient (qim/wire/validate.py)."""
        recipients = direct_audience(tenant, actor.user_id, msg)
        return SendPlan({"recipients": recipients, "inline_body": inline_decision(len(recipients), len(msg.body))})


class GroupAudience:
    """Group conversations: the audience is the member snapshot of the membership_version
    read now (the fanout reads exactly that snapshot); the sender must be a current
    member, checked again atomically by the reserve."""

    def __init__(self, groups: GroupStore) -> None:
        self._groups = groups

    async def plan(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage) -> SendPlan:
        """FORBIDDEN unless the actor is a current member of an existing group. Reads the
        version, the member count and the actor's own intervals (O(1) in the group's size:
        a 1,000-member group once parsed every member per send, issue 12)."""
        view = await self._groups.send_view(tenant, msg.conversation_id, actor.user_id)
        if view.version is None or view.intervals is None or not is_current(view.intervals):
            raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")
        return SendPlan({"group_conversation_id": msg.conversation_id, "membership_version": view.version,
                         "inline_body": inline_decision(view.member_count, len(msg.body))},
                        GroupSendCheck(view.version, actor.user_id))
