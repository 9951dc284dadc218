"""Edit of a stored message by its sender (docs/decisions/0120; issue 37).

An edit is a new version of the message: the record keeps its coordinates and takes the
new body, version + 1 and an EditTrail (when, and which CONTROL messages announced the
edits); a CONTROL message (ControlEvent.edit: message_id, version, the new body) reaches
the members through their mailboxes, as a recall's does. The rewrite and the CONTROL's
reservation are one CommitStore call conditional on the record as read (StateChange with
state NORMAL; RecordChanged: read again). Only the sender, only a current participant,
only within the recall window (QIM_RECALL_WINDOW_MS), only a NORMAL message still in the
hot tier (a trimmed one is past any edit window), never a CONTROL message.

An edit is a send for idempotency (its client_message_id: a retry replays the EditOk, the
same cmid with another body or target is CONFLICT) and for the send policy (decision 0099:
the new body is checked like a send's, a refusal is kept per cmid; a Replace verdict's body
is the version committed, EDIT_OK `replaced` and `body` tell the sender, decision 0126). A recall of an edited
message blanks the edit CONTROL messages too (qim/services/writer/moderation.py), so no
version survives it.
"""

from __future__ import annotations

from typing import Awaitable

from qim._core import ids
from qim.consts import (
    CONVERSATION_KIND_GROUP,
    ID_LEN,
    MAX_EDITS_PER_MESSAGE,
    MESSAGE_TYPE_CONTROL,
    MESSAGE_TYPE_MEDIA,
)
from qim.errors import ErrorCode, RequestError
from qim.policy import PolicySeam, SendFacts
from qim.proto.v1 import internal_pb2, message_pb2
from qim.protocol import EventType
from qim.services.writer.access import visible_interval
from qim.services.writer.committer import REPLAN, REPLAN_ATTEMPTS, MessageCommitter, StoreRefusals, inline_decision
from qim.services.writer.hlc import now_ms
from qim.services.writer.mutefirst import policy_check
from qim.services.writer.replaced import checked_replacement
from qim.services.writer.sequencer import Turn
from qim.stores.commits import COMMITTED, CommitRef, CommitStore, Reservation, Reserved, StateChange
from qim.stores.groups import GroupStore
from qim.stores.messages import MessageStore
from qim.wire.control import control_event
from qim.wire.validate import ZERO_ID, op_digest


def edit_digest(actor_user: int, message_id: bytes, body: bytes) -> bytes:
    """Identity of an edit request: target, new body and actor."""
    return op_digest(b"edit", message_id, body, actor_user.to_bytes(8, "big"))


