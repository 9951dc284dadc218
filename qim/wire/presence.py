"""PresenceEntry records of `qim.presence` (docs/design.md §13 "Presence"; seed 000: 在线位置由
PresenceDirectory 承载，经 compacted topic 按 user_bucket 分区发布，推送路径 0 次同步远程调用;
docs/decisions/0042-scale-presence.md).

One record per (tenant, user, device, gateway node): key = tenant 16 ‖ user u64 ‖
device u64 ‖ gateway node id (UTF-8), big-endian; value = a PresenceEntry (protobuf) while
the device is online there, or no value (a tombstone) once it logged out there. The
topic is compacted and has QIM_MAILBOX_SHARD_COUNT partitions: partition = the user's
MailboxShard, so the owner of a shard follows exactly the presence of its users. A key
per gateway keeps one gateway's logout from hiding another gateway's newer login of the
same device when the log is compacted.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional

from google.protobuf.message import DecodeError

from qim.consts import ID_LEN
from qim.proto.v1 import internal_pb2

_HEAD = struct.Struct(">16sQQ")


class PresenceKey(NamedTuple):
    """(tenant, user, device, gateway node id) of one record."""

    tenant: int
    user: int
    device: int
    gateway: str


class PresenceError(ValueError):
    """A record of qim.presence that does not decode (a follower counts and skips it:
    presence is a hint, the mailbox stays the truth)."""


def encode_key(key: PresenceKey) -> bytes:
    """The record key of `key`."""
    return _HEAD.pack(key.tenant.to_bytes(ID_LEN, "big"), key.user, key.device) + key.gateway.encode()


def decode_key(raw: bytes) -> PresenceKey:
    """PresenceKey of a record key; PresenceError when malformed."""
    if len(raw) <= _HEAD.size:
        raise PresenceError("presence key too short")
    tenant, user, device = _HEAD.unpack_from(raw)
    try:
        gateway = raw[_HEAD.size:].decode()
    except UnicodeDecodeError:
        raise PresenceError("presence key names no gateway") from None
    return PresenceKey(int.from_bytes(tenant, "big"), user, device, gateway)


def encode_entry(incarnation: str, since_ms: int, session_epoch: int, expires_at_ms: int) -> bytes:
    """The value of an online device: its gateway's incarnation and when that incarnation
    joined the registry (`since_ms`: a restarted gateway's old entries name an earlier
    one), the session_epoch of the connection, and when the entry stops counting unless
    renewed."""
    return internal_pb2.PresenceEntry(gateway_incarnation=incarnation, gateway_since_ms=since_ms,
                                      session_epoch=session_epoch, expires_at_ms=expires_at_ms).SerializeToString()


def decode_entry(raw: Optional[bytes]) -> Optional[internal_pb2.PresenceEntry]:
    """The PresenceEntry of a value, None for a tombstone; PresenceError when malformed."""
    if raw is None:
        return None
    try:
        entry = internal_pb2.PresenceEntry.FromString(raw)
    except DecodeError:
        raise PresenceError("presence value is not a PresenceEntry") from None
    if not entry.gateway_incarnation or not entry.session_epoch:
        raise PresenceError("presence entry without incarnation or session_epoch")
    return entry
