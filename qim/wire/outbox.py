"""The Outbox record codec and the stored MessageRecord bytes (docs/design.md §5.2;
docs/decisions/0002-commit-keys.md §3).

The writer never parses and re-serialises what it already holds: a commit's canonical
MessageRecord is the writer's serialization of the record without conversation_seq
(`prefix`) with field 4 appended once the seq is known (`stored_record`; the reserving
Lua script appends the same bytes), and an OutboxRecord is the frozen audience
(OutboxRecord without field 1, serialized) with field 1 = that record appended
(`encode`). Protobuf parsers accept fields in any order and keep the last value of a
scalar, so `decode(encode(a, r))` is the OutboxRecord with audience `a` and record `r`.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from qim.proto.v1 import internal_pb2

_FIELD_CONVERSATION_SEQ = b"\x20"  # MessageRecord field 4, varint
_FIELD_RECORD = b"\x0a"  # OutboxRecord field 1, length-delimited


class OutboxDecodeError(ValueError):
    """The bytes are not an OutboxRecord."""


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int (ValueError when negative)."""
    if n < 0:
        raise ValueError("varint of a negative number")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def stored_record(prefix: bytes, conversation_seq: int) -> bytes:
    """The canonical MessageRecord bytes: `prefix` (a serialized MessageRecord without
    conversation_seq) with field 4 = `conversation_seq` appended."""
    return prefix + _FIELD_CONVERSATION_SEQ + varint(conversation_seq)


def encode(audience: bytes, record: bytes) -> bytes:
    """OutboxRecord bytes: `audience` (a serialized OutboxRecord without field 1) with
    field 1 = `record` (canonical MessageRecord bytes) appended."""
    return audience + _FIELD_RECORD + varint(len(record)) + record


def decode(data: bytes) -> internal_pb2.OutboxRecord:
    """The OutboxRecord of `data`; OutboxDecodeError when protobuf cannot parse it (the
    caller checks what it needs: message_id, audience, shard_count)."""
    try:
        return internal_pb2.OutboxRecord.FromString(data)
    except (DecodeError, ValueError) as exc:
        raise OutboxDecodeError(f"undecodable outbox record: {exc.__class__.__name__}") from None
