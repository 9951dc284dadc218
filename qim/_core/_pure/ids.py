"""Id derivations, pure-Python twin (docs/design.md §3 table).

Hash inputs are fixed-width big-endian: tenant u128 (16 bytes), user/device/group/room
u64, target shard u32, event_type u8, ordinal u64. Digests are BLAKE3 (32-byte output,
prefixes taken). user, device, group, room ids are u64 non-zero; ids passed as bytes are
exactly 16 bytes and not all zero. IdError for any value out of range, TypeError for an
argument of the wrong type.
"""

from __future__ import annotations

from blake3 import blake3

from qim.consts import (
    CONVERSATION_KIND_DIRECT,
    CONVERSATION_KIND_GROUP,
    CONVERSATION_KIND_ROOM,
    DOMAIN_CMID,
    DOMAIN_COMMIT_BUCKET,
    DOMAIN_DIRECT,
    DOMAIN_DISPATCH,
    DOMAIN_ENDPOINT_SCOPE,
    DOMAIN_EVENT,
    DOMAIN_GROUP,
    DOMAIN_ROOM,
    DOMAIN_VBUCKET,
    ID_LEN,
    LANE_COUNT,
    VIRTUAL_BUCKET_COUNT,
)
from qim.errors import IdError

from ._util import as_bytes, check_int

_U16 = (1 << 16) - 1
_U32 = (1 << 32) - 1
_U48 = (1 << 48) - 1
_U64 = (1 << 64) - 1
_U128 = (1 << 128) - 1
_ZERO_ID = bytes(ID_LEN)


def _tenant(tenant: int) -> bytes:
    return check_int(tenant, 0, _U128, IdError, "tenant").to_bytes(16, "big")


def _nz64(value: int, what: str) -> bytes:
    return check_int(value, 1, _U64, IdError, what).to_bytes(8, "big")


def _id16(value: bytes, what: str) -> bytes:
    raw = as_bytes(value, what)
    if len(raw) != ID_LEN or raw == _ZERO_ID:
        raise IdError(f"{what} must be {ID_LEN} non-zero bytes")
    return raw


def _h(data: bytes) -> bytes:
    return blake3(data).digest()


def _conversation(kind: int, data: bytes) -> bytes:
    return bytes((kind,)) + _h(data)[:15]


def conversation_id_direct(tenant: int, user_a: int, user_b: int) -> bytes:
    """kind 1 ‖ BLAKE3("qim.direct.v1\\0" ‖ tenant ‖ min(user) ‖ max(user))[0..15]."""
    t = _tenant(tenant)
    check_int(user_a, 1, _U64, IdError, "user_a")
    check_int(user_b, 1, _U64, IdError, "user_b")
    lo, hi = min(user_a, user_b), max(user_a, user_b)
    data = DOMAIN_DIRECT + t + lo.to_bytes(8, "big") + hi.to_bytes(8, "big")
    return _conversation(CONVERSATION_KIND_DIRECT, data)


def conversation_id_group(tenant: int, group_id: int) -> bytes:
    """kind 2 ‖ BLAKE3("qim.group.v1\\0" ‖ tenant ‖ group_id)[0..15]."""
    data = DOMAIN_GROUP + _tenant(tenant) + _nz64(group_id, "group_id")
    return _conversation(CONVERSATION_KIND_GROUP, data)


def conversation_id_room(tenant: int, room_id: int) -> bytes:
    """kind 3 ‖ BLAKE3("qim.room.v1\\0" ‖ tenant ‖ room_id)[0..15]."""
    data = DOMAIN_ROOM + _tenant(tenant) + _nz64(room_id, "room_id")
    return _conversation(CONVERSATION_KIND_ROOM, data)


def conversation_kind(conversation_id: bytes) -> int:
    """Kind byte (1, 2 or 3) of a 16-byte non-zero conversation_id; IdError otherwise."""
    kind = _id16(conversation_id, "conversation_id")[0]
    if kind not in (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, CONVERSATION_KIND_ROOM):
        raise IdError(f"unknown conversation kind {kind}")
    return kind


def lane_id(tenant: int, user_id: int) -> int:
    """BLAKE3(tenant ‖ user_id)[0] & (LANE_COUNT - 1)."""
    return _h(_tenant(tenant) + _nz64(user_id, "user_id"))[0] & (LANE_COUNT - 1)


def virtual_bucket(tenant: int, user_id: int) -> int:
    """u16 big-endian of BLAKE3("qim.vbucket.v1\\0" ‖ tenant ‖ user_id)[0..2]."""
    d = _h(DOMAIN_VBUCKET + _tenant(tenant) + _nz64(user_id, "user_id"))
    return (d[0] << 8) | d[1]


