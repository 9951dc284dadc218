"""Groups in the writer (docs/design.md §7, seed 001 §2.8): create, leave, admin edits and
member pages, every one re-authorised from the authenticated actor. Group sends are
planned by planner.GroupAudience.

A membership change is a CONTROL message committed through the same state machine as
a send: the CommitStore's group change takes its conversation_seq J, sets joined_at =
J-1 for joiners (0 for initial members) and left_at = J for leavers, bumps
membership_version and stores the immutable member snapshot of the new version. The
change is broadcast to members only while the group has at most 500 of them; otherwise
only the affected users get it.

A group's title (docs/protocol.md "Names") is given at creation (in the CREATED
notice) and changed by its owner (SET_GROUP_TITLE): a CONTROL message with a
ControlEvent.title_change to the current members, committed through the same group
change with op "title" (the title in the group meta; members and version unchanged).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Awaitable, Iterable

from qim._core import ids
from qim.consts import GROUP_MAX_MEMBERS, MEMBER_INTERVALS_MAX, MEMBERSHIP_EVENT_BROADCAST_MAX, MESSAGE_TYPE_CONTROL
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, internal_pb2, message_pb2
from qim.protocol import EventType
from qim.services.writer.committer import REPLAN_ATTEMPTS, MessageCommitter, inline_decision
from qim.services.writer.sequencer import Turn
from qim.stores.commits import CommitRef, CommitStore, GroupChange, Reservation, Reserved
from qim.stores.errors import MembershipMoved, StoreCorrupt
from qim.stores.groups import GroupStore, GroupView
from qim.stores.messages import MessageStore
from qim.wire.control import control_event
from qim.wire.names import check_title
from qim.wire.validate import op_digest

SNAPSHOT_TTL_S = 8 * 86400  # covers the Outbox, dispatch and DispatchProgress replay windows
MEMBERS_PAGE_DEFAULT = 200
Kind = message_pb2.MembershipChange


def pack_ids(users: Iterable[int]) -> bytes:
    """Sorted distinct u64 big-endian: the id lists of a request's identity digest."""
    ordered = sorted(set(users))
    return struct.pack(f">{len(ordered)}Q", *ordered)


def request_digest(op: str, group_id: int, actor: int, joins: Iterable[int], leaves: Iterable[int],
                   title: str = "") -> bytes:
    """Identity of a group change as requested (not as filtered), so a retry replays
    (a title only when given: the digests of untitled changes stay what they were)."""
    parts = (title.encode(),) if title else ()
    return op_digest(op.encode(), struct.pack(">QQ", group_id, actor), pack_ids(joins), pack_ids(leaves), *parts)


def require_member(group: GroupView, user_id: int) -> None:
    """RequestError(FORBIDDEN) unless `user_id` is a current member of an existing group."""
    if group.version is None or user_id not in group.current:
        raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")


