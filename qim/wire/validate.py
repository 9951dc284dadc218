"""Validation of a send before anything is reserved (docs/design.md §4 gateway validation,
§5.2 "all validation happens before INCR").

The one definition (docs/decisions/0019), shared by the gateway (first line), the writer (which
re-authorises from the actor the gateway attached) and SessionProjection. Raises
RequestError with the wire code; never truncates.
"""

from __future__ import annotations

import struct
from typing import TypeVar

import blake3
from google.protobuf.message import DecodeError, Message

from qim._core import ids
from qim.consts import (
    CONVERSATION_KIND_DIRECT,
    CONVERSATION_KIND_GROUP,
    ID_LEN,
    MAX_CUSTOM_TYPE_BYTES,
    MAX_MENTIONS,
    MAX_MESSAGE_BODY,
    MESSAGE_TYPE_CONTROL,
    MESSAGE_TYPE_TEXT,
    U63_MAX,
)
from qim.errors import ErrorCode, IdError, RequestError
from qim.proto.v1 import message_pb2

IDENTITY_DOMAIN = b"qim.send-identity.v1\0"
M = TypeVar("M", bound=Message)
ZERO_ID = bytes(ID_LEN)


def parse_request(cls: type[M], body: bytes, name: str = "") -> M:
    """Parse `body` as `cls`; RequestError(INVALID_ARGUMENT) on garbage, naming the
    request (`name`, e.g. "PULL_HISTORY") when given."""
    try:
        return cls.FromString(body)
    except DecodeError:
        what = f"{name} body is not" if name else "not"
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{what} a valid {cls.__name__}") from None


def check_id(value: bytes, name: str) -> None:
    """A 16-byte id (docs/design.md §3: u128 ids are exactly 16 bytes, non-zero);
    RequestError(INVALID_ARGUMENT) naming the field otherwise."""
    if len(value) != ID_LEN or value == ZERO_ID:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{name} must be 16 non-zero bytes")


def check_conversation(conversation_id: bytes) -> int:
    """The kind of a direct or group conversation_id; INVALID_ARGUMENT for a bad id, an
    unknown kind or a room (rooms have their own path, never the writer's or the
    session list's)."""
    check_id(conversation_id, "conversation_id")
    try:
        kind = ids.conversation_kind(conversation_id)
    except IdError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id has an unknown kind") from None
    if kind not in (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "rooms are not served through this opcode")
    return kind


def check_group_id(group_id: int) -> None:
    """group_id is u64, non-zero, bit 63 clear (docs/design.md §3); INVALID_ARGUMENT otherwise."""
    if not 0 < group_id <= U63_MAX:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "group_id must be non-zero with bit 63 clear")


def parse_send(raw: bytes) -> message_pb2.SendMessage:
    """Parse SEND_MESSAGE bytes; INVALID_ARGUMENT on garbage."""
    msg = message_pb2.SendMessage()
    try:
        msg.ParseFromString(raw)
    except DecodeError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "SEND_MESSAGE body is not a valid SendMessage") from None
    return msg


BLANK_TEXT = "a text message must not be empty or only white space"


def blank_text(message_type: int, body: bytes) -> bool:
    """True for a TEXT body that shows nothing: empty, or only white space in any script
    (U+3000, the ideographic space of a Chinese input method, too). Such a send is
    refused INVALID_ARGUMENT (BLANK_TEXT) by the SDKs and the server alike: a chat row
    with nothing in it is never what a person meant (what a newcomer found)."""
    if message_type != MESSAGE_TYPE_TEXT:
        return False
    if body and 0x20 < body[0] < 0x7F:  # the usual text starts with a visible ASCII byte: no decode
        return False
    return not body.decode("utf-8", "replace").strip()


