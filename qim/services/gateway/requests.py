"""Gateway-side validation and routing of client requests (DESIGN.md §4, §5.1, §7).

Each function parses the upstream bytes (INVALID_ARGUMENT on garbage), checks what
needs no storage (id shapes, sizes, limits) and returns the routing key. The bytes are
forwarded unchanged; authorisation against membership happens in the writer.
"""

from __future__ import annotations

from typing import Callable

from google.protobuf.message import DecodeError, Message

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, GROUP_MAX_MEMBERS, ID_LEN, U63_MAX
from qim.errors import ErrorCode, IdError, RequestError
from qim.proto.v1 import group_pb2, history_pb2, message_pb2, session_pb2
from qim.protocol import Opcode
from qim.services.writer.validate import check_send_shape, direct_audience, parse_send

ZERO_ID = bytes(ID_LEN)


def parse(cls: type[Message], body: bytes, name: str) -> Message:
    try:
        return cls.FromString(body)
    except DecodeError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{name} body is not a valid {cls.__name__}") from None


def check_id(value: bytes, name: str) -> None:
    if len(value) != ID_LEN or value == ZERO_ID:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{name} must be 16 non-zero bytes")


def check_conversation(conversation_id: bytes) -> int:
    check_id(conversation_id, "conversation_id")
    try:
        kind = ids.conversation_kind(conversation_id)
    except IdError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id has an unknown kind") from None
    if kind not in (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "rooms are not served through this opcode")
    return kind


def check_group_id(group_id: int) -> None:
    if not 0 < group_id <= U63_MAX:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "group_id must be non-zero with bit 63 clear")


def send_key(conn, body: bytes) -> bytes:
    msg = parse_send(body)
    kind = check_send_shape(msg, conn.gw.config.max_body)
    if kind == CONVERSATION_KIND_DIRECT:
        direct_audience(conn.tenant, conn.user_id, msg)
    return msg.conversation_id


def recall_key(conn, body: bytes) -> bytes:
    req = parse(message_pb2.RecallMessage, body, "RECALL_MESSAGE")
    check_conversation(req.conversation_id)
    check_id(req.message_id, "message_id")
    check_id(req.client_message_id, "client_message_id")
    return req.conversation_id


def history_key(conn, body: bytes) -> bytes:
    req = parse(history_pb2.PullHistory, body, "PULL_HISTORY")
    check_conversation(req.conversation_id)
    return req.conversation_id


def create_group_key(conn, body: bytes) -> bytes:
    req = parse(group_pb2.CreateGroup, body, "CREATE_GROUP")
    check_group_id(req.group_id)
    check_id(req.client_message_id, "client_message_id")
    members = set(req.members) | {conn.user_id}
    if len(members) > GROUP_MAX_MEMBERS:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"a group holds at most {GROUP_MAX_MEMBERS} members")
    if any(not 0 < m <= U63_MAX for m in members):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "member ids must be non-zero with bit 63 clear")
    return ids.conversation_id_group(conn.tenant, req.group_id)


def leave_group_key(conn, body: bytes) -> bytes:
    req = parse(group_pb2.LeaveGroup, body, "LEAVE_GROUP")
    check_group_id(req.group_id)
    check_id(req.client_message_id, "client_message_id")
    return ids.conversation_id_group(conn.tenant, req.group_id)


def members_key(conn, body: bytes) -> bytes:
    req = parse(group_pb2.PullMembers, body, "PULL_MEMBERS")
    check_group_id(req.group_id)
    return ids.conversation_id_group(conn.tenant, req.group_id)


def session_check(conn, body: bytes, opcode: int) -> None:
    if opcode == Opcode.MARK_READ:
        req = parse(session_pb2.MarkRead, body, "MARK_READ")
        check_conversation(req.conversation_id)
    else:
        parse(session_pb2.PullSessionList, body, "PULL_SESSION_LIST")


# opcode -> routing-key function; every one of these goes to a writer.
WRITER_OPS: dict[int, Callable] = {
    Opcode.SEND_MESSAGE: send_key,
    Opcode.RECALL_MESSAGE: recall_key,
    Opcode.PULL_HISTORY: history_key,
    Opcode.CREATE_GROUP: create_group_key,
    Opcode.LEAVE_GROUP: leave_group_key,
    Opcode.PULL_MEMBERS: members_key,
}
SESSION_OPS = frozenset({Opcode.PULL_SESSION_LIST, Opcode.MARK_READ})
