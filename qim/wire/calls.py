"""Every client call a backend serves, declared once with both of its ends
(docs/architecture.md "How to add a service"; docs/decisions/0105-one-declaration-per-call.md).

A `Call` names the client request opcode and message, the backend kind that serves it
(a row of qim/topology.py with a `gateway` column), the gateway's check (the function
in qim/services/gateway/backends/<kind>.py that rejects what needs no storage and returns
the routing key), the backend's handler (a method name on the backend's request
object) and the reply opcode and message. The gateway builds its routes from these
(qim/services/gateway/routes.py), each backend dispatches through `Dispatch` over its
own (`calls_of(kind)`): there is no hand-written branch per opcode on either side.
Synapse's ReplicationEndpoint (one class holding the caller's serialization and the
server's handler) is the model.

A new stateless client call is one line of CALLS, its check and its handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from google.protobuf.message import Message

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import (
    convstate_pb2,
    group_pb2,
    history_pb2,
    mailbox_pb2,
    message_pb2,
    moderation_pb2,
    push_pb2,
    reaction_pb2,
    room_pb2,
    session_pb2,
)
from qim.protocol import Opcode
from qim.topology import MAILBOX, ROOM, SESSION, WRITER
from qim.wire.validate import parse_request

_BACKENDS = "qim.services.gateway.backends"


@dataclass(frozen=True)
class Call:
    """One client call: `opcode` and `request` (the client's request message), `backend`
    (the service kind serving it), `check` ("module:function", run by the gateway as
    check(conn, body) -> routing key, RequestError for bad input before any backend),
    `handler` (the backend's method, awaited as handler(*context, request) -> the reply
    message or its bytes), `reply_opcode` and `reply` (the reply message), and `bulk`
    (the answer is pages: the gateway fetches a bounded number at a time)."""

    opcode: Opcode
    request: type[Message]
    backend: str
    check: str
    handler: str
    reply_opcode: Opcode
    reply: type[Message]
    bulk: bool = False


def _call(opcode: Opcode, request: type[Message], backend: str, handler: str, reply_opcode: Opcode,
          reply: type[Message], bulk: bool = False, check: str = "") -> Call:
    """A Call whose check is `<handler>_key` of the backend's gateway half unless named."""
    return Call(opcode, request, backend, f"{_BACKENDS}.{backend}:{check or handler + '_key'}", handler,
                reply_opcode, reply, bulk)


CALLS: tuple[Call, ...] = (
    _call(Opcode.SEND_MESSAGE, message_pb2.SendMessage, WRITER, "send", Opcode.SEND_ACK, message_pb2.SendAck),
    _call(Opcode.RECALL_MESSAGE, message_pb2.RecallMessage, WRITER, "recall", Opcode.RECALL_OK, message_pb2.RecallOk),
    _call(Opcode.EDIT_MESSAGE, message_pb2.EditMessage, WRITER, "edit", Opcode.EDIT_OK, message_pb2.EditOk),
    _call(Opcode.PULL_HISTORY, history_pb2.PullHistory, WRITER, "history", Opcode.HISTORY_BATCH,
          history_pb2.HistoryBatch, bulk=True),
    _call(Opcode.CREATE_GROUP, group_pb2.CreateGroup, WRITER, "create_group", Opcode.GROUP_OK, group_pb2.GroupOk),
    _call(Opcode.LEAVE_GROUP, group_pb2.LeaveGroup, WRITER, "leave_group", Opcode.GROUP_OK, group_pb2.GroupOk),
    _call(Opcode.PULL_MEMBERS, group_pb2.PullMembers, WRITER, "members", Opcode.MEMBERS_BATCH,
          group_pb2.MembersBatch, bulk=True),
    _call(Opcode.SET_GROUP_TITLE, group_pb2.SetGroupTitle, WRITER, "set_title", Opcode.GROUP_OK, group_pb2.GroupOk),
    _call(Opcode.REACT, reaction_pb2.React, WRITER, "react", Opcode.REACT_OK, reaction_pb2.ReactOk),
    _call(Opcode.TYPING, reaction_pb2.Typing, WRITER, "typing", Opcode.TYPING_OK, reaction_pb2.TypingOk),
    _call(Opcode.REPORT, moderation_pb2.Report, WRITER, "report", Opcode.REPORT_OK, moderation_pb2.ReportOk),
    _call(Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox, MAILBOX, "pull_mailbox", Opcode.MAILBOX_BATCH,
          mailbox_pb2.MailboxBatch, bulk=True),
    _call(Opcode.PULL_SESSION_LIST, session_pb2.PullSessionList, SESSION, "pull_list", Opcode.SESSION_LIST_BATCH,
          session_pb2.SessionListBatch, bulk=True, check="session_list_key"),
    _call(Opcode.MARK_READ, session_pb2.MarkRead, SESSION, "mark_read", Opcode.MARK_READ_OK, session_pb2.MarkReadOk),
    _call(Opcode.PULL_PROFILES, session_pb2.PullProfiles, SESSION, "profiles", Opcode.PROFILES_BATCH,
          session_pb2.ProfilesBatch),
    _call(Opcode.SET_CONVERSATION_STATE, convstate_pb2.SetConversationState, SESSION, "set_state",
          Opcode.CONVERSATION_STATE, convstate_pb2.ConversationState),
    _call(Opcode.SET_RECEIPTS, convstate_pb2.SetReceipts, SESSION, "set_receipts", Opcode.RECEIPTS_OK,
          convstate_pb2.ReceiptsOk),
    _call(Opcode.PULL_READERS, convstate_pb2.PullReaders, SESSION, "pull_readers", Opcode.READERS_BATCH,
          convstate_pb2.ReadersBatch),
    _call(Opcode.PUSH_REGISTER, push_pb2.PushRegister, SESSION, "push_register", Opcode.PUSH_REGISTER_OK,
          push_pb2.PushRegisterOk),  # device push registrations (docs/decisions/0128)
    _call(Opcode.PUSH_UNREGISTER, push_pb2.PushUnregister, SESSION, "push_unregister", Opcode.PUSH_UNREGISTER_OK,
          push_pb2.PushUnregisterOk),
    _call(Opcode.PUSH_LIST, push_pb2.PushList, SESSION, "push_list", Opcode.PUSH_LIST_OK, push_pb2.PushListOk),
    _call(Opcode.JOIN_ROOM, room_pb2.JoinRoom, ROOM, "join", Opcode.ROOM_JOINED, room_pb2.RoomJoined),
    _call(Opcode.ROOM_SEND, room_pb2.RoomSend, ROOM, "post", Opcode.ROOM_ACK, room_pb2.RoomAck, check="send_key"),
    _call(Opcode.LEAVE_ROOM, room_pb2.LeaveRoom, ROOM, "leave", Opcode.ROOM_LEFT, room_pb2.RoomLeft),
)


def calls_of(backend: str, calls: tuple[Call, ...] = CALLS) -> Mapping[int, Call]:
    """The calls `backend` serves, by client opcode (empty for a kind that serves none)."""
    return MappingProxyType({c.opcode: c for c in calls if c.backend == backend})


class Dispatch:
    """A backend's table: client opcode -> its Call and `target`'s bound handler, looked
    up once (AttributeError at start for a declared handler `target` lacks).

    `await dispatch(opcode, upstream, *context)` parses `upstream` as the call's request
    (RequestError INVALID_ARGUMENT naming it on garbage), awaits the handler and returns
    (reply opcode, reply bytes). Nothing awaits before the handler runs, so a handler
    that takes a place in a line before its first await (the writer's conversation turn)
    takes it in arrival order. An opcode the backend does not serve is
    RequestError(INVALID_ARGUMENT), the ERROR reply with the request id."""

    def __init__(self, backend: str, target: Any, calls: tuple[Call, ...] = CALLS) -> None:
        self.backend = backend
        self.calls = calls_of(backend, calls)
        self._handlers = {op: getattr(target, c.handler) for op, c in self.calls.items()}

    async def __call__(self, opcode: int, upstream: bytes, *context: Any) -> tuple[int, bytes]:
        """One client request forwarded by a gateway (class doc)."""
        reply = await self.answer(opcode, upstream, *context)
        return self.calls[opcode].reply_opcode, reply if isinstance(reply, bytes) else reply.SerializeToString()

    async def answer(self, opcode: int, upstream: bytes, *context: Any) -> Any:
        """The handler's reply itself (a message or its bytes), unserialized (class doc)."""
        call = self.calls.get(opcode)
        if call is None:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{self.backend} does not serve opcode 0x{opcode:04x}")
        return await self._handlers[opcode](*context, parse_request(call.request, upstream, call.opcode.name))
