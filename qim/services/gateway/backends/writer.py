"""The gateway's half of the ConversationWriter: the checks its declared calls name
(qim/wire/calls.py; docs/design.md §4, §5.1, §7).

Each `*_key(conn, body)` parses the upstream bytes (INVALID_ARGUMENT on garbage), checks
what needs no storage (id shapes, sizes, limits; the shared checks of qim/wire/validate.py)
and returns the routing key: the conversation_id (rendezvous over the writers). The
bytes are forwarded unchanged; authorisation against membership happens in the writer.
`conn` is the client connection: `tenant`, `user_id` from AUTH and `gw.config.max_body`.
"""

from __future__ import annotations

from qim._core import ids, sendkey
from qim.consts import CONVERSATION_KIND_DIRECT, GROUP_MAX_MEMBERS, U63_MAX
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, history_pb2, message_pb2, moderation_pb2, reaction_pb2
from qim.services.gateway.context import ClientSession
from qim.wire.names import check_title
from qim.wire.reaction import check_react, check_typing
from qim.wire.report import check_report
from qim.wire.validate import (
    check_conversation,
    check_group_id,
    check_id,
    check_send_shape,
    direct_audience,
    parse_request,
    parse_send,
)


def send_key(conn: ClientSession, body: bytes) -> bytes:
    """SEND_MESSAGE: shape, body size (QIM_MAX_MESSAGE_BODY), direct audience. A plain
    send that passes every check is keyed by the compiled fast path straight from its
    bytes (qim/_core/sendkey.pyx, the same answer: its twin's rule); anything else
    (replies, mentions, a refusal, odd encodings) by the full path below."""
    key = sendkey.route_key(body, conn.tenant, conn.user_id, conn.gw.config.max_body)
    if key is not None:
        return key
    msg = parse_send(body)
    kind = check_send_shape(msg, conn.gw.config.max_body)
    if kind == CONVERSATION_KIND_DIRECT:
        direct_audience(conn.tenant, conn.user_id, msg)
    return msg.conversation_id


def recall_key(conn: ClientSession, body: bytes) -> bytes:
    """RECALL_MESSAGE: conversation, message and client message ids."""
    req = parse_request(message_pb2.RecallMessage, body, "RECALL_MESSAGE")
    check_conversation(req.conversation_id)
    check_id(req.message_id, "message_id")
    check_id(req.client_message_id, "client_message_id")
    return req.conversation_id


def edit_key(conn: ClientSession, body: bytes) -> bytes:
    """EDIT_MESSAGE (docs/decisions/0120): conversation, message and client message ids,
    the new body's size (QIM_MAX_MESSAGE_BODY, as a send's)."""
    req = parse_request(message_pb2.EditMessage, body, "EDIT_MESSAGE")
    check_conversation(req.conversation_id)
    check_id(req.message_id, "message_id")
    check_id(req.client_message_id, "client_message_id")
    if len(req.body) > conn.gw.config.max_body:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"body exceeds {conn.gw.config.max_body} bytes")
    return req.conversation_id


def report_key(conn: ClientSession, body: bytes) -> bytes:
    """REPORT (docs/decisions/0124): ids, reason and text size (qim/wire/report.py)."""
    req = parse_request(moderation_pb2.Report, body, "REPORT")
    check_report(req)
    return req.conversation_id


def history_key(conn: ClientSession, body: bytes) -> bytes:
    """PULL_HISTORY: a direct or group conversation."""
    req = parse_request(history_pb2.PullHistory, body, "PULL_HISTORY")
    check_conversation(req.conversation_id)
    return req.conversation_id


def create_group_key(conn: ClientSession, body: bytes) -> bytes:
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


def set_title_key(conn: ClientSession, body: bytes) -> bytes:
    """SET_GROUP_TITLE: group id, request id and the title; the key is the group's conversation."""
    req = parse_request(group_pb2.SetGroupTitle, body, "SET_GROUP_TITLE")
    check_group_id(req.group_id)
    check_id(req.client_message_id, "client_message_id")
    check_title(req.title)
    return ids.conversation_id_group(conn.tenant, req.group_id)


def leave_group_key(conn: ClientSession, body: bytes) -> bytes:
    """LEAVE_GROUP: group id and request id; the key is the group's conversation."""
    req = parse_request(group_pb2.LeaveGroup, body, "LEAVE_GROUP")
    check_group_id(req.group_id)
    check_id(req.client_message_id, "client_message_id")
    return ids.conversation_id_group(conn.tenant, req.group_id)


def members_key(conn: ClientSession, body: bytes) -> bytes:
    """PULL_MEMBERS: group id; the key is the group's conversation."""
    req = parse_request(group_pb2.PullMembers, body, "PULL_MEMBERS")
    check_group_id(req.group_id)
    return ids.conversation_id_group(conn.tenant, req.group_id)


def react_key(conn: ClientSession, body: bytes) -> bytes:
    """REACT: conversation, message id and emoji (qim/wire/reaction.py); the key is the conversation."""
    req = parse_request(reaction_pb2.React, body, "REACT")
    check_react(req)
    return req.conversation_id


def typing_key(conn: ClientSession, body: bytes) -> bytes:
    """TYPING: a direct or group conversation; the key is the conversation."""
    req = parse_request(reaction_pb2.Typing, body, "TYPING")
    check_typing(req)
    return req.conversation_id
