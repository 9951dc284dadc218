"""The gateway's half of SessionProjection: the checks its declared calls name
(qim/wire/calls.py; docs/design.md §4, §6).

Each `*_key(conn, body)` parses the upstream bytes (INVALID_ARGUMENT on garbage), checks
what needs no storage and returns the routing key: the user's session shard from AUTH
(`conn.shard`; its live owner answers, docs/design.md §13).
"""

from __future__ import annotations

from qim.consts import PROFILES_PAGE_MAX, U63_MAX
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import convstate_pb2, push_pb2, session_pb2
from qim.services.gateway.context import ClientSession
from qim.wire.push import check_register
from qim.wire.validate import check_conversation, parse_request


def session_list_key(conn: ClientSession, body: bytes) -> int:
    """PULL_SESSION_LIST: a valid request; the key is the user's session shard (its
    virtual bucket's MailboxShard, never a modulo of the node count: docs/design.md §13)."""
    parse_request(session_pb2.PullSessionList, body, "PULL_SESSION_LIST")
    return conn.shard


def mark_read_key(conn: ClientSession, body: bytes) -> int:
    """MARK_READ: a direct or group conversation; the key is the user's session shard."""
    req = parse_request(session_pb2.MarkRead, body, "MARK_READ")
    check_conversation(req.conversation_id)
    return conn.shard


def profiles_key(conn: ClientSession, body: bytes) -> int:
    """PULL_PROFILES: 1..PROFILES_PAGE_MAX user ids, each non-zero with bit 63 clear; the
    key is the actor's session shard (its owner answers: names are not sharded)."""
    req = parse_request(session_pb2.PullProfiles, body, "PULL_PROFILES")
    if not 0 < len(req.user_ids) <= PROFILES_PAGE_MAX:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"PULL_PROFILES asks for 1 to {PROFILES_PAGE_MAX} user ids")
    if any(not 0 < u <= U63_MAX for u in req.user_ids):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "user ids must be non-zero with bit 63 clear")
    return conn.shard


def set_state_key(conn: ClientSession, body: bytes) -> int:
    """SET_CONVERSATION_STATE: a direct or group conversation and at least one field;
    the key is the user's session shard (docs/decisions/0122)."""
    req = parse_request(convstate_pb2.SetConversationState, body, "SET_CONVERSATION_STATE")
    check_conversation(req.conversation_id)
    if not (req.HasField("pinned") or req.HasField("muted_until") or req.HasField("hidden")):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "SET_CONVERSATION_STATE changes nothing (set a field)")
    return conn.shard


def set_receipts_key(conn: ClientSession, body: bytes) -> int:
    """SET_RECEIPTS: a valid request; the key is the user's session shard."""
    parse_request(convstate_pb2.SetReceipts, body, "SET_RECEIPTS")
    return conn.shard


def pull_readers_key(conn: ClientSession, body: bytes) -> int:
    """PULL_READERS: a direct or group conversation and a seq > 0; the user's session shard."""
    req = parse_request(convstate_pb2.PullReaders, body, "PULL_READERS")
    check_conversation(req.conversation_id)
    if req.conversation_seq == 0:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_seq must be > 0")
    return conn.shard


def push_register_key(conn: ClientSession, body: bytes) -> int:
    """PUSH_REGISTER: a registration that passes qim/wire/push.py (docs/decisions/0128);
    the user's session shard."""
    check_register(parse_request(push_pb2.PushRegister, body, "PUSH_REGISTER"))
    return conn.shard


def push_unregister_key(conn: ClientSession, body: bytes) -> int:
    """PUSH_UNREGISTER: a valid request; the user's session shard."""
    parse_request(push_pb2.PushUnregister, body, "PUSH_UNREGISTER")
    return conn.shard


def push_list_key(conn: ClientSession, body: bytes) -> int:
    """PUSH_LIST: a valid request; the user's session shard."""
    parse_request(push_pb2.PushList, body, "PUSH_LIST")
    return conn.shard
