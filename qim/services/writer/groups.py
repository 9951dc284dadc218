"""Groups in the writer (DESIGN.md §7, seed 001 §2.8): create, leave, admin edits, member
pages and group sends, every one re-authorised from the authenticated actor.

A membership change is a CONTROL message committed through the same state machine as
a send: group_change.lua takes its conversation_seq J, sets joined_at = J-1 for joiners
(0 for initial members) and left_at = J for leavers, bumps membership_version and stores
the immutable member snapshot of the new version. The change is broadcast to members
only while the group has at most 500 of them; otherwise only the affected users get it.
"""

from __future__ import annotations

import struct

from qim._core import ids
from qim.consts import GROUP_MAX_MEMBERS, MEMBER_INTERVALS_MAX, MEMBERSHIP_EVENT_BROADCAST_MAX, MESSAGE_TYPE_CONTROL
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, internal_pb2, message_pb2
from qim.protocol import EventType
from qim.services.writer.committer import MessageCommitter, Replan, inline_decision
from qim.services.writer.intervals import is_current, parse_intervals
from qim.services.writer.keys import CommitKeys
from qim.services.writer.sequencer import Turn
from qim.services.writer.validate import identity_digest, op_digest

SNAPSHOT_TTL_S = 8 * 86400  # covers the Outbox, dispatch and DispatchProgress replay windows
REPLAN_ATTEMPTS = 3
MEMBERS_PAGE_DEFAULT = 200
Kind = message_pb2.MembershipChange


def pack_members(users) -> bytes:
    """Snapshot bytes: sorted distinct u64 big-endian."""
    ordered = sorted(set(users))
    return struct.pack(f">{len(ordered)}Q", *ordered)


def unpack_members(data: bytes) -> list[int]:
    """Snapshot bytes -> sorted user ids; ValueError when the length is not a multiple of 8."""
    if len(data) % 8:
        raise ValueError("member snapshot length is not a multiple of 8")
    return list(struct.unpack(f">{len(data) // 8}Q", data))


def request_digest(op: str, group_id: int, actor: int, joins, leaves) -> bytes:
    """Identity of a group change as requested (not as filtered), so a retry replays."""
    return op_digest(op.encode(), struct.pack(">QQ", group_id, actor), pack_members(joins), pack_members(leaves))


class GroupState:
    """One read of a group: version, current members with the joined_at of their current
    interval. RequestError(INTERNAL) when a member entry is corrupt."""

    def __init__(self, meta: dict, members: dict) -> None:
        self.version = int(meta[b"ver"]) if b"ver" in meta else None
        self.owner = int(meta.get(b"owner", b"0"))
        self.group_id = int(meta.get(b"gid", b"0"))
        self.current: dict[int, int] = {}
        for user, entry in members.items():
            try:
                intervals = parse_intervals(entry)
            except ValueError:
                raise RequestError(ErrorCode.INTERNAL, "corrupt member interval") from None
            if is_current(intervals):
                self.current[int(user)] = intervals[-1][0]

    def require_member(self, user_id: int) -> None:
        """RequestError(FORBIDDEN) unless `user_id` is a current member of an existing group."""
        if self.version is None or user_id not in self.current:
            raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group")


