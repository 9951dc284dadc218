"""Validation of a send before anything is reserved (DESIGN.md §4 gateway validation,
§5.2 "all validation happens before INCR").

Shared by the gateway (first line) and the writer (which re-authorises from the actor
the gateway attached). Raises RequestError with the wire code; never truncates.
"""

from __future__ import annotations

import struct

import blake3
from google.protobuf.message import DecodeError

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, ID_LEN, MAX_CUSTOM_TYPE_BYTES, MAX_MESSAGE_BODY
from qim.errors import ErrorCode, IdError, RequestError
from qim.proto.v1 import message_pb2

IDENTITY_DOMAIN = b"qim.send-identity.v1\0"
ZERO_ID = bytes(ID_LEN)


def parse_send(raw: bytes) -> message_pb2.SendMessage:
    """Parse SEND_MESSAGE bytes; INVALID_ARGUMENT on garbage."""
    msg = message_pb2.SendMessage()
    try:
        msg.ParseFromString(raw)
    except DecodeError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "SEND_MESSAGE body is not a valid SendMessage") from None
    return msg


def check_send_shape(msg: message_pb2.SendMessage, max_body: int = MAX_MESSAGE_BODY) -> int:
    """Checks that need no identity: id lengths, custom_type, body size, kind.
    Returns the conversation kind. RequestError on a violation."""
    for name in ("client_message_id", "conversation_id"):
        value = getattr(msg, name)
        if len(value) != ID_LEN or value == ZERO_ID:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{name} must be 16 non-zero bytes")
    if len(msg.custom_type) > MAX_CUSTOM_TYPE_BYTES:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"custom_type exceeds {MAX_CUSTOM_TYPE_BYTES} bytes")
    if len(msg.body) > max_body:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"body exceeds {max_body} bytes")
    if msg.message_type < 0 or msg.message_type > 0xFFFFFFFF:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "message_type out of range")
    try:
        kind = ids.conversation_kind(msg.conversation_id)
    except IdError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id has an unknown kind") from None
    if kind not in (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP):
        # Rooms have their own send path (room_seq) and never go through the writer.
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "rooms are not sent with SEND_MESSAGE")
    return kind


def direct_audience(tenant: int, actor_user: int, msg: message_pb2.SendMessage) -> list[int]:
    """The frozen audience of a direct send: sorted distinct (peer, sender).
    INVALID_ARGUMENT when the peer is missing or the conversation_id is not theirs."""
    peer = msg.recipient_user_id
    if peer == 0 or peer >= 1 << 64:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "recipient_user_id is required for a direct send")
    if ids.conversation_id_direct(tenant, actor_user, peer) != msg.conversation_id:
        raise RequestError(ErrorCode.FORBIDDEN, "conversation_id is not the direct conversation of sender and recipient")
    return sorted({peer, actor_user})


def op_digest(*parts: bytes) -> bytes:
    """36-byte identity of a non-send operation (group change, recall, delete): BLAKE3-256
    over length-prefixed parts ‖ part count u32."""
    h = blake3.blake3(b"qim.op-identity.v1\0")
    for part in parts:
        h.update(struct.pack(">I", len(part)))
        h.update(part)
    return h.digest() + struct.pack(">I", len(parts))


def identity_digest(msg: message_pb2.SendMessage) -> bytes:
    """36-byte identity of a send (DESIGN.md §5.2): BLAKE3-256 over the content fields
    ‖ body length u32. Two sends with one cmid are the same request iff digests match."""
    h = blake3.blake3(IDENTITY_DOMAIN)
    h.update(msg.conversation_id)
    h.update(struct.pack(">QIB", msg.recipient_user_id, msg.message_type, len(msg.custom_type)))
    h.update(msg.custom_type)
    h.update(msg.body)
    return h.digest() + struct.pack(">I", len(msg.body))
