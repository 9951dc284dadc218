"""Mailbox entry events and event groups, pure-Python twin (docs/design.md §5).

Event, big-endian:
  version u8 = 1 | event_type u8 (1..255) | flags u8 (bit0 client_message_id, bit1 body)
  | message_type u32 | event_id 16 | message_id 16 | conversation_id 16
  | conversation_seq u64 | sender_id u64 | created_at_ms u64   (each < 2**63)
  | custom_type_len u8 (<= 64) | custom_type | [client_message_id 16] | [body_len u32 | body]
Group: count u8 (1..8) | count x (event_len u16 | event); at most 8 KiB encoded in all,
at most one event per event_type (seed 000 "事件组硬上限").
"""

from __future__ import annotations

import struct
from typing import Any

from qim._core.types import MailboxEvent
from qim.consts import (
    EVENT_GROUP_MAX_BYTES,
    EVENT_GROUP_MAX_EVENTS,
    ID_LEN,
    MAX_CUSTOM_TYPE_BYTES,
    U63_MAX,
)
from qim.errors import EventGroupError

from ._util import as_bytes, check_int

EVENT_VERSION = 1
FLAG_CMID = 0x01
FLAG_BODY = 0x02
_HEAD = struct.Struct(">BBBI")  # version, event_type, flags, message_type
_NUMS = struct.Struct(">QQQB")  # conversation_seq, sender_id, created_at_ms, ct_len
_FIXED_LEN = _HEAD.size + 3 * ID_LEN + _NUMS.size  # 80
_U32 = (1 << 32) - 1
_ZERO_ID = bytes(ID_LEN)


def _id16(value: object, what: str) -> bytes:
    raw = as_bytes(value, what)
    if len(raw) != ID_LEN or raw == _ZERO_ID:
        raise EventGroupError(f"{what} must be {ID_LEN} non-zero bytes")
    return raw


def pack_event(event: MailboxEvent) -> bytes:
    """Canonical bytes of one event. EventGroupError on a field out of range."""
    if not isinstance(event, tuple) or len(event) != 11:
        raise TypeError("event must be a MailboxEvent")
    etype, eid, mid, cid, cseq, sender, created, mtype, ctype, cmid, body = event
    check_int(etype, 1, 0xFF, EventGroupError, "event_type")
    eid = _id16(eid, "event_id")
    mid = _id16(mid, "message_id")
    cid = _id16(cid, "conversation_id")
    check_int(cseq, 0, U63_MAX, EventGroupError, "conversation_seq")
    check_int(sender, 0, U63_MAX, EventGroupError, "sender_id")
    check_int(created, 0, U63_MAX, EventGroupError, "created_at_ms")
    check_int(mtype, 0, _U32, EventGroupError, "message_type")
    ctype = as_bytes(ctype, "custom_type")
    if len(ctype) > MAX_CUSTOM_TYPE_BYTES:
        raise EventGroupError("custom_type longer than 64 bytes")
    cmid = as_bytes(cmid, "client_message_id")
    flags = 0
    tail = b""
    if cmid:
        tail = _id16(cmid, "client_message_id")
        flags |= FLAG_CMID
    if body is not None:
        body = as_bytes(body, "body")
        if len(body) > _U32:
            raise EventGroupError("body longer than u32")
        tail += len(body).to_bytes(4, "big") + body
        flags |= FLAG_BODY
    return b"".join((
        _HEAD.pack(EVENT_VERSION, etype, flags, mtype), eid, mid, cid,
        _NUMS.pack(cseq, sender, created, len(ctype)), ctype, tail,
    ))


