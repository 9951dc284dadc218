"""Opcode table of the ConversationWriter: which client or admin request goes where.

Every handler takes the authenticated actor attached by the gateway (or the trusted
admin plane) and the upstream bytes unchanged; parsing failures are INVALID_ARGUMENT.

Requests that reserve a conversation_seq (sends, group changes, recall, delete) take
their conversation's turn (sequencer.py) here, synchronously, before the first await:
the RPC server starts one task per frame in arrival order, so the turns of one
conversation are handed out in arrival order (docs/design.md §3 submission order). The turn
is released when the request ends at the latest.
"""

from __future__ import annotations

from qim._core import ids
from qim.consts import U63_MAX
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, history_pb2, internal_pb2, message_pb2
from qim.protocol import Opcode
from qim.services.writer.history import pull_history
from qim.services.writer.sequencer import NO_TURN
from qim.stores.groups import GroupStore
from qim.stores.messages import MessageStore
from qim.wire.validate import check_group_id, parse_send
from qim.wire.validate import parse_request as parse


def _group_conversation(tenant: int, group_id: int) -> bytes:
    check_group_id(group_id)
    return ids.conversation_id_group(tenant, group_id)


class WriterOps:
    """`client(actor, opcode, upstream)` and `admin(request)` -> (reply opcode, reply bytes)."""

    def __init__(self, messages: MessageStore, group_store: GroupStore, committer, groups, moderation) -> None:
        self._messages = messages
        self._group_store = group_store
        self._committer = committer
        self._groups = groups
        self._moderation = moderation

    async def client(self, actor: internal_pb2.Actor, opcode: int, upstream: bytes) -> tuple[int, bytes]:
        """One client request forwarded by a gateway. Raises RequestError."""
        if len(actor.tenant_id) != 16 or not 0 < actor.user_id <= U63_MAX:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "no authenticated actor")
        tenant = int.from_bytes(actor.tenant_id, "big")
        # no await before the ticket: see the module docstring
        turn = NO_TURN
        try:
            if opcode in (0, Opcode.SEND_MESSAGE):
                msg = parse_send(upstream)
                turn = self._committer.ticket(actor.tenant_id, msg.conversation_id)
                return Opcode.SEND_ACK, (await self._committer.commit(actor, msg, turn)).SerializeToString()
            if opcode == Opcode.RECALL_MESSAGE:
                recall = parse(message_pb2.RecallMessage, upstream)
                turn = self._committer.ticket(actor.tenant_id, recall.conversation_id)
                recalled = await self._moderation.recall(actor, recall, turn)
                return Opcode.RECALL_OK, recalled.SerializeToString()
            if opcode == Opcode.CREATE_GROUP:
                create = parse(group_pb2.CreateGroup, upstream)
                turn = self._committer.ticket(actor.tenant_id, _group_conversation(tenant, create.group_id))
                return Opcode.GROUP_OK, (await self._groups.create(actor, tenant, create, turn)).SerializeToString()
            if opcode == Opcode.LEAVE_GROUP:
                leave = parse(group_pb2.LeaveGroup, upstream)
                turn = self._committer.ticket(actor.tenant_id, _group_conversation(tenant, leave.group_id))
                ok = await self._groups.edit(actor, tenant, leave.group_id, leave.client_message_id, [],
                                             [actor.user_id], turn)
                return Opcode.GROUP_OK, ok.SerializeToString()
            if opcode == Opcode.SET_GROUP_TITLE:
                retitle = parse(group_pb2.SetGroupTitle, upstream)
                turn = self._committer.ticket(actor.tenant_id, _group_conversation(tenant, retitle.group_id))
                return Opcode.GROUP_OK, (await self._groups.retitle(actor, tenant, retitle, turn)).SerializeToString()
            if opcode == Opcode.PULL_HISTORY:
                batch = await pull_history(self._messages, self._group_store, actor,
                                           parse(history_pb2.PullHistory, upstream))
                return Opcode.HISTORY_BATCH, batch.SerializeToString()
            if opcode == Opcode.PULL_MEMBERS:
                pull = parse(group_pb2.PullMembers, upstream)
                check_group_id(pull.group_id)  # as every other group opcode here: a bad group id is INVALID_ARGUMENT
                batch = await self._groups.members(actor, tenant, pull)
                return Opcode.MEMBERS_BATCH, batch.SerializeToString()
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"writer does not serve opcode 0x{opcode:04x}")
        finally:
            turn.release()

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
