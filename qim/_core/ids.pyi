"""Id derivations (docs/design.md §3 table). tenant is u128 hashed as 16 bytes big-endian;
users, devices, groups, rooms, shards and ordinals are hashed as fixed-width big-endian.
IdError on a zero or out-of-range integer, an id of the wrong length or an all-zero id."""

def conversation_id_direct(tenant: int, user_a: int, user_b: int) -> bytes:
    """kind 1 ‖ BLAKE3("qim.direct.v1\\0" ‖ tenant ‖ min(user) ‖ max(user))[0..15]."""

def conversation_id_group(tenant: int, group_id: int) -> bytes:
    """kind 2 ‖ BLAKE3("qim.group.v1\\0" ‖ tenant ‖ group_id)[0..15]."""

def conversation_id_room(tenant: int, room_id: int) -> bytes:
    """kind 3 ‖ BLAKE3("qim.room.v1\\0" ‖ tenant ‖ room_id)[0..15]."""

def conversation_kind(conversation_id: bytes) -> int:
    """Kind byte (1, 2 or 3) of a 16-byte non-zero conversation_id; IdError otherwise."""

def lane_id(tenant: int, user_id: int) -> int:
    """BLAKE3(tenant ‖ user_id)[0] & 63."""

def virtual_bucket(tenant: int, user_id: int) -> int:
    """u16 of BLAKE3("qim.vbucket.v1\\0" ‖ tenant ‖ user_id)[0..2]."""

def mailbox_shard(tenant: int, user_id: int, shard_count: int) -> int:
    """virtual_bucket mod shard_count; IdError unless shard_count is a power of two in 1..65536."""

def user_placement(tenant: int, user_id: int, shard_count: int) -> tuple[int, int, int]:
    """(lane_id, virtual_bucket, mailbox_shard) computed once, to be carried along."""

def commit_bucket(tenant: int, conversation_id: bytes) -> int:
    """BLAKE3("qim.commit-bucket.v1\\0" ‖ tenant ‖ conversation_id)[0]."""

def dispatch_id(message_id: bytes, target_shard: int) -> bytes:
    """BLAKE3("qim.group-dispatch.v1\\0" ‖ message_id ‖ target_shard u32)[0..16]."""

def event_id(dispatch_id: bytes, recipient_user: int, event_type: int) -> bytes:
    """BLAKE3("qim.event.v1\\0" ‖ dispatch_id ‖ recipient u64 ‖ event_type u8)[0..16]."""

def client_message_id(store_nonce: bytes, device_id: int, ordinal: int) -> bytes:
    """BLAKE3("qim.cmid.v2\\0" ‖ store_nonce (16, non-zero) ‖ device_id u64 ‖ ordinal u64)[0..16]
    (ordinal may be 0); the nonce makes a cmid unique per local store for ever."""

def endpoint_scope(canonical_endpoint: str) -> str:
    """32 lowercase hex of BLAKE3("qim.endpoint-scope.v1\\0" ‖ utf8(endpoint))[0..16]."""

def compose_message_id(unix_ms: int, logical: int, region_id: int, writer_id: int) -> bytes:
    """HLC message_id: unix_ms (48) ‖ logical (16) ‖ region_id (16) ‖ writer_id (16) ‖ 0 (32)."""

def split_message_id(message_id: bytes) -> tuple[int, int, int, int]:
    """(unix_ms, logical, region_id, writer_id); IdError on a non-zero reserved part."""
