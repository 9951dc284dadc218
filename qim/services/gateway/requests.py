"""Gateway-side validation of client requests (docs/design.md §4, §5.1, §7).

Each `*_key` function parses the upstream bytes (INVALID_ARGUMENT on garbage), checks
what needs no storage (id shapes, sizes, limits; the shared checks of qim/wire/validate.py)
and returns the routing key: the conversation_id for the writer, the user_id for the
session node, the user's mailbox shard for the mailbox node. The service table names
each function for its client opcode (qim/topology.py); the routing table is
qim/services/gateway/routes.py. The bytes are forwarded unchanged; authorisation
against membership happens in the backend. `conn` is the client connection: `tenant`,
`user_id` and `shard` from AUTH and `gw.config.max_body`.
"""

from __future__ import annotations

from typing import Any

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, GROUP_MAX_MEMBERS, PROFILES_PAGE_MAX, U63_MAX
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, history_pb2, mailbox_pb2, message_pb2, session_pb2
from qim.wire.names import check_title
from qim.wire.validate import (
    check_conversation,
    check_group_id,
    check_id,
    check_send_shape,
    direct_audience,
    parse_request,
    parse_send,
)

__all__ = ["check_conversation", "check_group_id", "check_id", "create_group_key", "history_key", "leave_group_key",
           "mark_read_key", "members_key", "pull_mailbox_key", "recall_key", "send_key", "session_list_key"]


def send_key(conn: Any, body: bytes) -> bytes:
    """SEND_MESSAGE: shape, body size (QIM_MAX_MESSAGE_BODY), direct audience."""
    msg = parse_send(body)
    kind = check_send_shape(msg, conn.gw.config.max_body)
    if kind == CONVERSATION_KIND_DIRECT:
        direct_audience(conn.tenant, conn.user_id, msg)
    return msg.conversation_id


def recall_key(conn: Any, body: bytes) -> bytes:
    """RECALL_MESSAGE: conversation, message and client message ids."""
    req = parse_request(message_pb2.RecallMessage, body, "RECALL_MESSAGE")
    check_conversation(req.conversation_id)
    check_id(req.message_id, "message_id")
    check_id(req.client_message_id, "client_message_id")
    return req.conversation_id


def history_key(conn: Any, body: bytes) -> bytes:
    """PULL_HISTORY: a direct or group conversation."""
    req = parse_request(history_pb2.PullHistory, body, "PULL_HISTORY")
    check_conversation(req.conversation_id)
    return req.conversation_id


def create_group_key(conn: Any, body: bytes) -> bytes:
    """CREATE_GROUP: group id, request id, at most GROUP_MAX_MEMBERS valid members
    (PAYLOAD_TOO_LARGE past it); the key is the group's conversation."""
    req = parse_request(group_pb2.CreateGroup, body, "CREATE_GROUP")
    check_group_id(req.group_id)
    check_id(req.client_message_id, "client_message_id")
    members = set(req.members) | {conn.user_id}
    if len(members) > GROUP_MAX_MEMBERS:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"a group holds at most {GROUP_MAX_MEMBERS} members")
    if any(not 0 < m <= U63_MAX for m in members):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "member ids must be non-zero with bit 63 clear")
    check_title(req.title)
    return ids.conversation_id_group(conn.tenant, req.group_id)


def set_title_key(conn: Any, body: bytes) -> bytes:
    """SET_GROUP_TITLE: group id, request id and the title; the key is the group's conversation."""
    req = parse_request(group_pb2.SetGroupTitle, body, "SET_GROUP_TITLE")
    check_group_id(req.group_id)
    check_id(req.client_message_id, "client_message_id")
    check_title(req.title)
    return ids.conversation_id_group(conn.tenant, req.group_id)


def profiles_key(conn: Any, body: bytes) -> int:
    """PULL_PROFILES: 1..PROFILES_PAGE_MAX user ids, each non-zero with bit 63 clear; the
    key is the actor's session shard (its owner answers: names are not sharded)."""
    req = parse_request(session_pb2.PullProfiles, body, "PULL_PROFILES")
    if not 0 < len(req.user_ids) <= PROFILES_PAGE_MAX:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"PULL_PROFILES asks for 1 to {PROFILES_PAGE_MAX} user ids")
    if any(not 0 < u <= U63_MAX for u in req.user_ids):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "user ids must be non-zero with bit 63 clear")
    return conn.shard


def leave_group_key(conn: Any, body: bytes) -> bytes:
    """LEAVE_GROUP: group id and request id; the key is the group's conversation."""
    req = parse_request(group_pb2.LeaveGroup, body, "LEAVE_GROUP")
    check_group_id(req.group_id)
    check_id(req.client_message_id, "client_message_id")
    return ids.conversation_id_group(conn.tenant, req.group_id)


def members_key(conn: Any, body: bytes) -> bytes:
    """PULL_MEMBERS: group id; the key is the group's conversation."""
    req = parse_request(group_pb2.PullMembers, body, "PULL_MEMBERS")
    check_group_id(req.group_id)
    return ids.conversation_id_group(conn.tenant, req.group_id)


def session_list_key(conn: Any, body: bytes) -> int:
    """PULL_SESSION_LIST: a valid request; the key is the user's session shard (its
    virtual bucket's MailboxShard, never a modulo of the node count: docs/design.md §13)."""
    parse_request(session_pb2.PullSessionList, body, "PULL_SESSION_LIST")
    return conn.shard


def mark_read_key(conn: Any, body: bytes) -> int:
    """MARK_READ: a direct or group conversation; the key is the user's session shard."""
    req = parse_request(session_pb2.MarkRead, body, "MARK_READ")
    check_conversation(req.conversation_id)
    return conn.shard


def pull_mailbox_key(conn: Any, body: bytes) -> int:
    """PULL_MAILBOX: a valid request; the key is the user's mailbox shard."""
    parse_request(mailbox_pb2.PullMailbox, body, "PULL_MAILBOX")
    return conn.shard
