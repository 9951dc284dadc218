"""The GroupDispatch record codec: one deterministic canonical encoding (docs/design.md §5.3).

The one definition: FanoutCoordinator writes it to `qim.dispatch` partition = target
shard (key = dispatch_id); MailboxMaterializer, SessionProjection's durable consumer and
`qimctl audit dispatch` read it. payload_digest = BLAKE3 of the canonical bytes, so a
replayed dispatch is recognised and a different one with the same id is not.

Layout, big-endian:
  version u8 = 1 | tenant 16 | dispatch_id 16 | message_id 16 | conversation_id 16 |
  conversation_seq u64 | sender_id u64 | created_at_ms u64 | message_type u32 |
  event_type u8 (qim.protocol.EventType) | target_shard u32 | flags u8 (bit0 inline
  body) | sender client_message_id 16 |
  custom_type_len u8 | custom_type | recipient_count u32 | recipients u64 × n (ascending,
  distinct) | [body_len u32 | body]   (present iff bit0)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

import blake3

from qim._core.types import MessageCoord
from qim.consts import MAX_CUSTOM_TYPE_BYTES, MAX_MESSAGE_BODY

VERSION = 1
FLAG_INLINE = 0x01
_HEAD = struct.Struct(">B16s16s16s16sQQQIBIB16sB")


class DispatchDecodeError(ValueError):
    """The bytes are not a canonical dispatch record."""


@dataclass(frozen=True)
class Dispatch:
    """A decoded dispatch: the message's coordinate (qim._core.types.MessageCoord), its
    target shard and recipients, the sender's client_message_id; `body` is None when the
    entries reference the message."""

    tenant: int
    dispatch_id: bytes
    coord: MessageCoord
    target_shard: int
    client_message_id: bytes
    recipients: tuple[int, ...]
    body: Optional[bytes]
    event_type: int = 1  # EventType.MESSAGE

    def encode(self) -> bytes:
        """Canonical bytes. ValueError when recipients are not ascending and distinct."""
        if list(self.recipients) != sorted(set(self.recipients)) or not self.recipients:
            raise ValueError("recipients must be non-empty, ascending and distinct")
        c = self.coord
        head = _HEAD.pack(VERSION, self.tenant.to_bytes(16, "big"), self.dispatch_id, c.message_id,
                          c.conversation_id, c.conversation_seq, c.sender_id, c.created_at_ms,
                          c.message_type, self.event_type, self.target_shard,
                          FLAG_INLINE if self.body is not None else 0,
                          self.client_message_id, len(c.custom_type))
        parts = [head, c.custom_type, struct.pack(">I", len(self.recipients)),
                 struct.pack(f">{len(self.recipients)}Q", *self.recipients)]
        if self.body is not None:
            parts += [struct.pack(">I", len(self.body)), self.body]
        return b"".join(parts)


def payload_digest(canonical: bytes) -> bytes:
    """32-byte BLAKE3 of the canonical bytes."""
    return blake3.blake3(canonical).digest()


def decode(data: bytes) -> Dispatch:
    """Strict inverse of Dispatch.encode; DispatchDecodeError on any deviation."""
    try:
        (version, tenant, dispatch_id, message_id, conversation_id, cseq, sender, created, mtype, event_type,
         shard, flags, cmid, ct_len) = _HEAD.unpack_from(data, 0)
        if version != VERSION or flags & ~FLAG_INLINE or ct_len > MAX_CUSTOM_TYPE_BYTES or event_type == 0:
            raise DispatchDecodeError("bad version, flags, event_type or custom_type length")
        pos = _HEAD.size
        custom_type = data[pos:pos + ct_len]
        pos += ct_len
        (count,) = struct.unpack_from(">I", data, pos)
        pos += 4
        recipients = struct.unpack_from(f">{count}Q", data, pos)
        pos += 8 * count
        body = None
        if flags & FLAG_INLINE:
            (body_len,) = struct.unpack_from(">I", data, pos)
            pos += 4
            if body_len > MAX_MESSAGE_BODY:
                raise DispatchDecodeError("inline body too large")
            body = data[pos:pos + body_len]
            pos += body_len
            if len(body) != body_len:
                raise DispatchDecodeError("truncated body")
    except struct.error as exc:
        raise DispatchDecodeError(f"truncated dispatch: {exc}") from None
    if pos != len(data) or len(custom_type) != ct_len:
        raise DispatchDecodeError("trailing or missing bytes")
    if count == 0 or list(recipients) != sorted(set(recipients)):
        raise DispatchDecodeError("recipients must be non-empty, ascending and distinct")
    coord = MessageCoord(message_id, conversation_id, cseq, sender, created, mtype, bytes(custom_type))
    return Dispatch(int.from_bytes(tenant, "big"), dispatch_id, coord, shard, cmid, tuple(recipients),
                    None if body is None else bytes(body), event_type)
