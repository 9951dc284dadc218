"""SEND_MESSAGE's routing key read straight from its wire bytes: the gateway's fast path
of `send_key` (qim/services/gateway/backends/writer.py; docs/design.md §4 "Gateway
validation", §5.1). Pure-Python twin of qim/_core/sendkey.pyx, and its oracle.

`route_key(body, tenant, user_id, max_body)` returns the conversation_id (16 bytes, the
rendezvous key over the writers) of a plain send that every gateway check accepts, and
None for anything else. None is not a refusal: the caller then runs the full path
(protobuf parse, check_send_shape, direct_audience of qim/wire/validate.py), which
accepts or refuses with its own error. So the rule is one-sided: whenever this returns a
key, the full path returns the same key; whenever the full path raises, this returns
None (or raises the same IdError from `conversation_id_direct`, which the full path
calls with the same arguments).

The fast path reads the SendMessage fields 1-8 (proto/qim/v1/message.proto), each at
most once and with its declared wire type; any other field (reply and mentions: 9-11,
unknown numbers), a repeated field, a malformed varint or length, or a check that fails
gives None. Checks: client_message_id and conversation_id 16 non-zero bytes;
previous_client_message_id empty or 16 non-zero bytes and not the send's own;
custom_type <= MAX_CUSTOM_TYPE_BYTES; body <= `max_body`; message_type 0..2**31-1 and
not CONTROL; a TEXT body shows something (`shows_text`: a character that is not white
space, read before any malformed UTF-8); conversation kind direct or group; a direct
send's recipient non-zero with bit 63 clear and the conversation_id the one of (tenant,
user, recipient).
"""

from __future__ import annotations

from typing import Optional

from qim.consts import (
    CONVERSATION_KIND_DIRECT,
    CONVERSATION_KIND_GROUP,
    ID_LEN,
    MAX_CUSTOM_TYPE_BYTES,
    MESSAGE_TYPE_CONTROL,
    MESSAGE_TYPE_TEXT,
    U63_MAX,
)

from . import ids

_ZERO_ID = bytes(ID_LEN)
_LEN_FIELDS = (1, 2, 5, 6, 8)  # bytes fields: wire type 2
_VARINT_FIELDS = (3, 4, 7)  # uint64 recipient, enum message_type, uint64 group_id: wire type 0
_ENUM_MAX = 0x7FFFFFFF  # an enum is an int32: a larger varint is the full path's case


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position); (-1, pos) for a truncated varint or one past 64 bits."""
    value = shift = 0
    for i in range(pos, min(pos + 10, len(buf))):
        b = buf[i]
        if i == pos + 9 and b > 1:
            return -1, pos  # an 11th byte or bits past 2**64: not ours to judge
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i + 1
        shift += 7
    return -1, pos


def _utf8_length(lead: int) -> int:
    """Bytes of the UTF-8 sequence a lead byte starts (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _shows_text(body: bytes) -> bool:
    """True when `body` certainly passes the full path's blank rule (qim/wire/validate.py
    blank_text: the text decoded with replacement, stripped of white space, is not empty):
    a character that is not white space (str.isspace) comes before any malformed UTF-8.
    False for an empty or all-white body and for one whose first malformed sequence comes
    first: the full path decides those."""
    pos, end = 0, len(body)
    while pos < end:
        n = _utf8_length(body[pos])
        try:
            char = body[pos:pos + n].decode("utf-8") if n and pos + n <= end else ""
        except UnicodeDecodeError:
            char = ""
        if not char:
            return False
        if not char.isspace():
            return True
        pos += n
    return False


def _good_id(value: bytes) -> bool:
    return len(value) == ID_LEN and value != _ZERO_ID


def route_key(body: bytes, tenant: int, user_id: int, max_body: int) -> Optional[bytes]:
    """The conversation_id of a plain SEND_MESSAGE every gateway check accepts, else None
    (the full path decides; module doc). `body`: the upstream bytes (a `bytes`; any other
    type is None); `tenant`, `user_id`: the actor from AUTH; `max_body`: the body limit in
    bytes (QIM_MAX_MESSAGE_BODY), an int (TypeError otherwise). Raises only that and what
    ids.conversation_id_direct raises."""
    if not isinstance(max_body, int):
        raise TypeError(f"max_body must be int, not {type(max_body).__name__}")
    if type(body) is not bytes:
        return None
    fields: dict[int, object] = {}
    pos, end = 0, len(body)
    while pos < end:
        tag, pos = _varint(body, pos)
        if tag < 0:
            return None
        number, wire = tag >> 3, tag & 7
        if number in fields:
            return None  # a repeated scalar is last-wins in protobuf: the full path's case
        if number in _LEN_FIELDS and wire == 2:
            size, pos = _varint(body, pos)
            if size < 0 or size > end - pos:
                return None
            fields[number] = body[pos:pos + size]
            pos += size
        elif number in _VARINT_FIELDS and wire == 0:
            value, pos = _varint(body, pos)
            if value < 0:
                return None
            fields[number] = value
        else:
            return None
    cmid = fields.get(1, b"")
    conversation = fields.get(2, b"")
    previous = fields.get(8, b"")
    content = fields.get(6, b"")
    message_type = fields.get(4, 0)
    assert isinstance(cmid, bytes) and isinstance(conversation, bytes) and isinstance(previous, bytes)
    assert isinstance(content, bytes) and isinstance(message_type, int)
    if not (_good_id(cmid) and _good_id(conversation)):
        return None
    if previous and (not _good_id(previous) or previous == cmid):
        return None
    if len(fields.get(5, b"")) > MAX_CUSTOM_TYPE_BYTES or len(content) > max_body:  # type: ignore[arg-type]
        return None
    if message_type > _ENUM_MAX or message_type == MESSAGE_TYPE_CONTROL:
        return None
    if message_type == MESSAGE_TYPE_TEXT and not _shows_text(content):
        return None
    kind = conversation[0]
    if kind == CONVERSATION_KIND_GROUP:
        return conversation
    if kind != CONVERSATION_KIND_DIRECT:
        return None
    peer = fields.get(3, 0)
    assert isinstance(peer, int)
    if peer == 0 or peer > U63_MAX:
        return None
    if ids.conversation_id_direct(tenant, user_id, peer) != conversation:
        return None
    return conversation