class Edits:
    """EDIT_MESSAGE. Errors (RequestError): INVALID_ARGUMENT (ids, peer), PAYLOAD_TOO_LARGE,
    NOT_FOUND, FORBIDDEN (not the sender, not a member, window passed, recalled/deleted),
    CONFLICT (cmid reused), POLICY_REFUSED, UNAVAILABLE."""

    def __init__(self, messages: MessageStore, groups: GroupStore, commits: CommitStore,
                 committer: MessageCommitter, window_ms: int, max_body: int, policy: PolicySeam) -> None:
        self._messages = messages
        self._groups = groups
        self._commits = commits
        self._committer = committer
        self._window_ms = window_ms
        self._max_body = max_body
        self._policy = policy

    async def edit(self, actor: internal_pb2.Actor, req: message_pb2.EditMessage, turn: Turn) -> message_pb2.EditOk:
        """One edit (module docstring). A retry of a COMMITTED edit replays its EditOk before
        any check, so a lost reply never turns into FORBIDDEN after the window passed."""
        for name in ("conversation_id", "message_id", "client_message_id"):
            value = getattr(req, name)
            if len(value) != ID_LEN or value == ZERO_ID:
                raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{name} must be 16 non-zero bytes")
        if len(req.body) > self._max_body:
            raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"body exceeds {self._max_body} bytes")
        tenant = int.from_bytes(actor.tenant_id, "big")
        ref = CommitRef(tenant, req.conversation_id, actor.user_id, req.client_message_id)
        digest = edit_digest(actor.user_id, req.message_id, req.body)
        reply = await self._commits.reply_of(ref)
        if reply is not None:
            if reply.digest != digest:
                raise RequestError(ErrorCode.CONFLICT, "client_message_id reused with other content")
            if reply.state == COMMITTED:
                return await self._replay(tenant, req, ref, reply.conversation_seq)
        vis = await visible_interval(self._groups, tenant, actor.user_id, req.conversation_id, req.peer_user_id)
        if not vis.current_member:
            raise RequestError(ErrorCode.FORBIDDEN, "not a member of this group any more")
        return await self._change(actor, tenant, req, ref, digest, turn)

    async def _replay(self, tenant: int, req: message_pb2.EditMessage, ref: CommitRef,
                      control_seq: int) -> message_pb2.EditOk:
        """The EditOk of a committed edit, from the CONTROL message that announced it."""
        ok = message_pb2.EditOk(message_id=req.message_id, control_conversation_seq=control_seq)
        (loaded,) = await self._commits.load([ref])
        if loaded is not None:
            stored = await self._messages.get(tenant, req.conversation_id, loaded.message_id)
            event = control_event(stored.record.body) if stored is not None else None
            if event is not None and event.WhichOneof("event") == "edit":
                ok.version, ok.edited_at_ms = event.edit.version, event.edit.edited_at_ms
                if event.edit.body != req.body:  # the policy replaced it (decision 0126)
                    ok.replaced, ok.body = True, event.edit.body
        return ok

    async def _change(self, actor: internal_pb2.Actor, tenant: int, req: message_pb2.EditMessage, ref: CommitRef,
                      digest: bytes, turn: Turn) -> message_pb2.EditOk:
        checked, body = False, req.body
        for _ in range(REPLAN_ATTEMPTS):
            stored = await self._messages.get(tenant, req.conversation_id, req.message_id)
            if stored is None or stored.record.conversation_id != req.conversation_id \
                    or stored.record.message_type == MESSAGE_TYPE_CONTROL:
                raise RequestError(ErrorCode.NOT_FOUND, "no such message in this conversation")
            target = stored.record
            if target.sender_id != actor.user_id:
                raise RequestError(ErrorCode.FORBIDDEN, "only the sender may edit a message")
            if target.state != message_pb2.MESSAGE_STATE_NORMAL:
                raise RequestError(ErrorCode.FORBIDDEN, "a recalled or deleted message cannot be edited")
            if target.message_type == MESSAGE_TYPE_MEDIA:  # its body is a signed reference (decision 0138)
                raise RequestError(ErrorCode.FORBIDDEN, "a MEDIA message cannot be edited: send another")
            if now_ms() - target.created_at_ms > self._window_ms or stored.version == "":
                raise RequestError(ErrorCode.FORBIDDEN, "the edit window has passed")
            if target.version >= MAX_EDITS_PER_MESSAGE:  # a recall blanks every notice in one call
                raise RequestError(ErrorCode.FORBIDDEN, f"a message is edited at most {MAX_EDITS_PER_MESSAGE} times")
            kind = ids.conversation_kind(req.conversation_id)
            if not checked and self._policy.active:
                # an edit is a send for the policy seam (docs/decisions/0099, 0120)
                facts = SendFacts(kind="group" if kind == CONVERSATION_KIND_GROUP else "direct", tenant=tenant,
                                  user_id=actor.user_id, device_id=actor.device_id,
                                  conversation_id=req.conversation_id, message_type=target.message_type,
                                  custom_type=target.custom_type, body=req.body,
                                  client_message_id=req.client_message_id, edit_of=req.message_id)
                replacement = checked_replacement(await policy_check(  # a mute wins (decision 0127, Amendment)
                    self._policy, facts, StoreRefusals(self._commits, ref, digest), self._groups), self._max_body)
                body = req.body if replacement is None else replacement  # committed, digest of the sent one
            checked = True
            edited_at = now_ms()
            version = target.version + 1
            notice = message_pb2.MessageEdit(message_id=req.message_id, conversation_seq=target.conversation_seq,
                                             version=version, body=body, edited_at_ms=edited_at)
            control = message_pb2.ControlEvent(edit=notice).SerializeToString()
            record = self._committer.new_record(actor, req.conversation_id, req.client_message_id,
                                                MESSAGE_TYPE_CONTROL, b"", control)
            audience, group_version = await self._audience(tenant, req, target, len(control))
            change = StateChange(req.message_id, stored.version, b"", message_pb2.MESSAGE_STATE_NORMAL)
            if group_version is not None:
                change.group_version, change.actor = group_version, actor.user_id

            def reserve(res: Reservation, change: StateChange = change, target: message_pb2.MessageRecord = target,
                        version: int = version, edited_at: int = edited_at, body: bytes = body) -> Awaitable[Reserved]:
                # the new version names its own CONTROL message, whose id is drawn only now (HLC)
                new = message_pb2.MessageRecord()
                new.CopyFrom(target)
                new.body, new.version = body, version
                new.edits.edited_at_ms = edited_at
                new.edits.control_message_ids.append(res.message_id)
                change.new_record = new.SerializeToString()
                return self._commits.reserve_state_change(res, change)

            try:
                ack = await self._committer.run_commit(ref, digest, record, audience, turn, reserve)
            except REPLAN:
                continue
            if ack.message_id != record.message_id:  # a concurrent retry's commit: its own reply
                return await self._replay(tenant, req, ref, ack.conversation_seq)
            return message_pb2.EditOk(message_id=req.message_id, version=version, replaced=body != req.body,
                                      body=body if body != req.body else b"",
                                      control_conversation_seq=ack.conversation_seq, edited_at_ms=edited_at)
        raise RequestError(ErrorCode.UNAVAILABLE, "the message kept changing; retry")

    async def _audience(self, tenant: int, req: message_pb2.EditMessage, target: message_pb2.MessageRecord,
                        body_len: int) -> tuple[internal_pb2.OutboxRecord, int | None]:
        """The edit CONTROL's audience: the group's membership, or the two participants."""
        if ids.conversation_kind(req.conversation_id) == CONVERSATION_KIND_GROUP:
            group = await self._groups.read(tenant, req.conversation_id)
            if group.version is None:
                raise RequestError(ErrorCode.NOT_FOUND, "no such group")
            return self._committer.audience(
                group_conversation_id=req.conversation_id, membership_version=group.version,
                event_type=EventType.EDIT, inline_body=inline_decision(len(group.current), body_len)), group.version
        peer = req.peer_user_id
        if not peer or ids.conversation_id_direct(tenant, target.sender_id, peer) != req.conversation_id:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "peer_user_id does not match the conversation")
        users = sorted({target.sender_id, peer})
        return self._committer.audience(recipients=users, event_type=EventType.EDIT,
                                        inline_body=inline_decision(len(users), body_len)), None