def _unpack(raw: bytes) -> MailboxEvent:
    n = len(raw)
    if n < _FIXED_LEN:
        raise EventGroupError("event shorter than its fixed part")
    version, etype, flags, mtype = _HEAD.unpack_from(raw, 0)
    if version != EVENT_VERSION:
        raise EventGroupError(f"unknown event version {version}")
    if etype == 0:
        raise EventGroupError("event_type 0")
    if flags & ~(FLAG_CMID | FLAG_BODY):
        raise EventGroupError(f"unknown event flag bits 0x{flags:02x}")
    eid = _id16(raw[7:23], "event_id")
    mid = _id16(raw[23:39], "message_id")
    cid = _id16(raw[39:55], "conversation_id")
    cseq, sender, created, ct_len = _NUMS.unpack_from(raw, 55)
    if max(cseq, sender, created) > U63_MAX:
        raise EventGroupError("u64 field with bit 63 set")
    if ct_len > MAX_CUSTOM_TYPE_BYTES:
        raise EventGroupError("custom_type longer than 64 bytes")
    off = _FIXED_LEN + ct_len
    if off > n:
        raise EventGroupError("truncated custom_type")
    ctype = raw[_FIXED_LEN:off]
    cmid = b""
    if flags & FLAG_CMID:
        if off + ID_LEN > n:
            raise EventGroupError("truncated client_message_id")
        cmid = _id16(raw[off:off + ID_LEN], "client_message_id")
        off += ID_LEN
    body = None
    if flags & FLAG_BODY:
        if off + 4 > n:
            raise EventGroupError("truncated body_len")
        blen = int.from_bytes(raw[off:off + 4], "big")
        off += 4
        if off + blen > n:
            raise EventGroupError("truncated body")
        body = raw[off:off + blen]
        off += blen
    if off != n:
        raise EventGroupError("trailing bytes after event")
    return MailboxEvent(etype, eid, mid, cid, cseq, sender, created, mtype, ctype, cmid, body)


def unpack_event(data: bytes) -> MailboxEvent:
    """Inverse of pack_event; EventGroupError on any malformed or trailing byte."""
    return _unpack(as_bytes(data, "data"))


def pack_group(events: list[MailboxEvent]) -> bytes:
    """Canonical bytes of an event group: 1..8 events, <= 8 KiB, one per event_type."""
    if not isinstance(events, (list, tuple)) or isinstance(events, MailboxEvent):
        raise TypeError("events must be a list of MailboxEvent")
    if not 1 <= len(events) <= EVENT_GROUP_MAX_EVENTS:
        raise EventGroupError(f"event group needs 1..8 events, got {len(events)}")
    parts = [bytes((len(events),))]
    seen = set()
    total = 1
    for ev in events:
        raw = pack_event(ev)
        if ev[0] in seen:
            raise EventGroupError(f"two events of event_type {ev[0]} in one group")
        seen.add(ev[0])
        total += 2 + len(raw)
        if total > EVENT_GROUP_MAX_BYTES:
            raise EventGroupError("event group larger than 8 KiB")
        parts.append(len(raw).to_bytes(2, "big"))
        parts.append(raw)
    return b"".join(parts)


def unpack_group(data: bytes) -> list[MailboxEvent]:
    """Inverse of pack_group with the same checks."""
    raw = as_bytes(data, "data")
    n = len(raw)
    if n == 0:
        raise EventGroupError("empty event group")
    if n > EVENT_GROUP_MAX_BYTES:
        raise EventGroupError("event group larger than 8 KiB")
    count = raw[0]
    if not 1 <= count <= EVENT_GROUP_MAX_EVENTS:
        raise EventGroupError(f"event group count {count} not in 1..8")
    off = 1
    out = []
    seen = set()
    for _ in range(count):
        if off + 2 > n:
            raise EventGroupError("truncated event length")
        elen = int.from_bytes(raw[off:off + 2], "big")
        off += 2
        if off + elen > n:
            raise EventGroupError("truncated event")
        ev = _unpack(raw[off:off + elen])
        off += elen
        if ev.event_type in seen:
            raise EventGroupError(f"two events of event_type {ev.event_type} in one group")
        seen.add(ev.event_type)
        out.append(ev)
    if off != n:
        raise EventGroupError("trailing bytes after event group")
    return out


def pack_each(prefix: bytes, event: MailboxEvent, event_ids: list[bytes]) -> list[bytes]:
    """[prefix ‖ pack_group([event with event_id e]) for e in event_ids] (the compiled
    twin packs once and writes each event_id in)."""
    if not isinstance(event_ids, (list, tuple)):
        raise TypeError("event_ids must be a list of 16-byte ids")
    head = as_bytes(prefix, "prefix")
    pack_group([event])  # the event itself is checked even for no event_ids
    fields: list[Any] = list(event)
    out = []
    for eid in event_ids:
        fields[1] = as_bytes(eid, "event_id")
        out.append(head + pack_group([MailboxEvent(*fields)]))
    return out
