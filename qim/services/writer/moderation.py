"""Recall (by the sender) and delete (by an operator) of a stored message (docs/decisions/0005-groups-history.md).

The record stays in MessageStore with its state and no body (no explicit DELETE of a
message row); its state lets mailbox pulls drop inline bodies; a CONTROL message
(ControlEvent.state_change) reaches the conversation's members through their mailboxes
with event_type RECALL or DELETE. The rewrite and the CONTROL message's reservation are
one CommitStore call, conditional on the record's version as read (RecordChanged: read
again).
"""

from __future__ import annotations

from typing import Awaitable, Optional

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, MESSAGE_TYPE_CONTROL
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, message_pb2
from qim.protocol import EventType
from qim.services.writer.access import visible_interval
from qim.services.writer.committer import REPLAN, REPLAN_ATTEMPTS, MessageCommitter, inline_decision
from qim.services.writer.hlc import now_ms
from qim.services.writer.sequencer import Turn
from qim.stores.commits import COMMITTED, CommitRef, CommitStore, Reservation, Reserved, StateChange
from qim.stores.groups import GroupStore
from qim.stores.messages import MessageStore
from qim.wire.validate import op_digest


def _digest(actor: internal_pb2.Actor, message_id: bytes, state: int) -> bytes:
    """Identity of a recall/delete request: target, new state and actor."""
    return op_digest(b"state", message_id, bytes([state]), actor.user_id.to_bytes(8, "big"))


