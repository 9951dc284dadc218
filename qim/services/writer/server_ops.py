"""The ConversationWriter's handlers: its declared client calls (qim/wire/calls.py) and the admin plane.

Every handler takes the authenticated actor attached by the gateway (or the trusted
admin plane) and the upstream bytes unchanged; parsing failures are INVALID_ARGUMENT.

Requests that reserve a conversation_seq (sends, group changes, recall, delete) take
their conversation's turn (sequencer.py) here, synchronously, before the first await:
the RPC server starts one task per frame in arrival order, so the turns of one
conversation are handed out in arrival order (docs/design.md §3 submission order). The turn
is released when the request ends at the latest.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from qim._core import ids
from qim.consts import MESSAGE_TYPE_MEDIA, U63_MAX
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, history_pb2, internal_pb2, message_pb2, moderation_pb2, reaction_pb2
from qim.protocol import Opcode
from qim.services.writer.edits import Edits
from qim.services.writer.history import pull_history
from qim.services.writer.reports import Reports
from qim.services.writer.sequencer import NO_TURN, Turn
from qim.stores.groups import GroupStore
from qim.stores.messages import MessageStore
from qim.topology import WRITER
from qim.wire.calls import Dispatch
from qim.wire.media import BadMediaRef, check_media_body
from qim.wire.validate import check_group_id


def _group_conversation(tenant: int, group_id: int) -> bytes:
    check_group_id(group_id)
    return ids.conversation_id_group(tenant, group_id)


class WriterOps:
    """`client(actor, opcode, upstream)` and `admin(request)` -> (reply opcode, reply bytes).
    Client requests dispatch through the writer's declared calls (qim/wire/calls.py:
    each handler below is named by one)."""

    def __init__(self, messages: MessageStore, group_store: GroupStore, committer, groups, moderation,
                 reactions=None) -> None:
        self._messages = messages
        self._group_store = group_store
        self._committer = committer
        self._groups = groups
        self._moderation = moderation
        self._reactions = reactions  # REACT, TYPING (reactions.py; decision 0121)
        self.edits: Optional[Edits] = None  # EDIT_MESSAGE (edits.Edits, set by the writer; docs/decisions/0120)
        self.reports: Optional[Reports] = None  # REPORT (reports.Reports, set by the writer; decision 0124)
        self.media_key = b""  # QIM_MEDIA_REF_KEY (set by the writer): verifies MEDIA bodies (decision 0138)
        self.media_refs: Any = None  # the MediaLedger (set by the writer): references of sent media (decision 0139)
        self._dispatch = Dispatch(WRITER, self)

    async def client(self, actor: internal_pb2.Actor, opcode: int, upstream: bytes) -> tuple[int, bytes]:
        """One client request forwarded by a gateway (opcode 0: SEND_MESSAGE, the
        WriterSend of before the field). Raises RequestError."""
        if len(actor.tenant_id) != 16 or not 0 < actor.user_id <= U63_MAX:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "no authenticated actor")
        tenant = int.from_bytes(actor.tenant_id, "big")
        # no await before the ticket: see the module docstring (Dispatch awaits nothing first)
        return await self._dispatch(opcode or Opcode.SEND_MESSAGE, upstream, actor, tenant)

    def _ticket(self, actor: internal_pb2.Actor, conversation_id: bytes) -> Turn:
        return self._committer.ticket(actor.tenant_id, conversation_id)

    async def send(self, actor: internal_pb2.Actor, tenant: int, msg: message_pb2.SendMessage) -> message_pb2.SendAck:
        """SEND_MESSAGE, in its conversation's turn. A MEDIA body must be a MediaRef the
        MediaService signed for this sender (decision 0138): INVALID_ARGUMENT otherwise,
        checked before the turn (no await: a local HMAC)."""
        media_id = ""
        if msg.message_type == MESSAGE_TYPE_MEDIA:
            if not self.media_key:
                raise RequestError(ErrorCode.INVALID_ARGUMENT, "MEDIA messages need the MediaService "
                                   "(QIM_MEDIA_REF_KEY is not set on this writer)")
            try:
                media_id = check_media_body(self.media_key, tenant, actor.user_id, msg.body).media_id
            except BadMediaRef as exc:
                raise RequestError(ErrorCode.INVALID_ARGUMENT, str(exc)) from None
        with self._ticket(actor, msg.conversation_id) as turn:
            if media_id and self.media_refs is not None:  # decision 0139: the sweeper keeps it from here
                conv = msg.conversation_id.hex()
                sending = f"c:{conv}:{msg.client_message_id.hex()}:{int(time.time() * 1000)}"
                if not await self.media_refs.refer(tenant, media_id, sending):
                    raise RequestError(ErrorCode.INVALID_ARGUMENT, "MEDIA body references media that is gone "
                                       "(never sent within QIM_MEDIA_ORPHAN_MS of its upload): upload it again")
            ack = await self._committer.commit(actor, msg, turn)
            if media_id and self.media_refs is not None:  # a retry of the send marks it again (idempotent)
                # the message's reference replaces the send's: a recall releases it at once
                await self.media_refs.refer(tenant, media_id, f"m:{conv}:{ack.message_id.hex()}", replaces=sending)
            return ack

    async def recall(self, actor: internal_pb2.Actor, tenant: int,
                     recall: message_pb2.RecallMessage) -> message_pb2.RecallOk:
        """RECALL_MESSAGE, in its conversation's turn."""
        with self._ticket(actor, recall.conversation_id) as turn:
            return await self._moderation.recall(actor, recall, turn)

    async def edit(self, actor: internal_pb2.Actor, tenant: int, edit: message_pb2.EditMessage) -> message_pb2.EditOk:
        """EDIT_MESSAGE, in its conversation's turn (edits.py; docs/decisions/0120)."""
        if self.edits is None:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "this writer takes no edits")
        with self._ticket(actor, edit.conversation_id) as turn:
            return await self.edits.edit(actor, edit, turn)

    async def create_group(self, actor: internal_pb2.Actor, tenant: int,
                           create: group_pb2.CreateGroup) -> group_pb2.GroupOk:
        """CREATE_GROUP, in the group conversation's turn."""
        with self._ticket(actor, _group_conversation(tenant, create.group_id)) as turn:
            return await self._groups.create(actor, tenant, create, turn)

    async def leave_group(self, actor: internal_pb2.Actor, tenant: int, leave: group_pb2.LeaveGroup) -> group_pb2.GroupOk:
        """LEAVE_GROUP: the actor removes itself, in the group conversation's turn."""
        with self._ticket(actor, _group_conversation(tenant, leave.group_id)) as turn:
            return await self._groups.edit(actor, tenant, leave.group_id, leave.client_message_id, [],
                                           [actor.user_id], turn)

    async def set_title(self, actor: internal_pb2.Actor, tenant: int,
                        retitle: group_pb2.SetGroupTitle) -> group_pb2.GroupOk:
        """SET_GROUP_TITLE, in the group conversation's turn."""
        with self._ticket(actor, _group_conversation(tenant, retitle.group_id)) as turn:
            return await self._groups.retitle(actor, tenant, retitle, turn)

    async def history(self, actor: internal_pb2.Actor, tenant: int,
                      req: history_pb2.PullHistory) -> history_pb2.HistoryBatch:
        """PULL_HISTORY: a read, no turn."""
        batch = await pull_history(self._messages, self._group_store, actor, req)
        if self._reactions is not None:  # the summaries ride with the page (decision 0121)
            await self._reactions.annotate(tenant, actor.user_id, req.conversation_id, batch)
        return batch

    async def react(self, actor: internal_pb2.Actor, tenant: int, req: reaction_pb2.React) -> bytes:
        """REACT: no turn, no conversation_seq (reactions.py)."""
        return await self._reactions.react(actor, tenant, req)

    async def report(self, actor: internal_pb2.Actor, tenant: int,
                     req: moderation_pb2.Report) -> moderation_pb2.ReportOk:
        """REPORT: no turn, nothing in the conversation (reports.py; decision 0124)."""
        if self.reports is None:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "this writer takes no reports")
        return await self.reports.report(actor, tenant, req)

    async def typing(self, actor: internal_pb2.Actor, tenant: int, req: reaction_pb2.Typing) -> bytes:
        """TYPING: no turn, nothing stored (reactions.py)."""
        return await self._reactions.typing(actor, tenant, req)

    async def members(self, actor: internal_pb2.Actor, tenant: int, pull: group_pb2.PullMembers) -> group_pb2.MembersBatch:
        """PULL_MEMBERS: a read, no turn; a bad group id is INVALID_ARGUMENT as every other group opcode here."""
        check_group_id(pull.group_id)
        return await self._groups.members(actor, tenant, pull)

    async def admin(self, req: internal_pb2.AdminRequest) -> tuple[int, bytes]:
        """Trusted admin plane (qimctl): membership edits and operator deletes, actor 0."""
        if len(req.tenant_id) != 16:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "tenant_id must be 16 bytes")
        tenant = int.from_bytes(req.tenant_id, "big")
        which = req.WhichOneof("op")
        turn = NO_TURN
        try:
            if which == "membership":
                m = req.membership
                if len(m.request_id) != 16 or not any(m.request_id):
                    raise RequestError(ErrorCode.INVALID_ARGUMENT, "request_id must be 16 non-zero bytes")
                turn = self._committer.ticket(req.tenant_id, _group_conversation(tenant, m.group_id))
                operator = internal_pb2.Actor(tenant_id=req.tenant_id, user_id=0, device_id=0)
                ok = await self._groups.edit(operator, tenant, m.group_id, m.request_id, list(m.add), list(m.remove),
                                             turn)
                return Opcode.GROUP_OK, ok.SerializeToString()
            if which == "delete_message":
                turn = self._committer.ticket(req.tenant_id, req.delete_message.conversation_id)
                ok = await self._moderation.delete(tenant, req.delete_message, turn)
                return Opcode.RECALL_OK, ok.SerializeToString()
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "empty admin request")
        finally:
            turn.release()