class Groups:
    """Group operations of one writer. Errors: RequestError (FORBIDDEN, CONFLICT,
    NOT_FOUND, INVALID_ARGUMENT, PAYLOAD_TOO_LARGE, UNAVAILABLE)."""

    def __init__(self, redis, committer: MessageCommitter) -> None:
        self._redis = redis
        self._committer = committer

    async def read(self, keys: CommitKeys, commit_key: str = "") -> tuple[GroupState, bool]:
        """(group state, whether `commit_key` already exists: an idempotent replay)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.group_meta())
            pipe.hgetall(keys.group_members())
            pipe.exists(commit_key or "qim:none")
            meta, members, replay = await pipe.execute()
        return GroupState(meta, members), bool(replay)

    async def send(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage,
                   turn: Turn) -> message_pb2.SendAck:
        """A group SEND_MESSAGE: freeze membership_version (checked again in the script).
        The group is read before the conversation's turn comes (reads overlap); a re-plan
        reads again while the turn is held, so arrival order is kept."""
        keys = CommitKeys(tenant, msg.conversation_id)
        for _ in range(REPLAN_ATTEMPTS):
            state, _ = await self.read(keys)
            state.require_member(actor.user_id)
            record = self._committer.new_record(actor, msg.conversation_id, msg.client_message_id, msg.message_type,
                                                msg.custom_type, msg.body)
            audience = self._committer.audience(
                group_conversation_id=msg.conversation_id, membership_version=state.version,
                inline_body=inline_decision(len(state.current), len(msg.body)))
            try:
                return await self._committer.run_commit(
                    "reserve_group_send", keys, actor.user_id, identity_digest(msg), record, audience, turn,
                    [keys.group_meta(), keys.group_members()], [state.version, actor.user_id],
                    previous=msg.previous_client_message_id)
            except Replan:
                continue
        raise RequestError(ErrorCode.UNAVAILABLE, "group membership kept changing; retry")

    async def _change(self, actor: internal_pb2.Actor, tenant: int, group_id: int, cmid: bytes, op: str,
                      kind: int, joins: list[int], leaves: list[int], state: GroupState,
                      digest: bytes, turn: Turn) -> group_pb2.GroupOk:
        conv = ids.conversation_id_group(tenant, group_id)
        keys = CommitKeys(tenant, conv)
        after = (set(state.current) | set(joins)) - set(leaves)
        if len(after) > GROUP_MAX_MEMBERS:
            raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"a group holds at most {GROUP_MAX_MEMBERS} members")
        version = 1 if op == "create" else state.version + 1
        change = message_pb2.MembershipChange(kind=kind, users=sorted(joins or leaves), actor_user_id=actor.user_id,
                                              membership_version=version, group_id=group_id)
        body = message_pb2.ControlEvent(membership=change).SerializeToString()
        record = self._committer.new_record(actor, conv, cmid, MESSAGE_TYPE_CONTROL, b"", body)
        broadcast = len(after) <= MEMBERSHIP_EVENT_BROADCAST_MAX
        audience_users = (after | set(leaves)) if broadcast else (set(joins) | set(leaves) | {actor.user_id} - {0})
        audience = self._committer.audience(recipients=sorted(audience_users - {0}), event_type=EventType.MEMBERSHIP,
                                            inline_body=inline_decision(len(audience_users), len(body)))
        items = [f"+{u}" for u in sorted(joins)] + [f"-{u}" for u in sorted(leaves)]
        ack = await self._committer.run_commit(
            "group_change", keys, actor.user_id, digest, record, audience, turn,
            [keys.group_meta(), keys.group_members(), keys.group_snapshot(version)],
            [op, "" if op == "create" else state.version, actor.user_id, pack_members(after), len(after),
             SNAPSHOT_TTL_S, group_id, MEMBER_INTERVALS_MAX, *items])
        if ack.message_id != record.message_id:
            # a replay: answer with the version that change produced, read from its own record
            stored = message_pb2.MessageRecord.FromString(await self._redis.get(keys.record(ack.message_id)) or b"")
            version = message_pb2.ControlEvent.FromString(stored.body).membership.membership_version
        return group_pb2.GroupOk(conversation_id=conv, membership_version=version, conversation_seq=ack.conversation_seq)

    async def create(self, actor: internal_pb2.Actor, tenant: int, req: group_pb2.CreateGroup,
                     turn: Turn) -> group_pb2.GroupOk:
        """CREATE_GROUP: only a group that does not exist; the actor is owner and member.
        A retry with the same client_message_id replays the original GroupOk (the script
        checks idempotency before existence)."""
        members = sorted(set(req.members) | {actor.user_id})
        digest = request_digest("create", req.group_id, actor.user_id, members, [])
        return await self._change(actor, tenant, req.group_id, req.client_message_id, "create", Kind.CREATED,
                                  members, [], GroupState({}, {}), digest, turn)

    async def edit(self, actor: internal_pb2.Actor, tenant: int, group_id: int, cmid: bytes,
                   joins: list[int], leaves: list[int], turn: Turn) -> group_pb2.GroupOk:
        """LEAVE_GROUP (actor leaves) and the admin plane's add/remove (actor 0). A retry
        with the same client_message_id / request_id replays the original GroupOk, even
        after the actor left or the membership moved on (no membership check on a replay)."""
        if bool(joins) == bool(leaves):
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "one change at a time: add or remove members")
        keys = CommitKeys(tenant, ids.conversation_id_group(tenant, group_id))
        # the identity covers the request as made, so a retry replays even when the
        # membership has moved on since
        digest = request_digest("edit", group_id, actor.user_id, joins, leaves)
        for _ in range(REPLAN_ATTEMPTS):
            state, replay = await self.read(keys, keys.commit(actor.user_id, cmid))
            if not replay:
                if state.version is None:
                    raise RequestError(ErrorCode.NOT_FOUND if actor.user_id == 0 else ErrorCode.FORBIDDEN,
                                       "no such group")
                if actor.user_id:
                    state.require_member(actor.user_id)
                joins = [u for u in joins if u not in state.current]
                leaves = [u for u in leaves if u in state.current]
                if not joins and not leaves:
                    raise RequestError(ErrorCode.INVALID_ARGUMENT, "no membership change")
            kind = Kind.JOINED if joins else (Kind.LEFT if actor.user_id in leaves else Kind.REMOVED)
            try:
                return await self._change(actor, tenant, group_id, cmid, "edit", kind, joins, leaves, state, digest,
                                          turn)
            except Replan:
                continue
        raise RequestError(ErrorCode.UNAVAILABLE, "group membership kept changing; retry")

    async def members(self, actor: internal_pb2.Actor, tenant: int, req: group_pb2.PullMembers) -> group_pb2.MembersBatch:
        """PULL_MEMBERS: current members after `after_user_id`, only for current members."""
        state, _ = await self.read(CommitKeys(tenant, ids.conversation_id_group(tenant, req.group_id)))
        state.require_member(actor.user_id)
        limit = min(req.limit or MEMBERS_PAGE_DEFAULT, GROUP_MAX_MEMBERS)
        users = sorted(u for u in state.current if u > req.after_user_id)
        page = users[:limit]
        return group_pb2.MembersBatch(
            members=[group_pb2.Member(user_id=u, joined_at=state.current[u], owner=u == state.owner) for u in page],
            has_more=len(users) > limit, membership_version=state.version)