class Moderation:
    """Errors: RequestError (NOT_FOUND, FORBIDDEN, CONFLICT, UNAVAILABLE)."""

    def __init__(self, messages: MessageStore, groups: GroupStore, commits: CommitStore,
                 committer: MessageCommitter, recall_window_ms: int) -> None:
        self._messages = messages
        self._groups = groups
        self._commits = commits
        self._committer = committer
        self._window_ms = recall_window_ms

    async def recall(self, actor: internal_pb2.Actor, req: message_pb2.RecallMessage,
                     turn: Turn) -> message_pb2.RecallOk:
        """RECALL_MESSAGE: only the sender, only within the recall window, only a participant.
        A retry with the same client_message_id replays the original RecallOk (same
        control_conversation_seq) before any of those checks: a lost reply must not turn
        into FORBIDDEN after the actor left or the window passed."""
        tenant = int.from_bytes(actor.tenant_id, "big")
        state = message_pb2.MESSAGE_STATE_RECALLED
        replayed = await self._replayed(actor, tenant, req.conversation_id, req.message_id, req.client_message_id,
                                        state)
        if replayed is not None:
            return replayed
        vis = await visible_interval(self._groups, tenant, actor.user_id, req.conversation_id, req.peer_user_id)
        if not vis.current_member:
            raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group any more")
        return await self._change(actor, tenant, req.conversation_id, req.message_id, req.client_message_id,
                                  state, req.peer_user_id, turn)

    async def delete(self, tenant: int, req: internal_pb2.DeleteMessage, turn: Turn) -> message_pb2.RecallOk:
        """Operator delete through qimctl (trusted admin plane; actor 0); a retry with the
        same request_id replays the original answer."""
        actor = internal_pb2.Actor(tenant_id=tenant.to_bytes(16, "big"), user_id=0, device_id=0)
        state = message_pb2.MESSAGE_STATE_DELETED
        replayed = await self._replayed(actor, tenant, req.conversation_id, req.message_id, req.request_id, state)
        if replayed is not None:
            return replayed
        return await self._change(actor, tenant, req.conversation_id, req.message_id, req.request_id,
                                  state, req.peer_user_id, turn)

    async def _replayed(self, actor, tenant: int, conversation_id: bytes, message_id: bytes, cmid: bytes,
                        state: int) -> Optional[message_pb2.RecallOk]:
        """The original answer of a COMMITTED change with this cmid (kept 24 h), None when
        there is none yet (an in-flight one resumes through `_change`). CONFLICT when the
        cmid was used for another request."""
        reply = await self._commits.reply_of(CommitRef(tenant, conversation_id, actor.user_id, cmid))
        if reply is None:
            return None
        if reply.digest != _digest(actor, message_id, state):
            raise RequestError(ErrorCode.CONFLICT, "client_message_id reused with other content")
        if reply.state != COMMITTED:
            return None
        return message_pb2.RecallOk(message_id=message_id, state=state, control_conversation_seq=reply.conversation_seq)

    async def _edit_notices(self, tenant: int, conversation_id: bytes, target: message_pb2.MessageRecord,
                            state: message_pb2.MessageState,
                            record: message_pb2.MessageRecord) -> list[tuple[bytes, bytes]]:
        """An edited target's edit CONTROL messages carry its earlier bodies: each is
        rewritten without body in the same call (StateChange.also), and the recall's own
        record lists them with their seqs (EditTrail), so the archiver blanks their
        archived rows too (docs/decisions/0120: a recall removes every version)."""
        also = []
        for mid in target.edits.control_message_ids:
            stored = await self._messages.get(tenant, conversation_id, mid)
            if stored is None:
                continue  # past its retention: nothing left to blank
            blank = message_pb2.MessageRecord()
            blank.CopyFrom(stored.record)
            blank.body, blank.state = b"", state
            also.append((mid, blank.SerializeToString()))
            record.edits.control_message_ids.append(mid)
            record.edits.control_seqs.append(stored.record.conversation_seq)
        return also

    async def _change(self, actor, tenant: int, conversation_id: bytes, message_id: bytes, cmid: bytes,
                      state: message_pb2.MessageState, peer: int, turn: Turn) -> message_pb2.RecallOk:
        ref = CommitRef(tenant, conversation_id, actor.user_id, cmid)
        digest = _digest(actor, message_id, state)
        for _ in range(REPLAN_ATTEMPTS):
            stored = await self._messages.get(tenant, conversation_id, message_id)
            if stored is None:
                raise RequestError(ErrorCode.NOT_FOUND, "no such message in this conversation")
            target = stored.record
            if target.conversation_id != conversation_id or target.message_type == MESSAGE_TYPE_CONTROL:
                raise RequestError(ErrorCode.NOT_FOUND, "no such message in this conversation")
            if actor.user_id:
                if target.sender_id != actor.user_id:
                    raise RequestError(ErrorCode.FORBIDDEN, "only the sender may recall a message")
                if now_ms() - target.created_at_ms > self._window_ms:
                    raise RequestError(ErrorCode.FORBIDDEN, "the recall window has passed")
            replay = await self._commits.exists(ref)
            if target.state != message_pb2.MESSAGE_STATE_NORMAL and not replay:
                return message_pb2.RecallOk(message_id=message_id, state=target.state)
            new = message_pb2.MessageRecord()
            new.CopyFrom(target)
            new.body = b""
            new.state = state
            notice = message_pb2.MessageStateChange(message_id=message_id, state=state,
                                                    conversation_seq=target.conversation_seq)
            body = message_pb2.ControlEvent(state_change=notice).SerializeToString()
            record = self._committer.new_record(actor, conversation_id, cmid, MESSAGE_TYPE_CONTROL, b"", body)
            event = EventType.RECALL if state == message_pb2.MESSAGE_STATE_RECALLED else EventType.DELETE
            change = StateChange(message_id, stored.version, new.SerializeToString(), state)
            if target.edits.control_message_ids:
                change.also = await self._edit_notices(tenant, conversation_id, target, state, record)
            if ids.conversation_kind(conversation_id) == CONVERSATION_KIND_GROUP:
                group = await self._groups.read(tenant, conversation_id)
                if group.version is None:
                    raise RequestError(ErrorCode.NOT_FOUND, "no such group")
                audience = self._committer.audience(
                    group_conversation_id=conversation_id, membership_version=group.version, event_type=event,
                    inline_body=inline_decision(len(group.current), len(body)))
                if actor.user_id:  # the operator is no member: no membership check for it
                    change.group_version, change.actor = group.version, actor.user_id
            else:
                if not peer or ids.conversation_id_direct(tenant, target.sender_id, peer) != conversation_id:
                    raise RequestError(ErrorCode.INVALID_ARGUMENT, "peer_user_id does not match the conversation")
                users = sorted({target.sender_id, peer})
                audience = self._committer.audience(recipients=users, event_type=event,
                                                    inline_body=inline_decision(len(users), len(body)))

            def reserve(res: Reservation, change: StateChange = change) -> Awaitable[Reserved]:
                return self._commits.reserve_state_change(res, change)

            try:
                ack = await self._committer.run_commit(ref, digest, record, audience, turn, reserve)
            except REPLAN:
                continue
            return message_pb2.RecallOk(message_id=message_id, state=state, control_conversation_seq=ack.conversation_seq)
        raise RequestError(ErrorCode.UNAVAILABLE, "the message kept changing; retry")