class Groups:
    """Group operations of one writer. Errors: RequestError (FORBIDDEN, CONFLICT,
    NOT_FOUND, INVALID_ARGUMENT, PAYLOAD_TOO_LARGE, UNAVAILABLE)."""

    def __init__(self, groups: GroupStore, commits: CommitStore, messages: MessageStore,
                 committer: MessageCommitter) -> None:
        self._groups = groups
        self._commits = commits
        self._messages = messages
        self._committer = committer

    async def _change(self, actor: internal_pb2.Actor, tenant: int, group_id: int, cmid: bytes, op: str,
                      kind: int, joins: list[int], leaves: list[int], group: GroupView,
                      digest: bytes, turn: Turn, title: str = "") -> group_pb2.GroupOk:
        conv = ids.conversation_id_group(tenant, group_id)
        current = group.current
        after = (set(current) | set(joins)) - set(leaves)
        if len(after) > GROUP_MAX_MEMBERS:
            raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"a group holds at most {GROUP_MAX_MEMBERS} members")
        version = 1 if op == "create" else (group.version or 0) + (op != "title")
        if op == "title":
            event = message_pb2.ControlEvent(title_change=message_pb2.GroupTitleChange(
                group_id=group_id, title=title, actor_user_id=actor.user_id))
        else:
            event = message_pb2.ControlEvent(membership=message_pb2.MembershipChange(
                kind=kind, users=sorted(joins or leaves), actor_user_id=actor.user_id, membership_version=version,
                group_id=group_id, title=title))
        body = event.SerializeToString()
        record = self._committer.new_record(actor, conv, cmid, MESSAGE_TYPE_CONTROL, b"", body)
        broadcast = len(after) <= MEMBERSHIP_EVENT_BROADCAST_MAX
        audience_users = (after | set(leaves)) if broadcast else (set(joins) | set(leaves) | {actor.user_id} - {0})
        audience = self._committer.audience(recipients=sorted(audience_users - {0}), event_type=EventType.MEMBERSHIP,
                                            inline_body=inline_decision(len(audience_users), len(body)))
        stored = GroupChange(op, None if op == "create" else group.version, actor.user_id, sorted(after), group_id,
                             SNAPSHOT_TTL_S, MEMBER_INTERVALS_MAX, joins, leaves, title)

        def reserve(res: Reservation) -> Awaitable[Reserved]:
            return self._commits.reserve_group_change(res, stored)

        ack = await self._committer.run_commit(CommitRef(tenant, conv, actor.user_id, cmid), digest, record,
                                               audience, turn, reserve)
        if ack.message_id != record.message_id:
            # a replay: answer with the version that change produced, read from its own record
            prior = await self._messages.get(tenant, conv, ack.message_id)
            control = control_event(prior.record.body if prior else b"")
            if control is None:
                raise StoreCorrupt("the CONTROL record of a replayed group change does not decode")
            version = control.membership.membership_version if control.HasField("membership") else version
        return group_pb2.GroupOk(conversation_id=conv, membership_version=version, conversation_seq=ack.conversation_seq)

    async def create(self, actor: internal_pb2.Actor, tenant: int, req: group_pb2.CreateGroup,
                     turn: Turn) -> group_pb2.GroupOk:
        """CREATE_GROUP: only a group that does not exist; the actor is owner and member.
        A retry with the same client_message_id replays the original GroupOk (the store
        checks idempotency before existence)."""
        check_title(req.title)
        members = sorted(set(req.members) | {actor.user_id})
        digest = request_digest("create", req.group_id, actor.user_id, members, [], req.title)
        return await self._change(actor, tenant, req.group_id, req.client_message_id, "create", Kind.CREATED,
                                  members, [], GroupView(), digest, turn, req.title)

    async def retitle(self, actor: internal_pb2.Actor, tenant: int, req: group_pb2.SetGroupTitle,
                      turn: Turn) -> group_pb2.GroupOk:
        """SET_GROUP_TITLE: the owner (a current member) names the group; FORBIDDEN for
        anyone else or without the group. A retry with the same client_message_id
        replays the original GroupOk (no check on a replay, as for edits)."""
        check_title(req.title)
        conv = ids.conversation_id_group(tenant, req.group_id)
        ref = CommitRef(tenant, conv, actor.user_id, req.client_message_id)
        digest = request_digest("title", req.group_id, actor.user_id, [], [], req.title)
        for _ in range(REPLAN_ATTEMPTS):
            group, replay = await asyncio.gather(self._groups.read(tenant, conv), self._commits.exists(ref))
            if not replay:
                require_member(group, actor.user_id)
                if group.owner != actor.user_id:
                    raise RequestError(ErrorCode.FORBIDDEN, "only the group's owner can rename it")
            try:
                return await self._change(actor, tenant, req.group_id, req.client_message_id, "title", 0, [], [],
                                          group, digest, turn, req.title)
            except MembershipMoved:
                continue  # the members moved: the notice goes to the new ones
        raise RequestError(ErrorCode.UNAVAILABLE, "group membership kept changing; retry")

    async def edit(self, actor: internal_pb2.Actor, tenant: int, group_id: int, cmid: bytes,
                   joins: list[int], leaves: list[int], turn: Turn) -> group_pb2.GroupOk:
        """LEAVE_GROUP (actor leaves) and the admin plane's add/remove (actor 0). A retry
        with the same client_message_id / request_id replays the original GroupOk, even
        after the actor left or the membership moved on (no membership check on a replay)."""
        if bool(joins) == bool(leaves):
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "one change at a time: add or remove members")
        conv = ids.conversation_id_group(tenant, group_id)
        ref = CommitRef(tenant, conv, actor.user_id, cmid)
        # the identity covers the request as made, so a retry replays even when the
        # membership has moved on since
        digest = request_digest("edit", group_id, actor.user_id, joins, leaves)
        for _ in range(REPLAN_ATTEMPTS):
            # one round trip's latency: the group and whether this request already committed
            group, replay = await asyncio.gather(self._groups.read(tenant, conv), self._commits.exists(ref))
            if not replay:
                if group.version is None:
                    raise RequestError(ErrorCode.NOT_FOUND if actor.user_id == 0 else ErrorCode.FORBIDDEN,
                                       "no such group")
                if actor.user_id:
                    require_member(group, actor.user_id)
                current = group.current
                joins = [u for u in joins if u not in current]
                leaves = [u for u in leaves if u in current]
                if not joins and not leaves:
                    raise RequestError(ErrorCode.INVALID_ARGUMENT, "no membership change")
            kind = Kind.JOINED if joins else (Kind.LEFT if actor.user_id in leaves else Kind.REMOVED)
            try:
                return await self._change(actor, tenant, group_id, cmid, "edit", kind, joins, leaves, group, digest,
                                          turn)
            except MembershipMoved:
                continue
        raise RequestError(ErrorCode.UNAVAILABLE, "group membership kept changing; retry")

    async def members(self, actor: internal_pb2.Actor, tenant: int, req: group_pb2.PullMembers) -> group_pb2.MembersBatch:
        """PULL_MEMBERS: current members after `after_user_id`, only for current members."""
        group = await self._groups.read(tenant, ids.conversation_id_group(tenant, req.group_id))
        require_member(group, actor.user_id)
        current = group.current
        limit = min(req.limit or MEMBERS_PAGE_DEFAULT, GROUP_MAX_MEMBERS)
        users = sorted(u for u in current if u > req.after_user_id)
        page = users[:limit]
        return group_pb2.MembersBatch(
            members=[group_pb2.Member(user_id=u, joined_at=current[u], owner=u == group.owner) for u in page],
            has_more=len(users) > limit, membership_version=group.version)