def _shard_count(shard_count: int) -> int:
    check_int(shard_count, 1, VIRTUAL_BUCKET_COUNT, IdError, "shard_count")
    if shard_count & (shard_count - 1):
        raise IdError("shard_count must be a power of two")
    return shard_count


def mailbox_shard(tenant: int, user_id: int, shard_count: int) -> int:
    """virtual_bucket mod shard_count (a power of two in 1..65536)."""
    _shard_count(shard_count)
    return virtual_bucket(tenant, user_id) & (shard_count - 1)


def user_placement(tenant: int, user_id: int, shard_count: int) -> tuple[int, int, int]:
    """(lane_id, virtual_bucket, mailbox_shard), computed once and carried along."""
    _shard_count(shard_count)
    bucket = virtual_bucket(tenant, user_id)
    return lane_id(tenant, user_id), bucket, bucket & (shard_count - 1)


def commit_bucket(tenant: int, conversation_id: bytes) -> int:
    """BLAKE3("qim.commit-bucket.v1\\0" ‖ tenant ‖ conversation_id)[0]."""
    t = _tenant(tenant)
    return _h(DOMAIN_COMMIT_BUCKET + t + _id16(conversation_id, "conversation_id"))[0]


def dispatch_id(message_id: bytes, target_shard: int) -> bytes:
    """BLAKE3("qim.group-dispatch.v1\\0" ‖ message_id ‖ target_shard u32)[0..16]."""
    mid = _id16(message_id, "message_id")
    shard = check_int(target_shard, 0, _U32, IdError, "target_shard")
    return _h(DOMAIN_DISPATCH + mid + shard.to_bytes(4, "big"))[:16]


def event_id(dispatch_id: bytes, recipient_user: int, event_type: int) -> bytes:
    """BLAKE3("qim.event.v1\\0" ‖ dispatch_id ‖ recipient u64 ‖ event_type u8)[0..16]."""
    did = _id16(dispatch_id, "dispatch_id")
    rcpt = _nz64(recipient_user, "recipient_user")
    etype = check_int(event_type, 1, 0xFF, IdError, "event_type")
    return _h(DOMAIN_EVENT + did + rcpt + bytes((etype,)))[:16]


def client_message_id(store_nonce: bytes, device_id: int, ordinal: int) -> bytes:
    """BLAKE3("qim.cmid.v2\\0" ‖ store_nonce (16) ‖ device_id u64 ‖ ordinal u64)[0..16].

    store_nonce: the 16 random non-zero bytes a LocalStore draws when it is created, so
    a cmid is unique per local store for ever. Ordinal may be 0."""
    nonce = _id16(store_nonce, "store_nonce")
    dev = _nz64(device_id, "device_id")
    ordn = check_int(ordinal, 0, _U64, IdError, "ordinal")
    return _h(DOMAIN_CMID + nonce + dev + ordn.to_bytes(8, "big"))[:16]


def endpoint_scope(canonical_endpoint: str) -> str:
    """32 lowercase hex of BLAKE3("qim.endpoint-scope.v1\\0" ‖ utf8(endpoint))[0..16]."""
    if not isinstance(canonical_endpoint, str):
        raise TypeError("canonical_endpoint must be str")
    if not canonical_endpoint:
        raise IdError("canonical_endpoint must not be empty")
    try:
        raw = canonical_endpoint.encode("utf-8")
    except UnicodeEncodeError:
        raise IdError("canonical_endpoint is not encodable as UTF-8") from None
    return _h(DOMAIN_ENDPOINT_SCOPE + raw)[:16].hex()


def compose_message_id(unix_ms: int, logical: int, region_id: int, writer_id: int) -> bytes:
    """unix_ms (48) ‖ logical (16) ‖ region_id (16) ‖ writer_id (16) ‖ 0 (32); not all zero."""
    check_int(unix_ms, 0, _U48, IdError, "unix_ms")
    check_int(logical, 0, _U16, IdError, "logical")
    check_int(region_id, 0, _U16, IdError, "region_id")
    check_int(writer_id, 0, _U16, IdError, "writer_id")
    value = (unix_ms << 80) | (logical << 64) | (region_id << 48) | (writer_id << 32)
    if value == 0:
        raise IdError("message_id must not be all zero")
    return value.to_bytes(16, "big")


def split_message_id(message_id: bytes) -> tuple[int, int, int, int]:
    """(unix_ms, logical, region_id, writer_id); IdError on a non-zero reserved part."""
    value = int.from_bytes(_id16(message_id, "message_id"), "big")
    if value & 0xFFFFFFFF:
        raise IdError("message_id reserved low 32 bits must be zero")
    return value >> 80, (value >> 64) & _U16, (value >> 48) & _U16, (value >> 32) & _U16