def check_send_shape(msg: message_pb2.SendMessage, max_body: int = MAX_MESSAGE_BODY) -> int:
    """Checks that need no identity: id lengths, custom_type, body size, kind.
    Returns the conversation kind. RequestError on a violation."""
    for name in ("client_message_id", "conversation_id"):
        value = getattr(msg, name)
        if len(value) != ID_LEN or value == ZERO_ID:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"{name} must be 16 non-zero bytes")
    previous = msg.previous_client_message_id
    if previous and (len(previous) != ID_LEN or previous == ZERO_ID):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "previous_client_message_id must be empty or 16 non-zero bytes")
    if previous == msg.client_message_id:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "previous_client_message_id names the send itself")
    if len(msg.custom_type) > MAX_CUSTOM_TYPE_BYTES:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"custom_type exceeds {MAX_CUSTOM_TYPE_BYTES} bytes")
    if len(msg.body) > max_body:
        raise RequestError(ErrorCode.PAYLOAD_TOO_LARGE, f"body exceeds {max_body} bytes")
    if msg.message_type < 0 or msg.message_type > 0xFFFFFFFF:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "message_type out of range")
    if msg.message_type == MESSAGE_TYPE_CONTROL:
        # CONTROL messages are the server's own notices (membership, recall, delete)
        raise RequestError(ErrorCode.FORBIDDEN, "CONTROL messages are generated by the server")
    check_reply_mentions(msg)
    try:
        kind = ids.conversation_kind(msg.conversation_id)
    except IdError:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "conversation_id has an unknown kind") from None
    if kind not in (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP):
        # Rooms have their own send path (room_seq) and never go through the writer.
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "rooms are not sent with SEND_MESSAGE")
    if blank_text(msg.message_type, msg.body):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, BLANK_TEXT)
    return kind


def check_reply_mentions(msg: message_pb2.SendMessage) -> None:
    """Shape of a send's reply target and mentions (docs/decisions/0120): reply_to_message_id
    empty or 16 non-zero bytes; at most MAX_MENTIONS distinct non-zero user ids (bit 63
    clear). INVALID_ARGUMENT otherwise."""
    reply = msg.reply_to_message_id
    if reply and (len(reply) != ID_LEN or reply == ZERO_ID):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "reply_to_message_id must be empty or 16 non-zero bytes")
    users = list(msg.mention_user_ids)
    if len(users) > MAX_MENTIONS:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, f"more than {MAX_MENTIONS} mentioned users")
    if len(set(users)) != len(users) or any(u == 0 or u > U63_MAX for u in users):
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "mention_user_ids must be distinct, non-zero, bit 63 clear")


def direct_audience(tenant: int, actor_user: int, msg: message_pb2.SendMessage) -> list[int]:
    """The frozen audience of a direct send: sorted distinct (peer, sender).
    INVALID_ARGUMENT when the peer is missing or the conversation_id is not theirs."""
    peer = msg.recipient_user_id
    if peer == 0 or peer > U63_MAX:
        raise RequestError(ErrorCode.INVALID_ARGUMENT, "recipient_user_id is required (non-zero, bit 63 clear)")
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
    """36-byte identity of a send (docs/design.md §5.2): BLAKE3-256 over the content fields
    ‖ body length u32. Two sends with one cmid are the same request iff digests match.
    previous_client_message_id is left out on purpose: a retry may name another
    previous send (docs/decisions/0017)."""
    h = blake3.blake3(IDENTITY_DOMAIN)
    h.update(msg.conversation_id)
    h.update(struct.pack(">QIB", msg.recipient_user_id, msg.message_type, len(msg.custom_type)))
    h.update(msg.custom_type)
    h.update(msg.body)
    if msg.reply_to_message_id or msg.mention_user_ids or msg.mention_all:
        # reply target and mentions are part of the identity (docs/decisions/0120); a send
        # without them hashes exactly as before, so commits in flight across an upgrade keep
        # their digest
        h.update(b"\x01" + msg.reply_to_message_id.rjust(ID_LEN, b"\0") + bytes([msg.mention_all]))
        h.update(struct.pack(f">I{len(msg.mention_user_ids)}Q", len(msg.mention_user_ids), *msg.mention_user_ids))
    return h.digest() + struct.pack(">I", len(msg.body))
