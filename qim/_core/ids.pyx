# cython: language_level=3
"""Id derivations, compiled (docs/design.md §3 table).

Hash inputs are fixed-width big-endian, assembled in a stack buffer: tenant u128
(16 bytes), user/device/group/room u64, target shard u32, event_type u8, ordinal u64.
Digests are BLAKE3 through the `blake3` module (32-byte output, prefixes taken; about
0.9 µs each, so callers derive a user's placement once and carry it). user, device,
group, room ids are u64 non-zero; ids passed as bytes are exactly 16 bytes and not all
zero. IdError for a value out of range, TypeError for a wrong argument type.
Pure twin: _pure/ids.py.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint64_t
from libc.string cimport memcpy

from qim._core.bytesio cimport (
    all_zero, as_bytes, bptr, check_u64, load_be16, load_be64, store_be32, store_be64,
)
from qim._core.limits cimport QIM_ID_LEN, QIM_LANE_COUNT, QIM_U64_MAX, check_consts

from blake3 import blake3 as _blake3

from qim.consts import (
    CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, CONVERSATION_KIND_ROOM,
    DOMAIN_CMID, DOMAIN_COMMIT_BUCKET, DOMAIN_DIRECT, DOMAIN_DISPATCH,
    DOMAIN_ENDPOINT_SCOPE, DOMAIN_EVENT, DOMAIN_GROUP, DOMAIN_ROOM, DOMAIN_VBUCKET,
)
from qim.errors import IdError

check_consts()  # import-time guard against a stale build
assert (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, CONVERSATION_KIND_ROOM) == (1, 2, 3)

cdef bytes D_DIRECT = DOMAIN_DIRECT, D_GROUP = DOMAIN_GROUP, D_ROOM = DOMAIN_ROOM
cdef bytes D_VBUCKET = DOMAIN_VBUCKET, D_COMMIT = DOMAIN_COMMIT_BUCKET
cdef bytes D_DISPATCH = DOMAIN_DISPATCH, D_EVENT = DOMAIN_EVENT, D_CMID = DOMAIN_CMID
cdef bytes D_ENDPOINT = DOMAIN_ENDPOINT_SCOPE
assert max(len(d) for d in (D_DIRECT, D_GROUP, D_ROOM, D_VBUCKET, D_COMMIT, D_DISPATCH,
                            D_EVENT, D_CMID)) <= 32  # every buffer below is 80 bytes (cmid: 32 + 32)

cdef object U128_MAX = (1 << 128) - 1
cdef object U64_MASK = (1 << 64) - 1


cdef int store_tenant(unsigned char* p, object tenant) except -1:
    """16 big-endian bytes of a u128 tenant at p."""
    if not isinstance(tenant, int):
        raise TypeError(f"tenant must be int, not {type(tenant).__name__}")
    if tenant < 0 or tenant > U128_MAX:
        raise IdError(f"tenant out of range 0..{U128_MAX}")  # as _pure check_int
    if tenant <= QIM_U64_MAX:
        store_be64(p, 0)
        store_be64(p + 8, <uint64_t>tenant)
    else:
        store_be64(p, <uint64_t>(tenant >> 64))
        store_be64(p + 8, <uint64_t>(tenant & U64_MASK))
    return 0


cdef bytes id16(object value, str what):
    """The 16 non-zero bytes of an id argument; IdError otherwise."""
    cdef bytes raw = as_bytes(value, what)
    if len(raw) != QIM_ID_LEN or all_zero(bptr(raw), QIM_ID_LEN):
        raise IdError(f"{what} must be 16 non-zero bytes")
    return raw


cdef bytes digest(const unsigned char* buf, Py_ssize_t n):
    return _blake3(PyBytes_FromStringAndSize(<const char*>buf, n)).digest()


cdef Py_ssize_t put_domain(unsigned char* p, bytes domain) noexcept:
    cdef Py_ssize_t n = len(domain)
    memcpy(p, bptr(domain), n)
    return n


cdef inline uint64_t nz64(object value, str what) except? 0:
    return check_u64(value, 1, QIM_U64_MAX, IdError, what)


cdef bytes conversation(int kind, const unsigned char* buf, Py_ssize_t n):
    cdef bytes d = digest(buf, n)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, QIM_ID_LEN)
    cdef unsigned char* q = <unsigned char*>PyBytes_AS_STRING(out)
    q[0] = <unsigned char>kind
    memcpy(q + 1, bptr(d), 15)
    return out


def conversation_id_direct(tenant, user_a, user_b):
    """kind 1 ‖ BLAKE3("qim.direct.v1\\0" ‖ tenant ‖ min(user) ‖ max(user))[0..15]."""
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_DIRECT)
    store_tenant(buf + n, tenant)
    cdef uint64_t a = nz64(user_a, "user_a"), b = nz64(user_b, "user_b")
    store_be64(buf + n + 16, a if a < b else b)
    store_be64(buf + n + 24, b if a < b else a)
    return conversation(1, buf, n + 32)


def conversation_id_group(tenant, group_id):
    """kind 2 ‖ BLAKE3("qim.group.v1\\0" ‖ tenant ‖ group_id)[0..15]."""
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_GROUP)
    store_tenant(buf + n, tenant)
    store_be64(buf + n + 16, nz64(group_id, "group_id"))
    return conversation(2, buf, n + 24)


def conversation_id_room(tenant, room_id):
    """kind 3 ‖ BLAKE3("qim.room.v1\\0" ‖ tenant ‖ room_id)[0..15]."""
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_ROOM)
    store_tenant(buf + n, tenant)
    store_be64(buf + n + 16, nz64(room_id, "room_id"))
    return conversation(3, buf, n + 24)


def conversation_kind(conversation_id):
    """Kind byte (1, 2 or 3) of a 16-byte non-zero conversation_id; IdError otherwise."""
    cdef bytes raw = id16(conversation_id, "conversation_id")
    cdef int kind = bptr(raw)[0]
    if kind < 1 or kind > 3:
        raise IdError(f"unknown conversation kind {kind}")
    return kind


cdef uint64_t c_lane_id(object tenant, object user_id) except? 0xFFFFFFFFFFFFFFFF:
    cdef unsigned char buf[24]
    store_tenant(buf, tenant)
    store_be64(buf + 16, nz64(user_id, "user_id"))
    cdef bytes d = digest(buf, 24)
    return bptr(d)[0] & (QIM_LANE_COUNT - 1)


cdef uint64_t c_virtual_bucket(object tenant, object user_id) except? 0xFFFFFFFFFFFFFFFF:
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_VBUCKET)
    store_tenant(buf + n, tenant)
    store_be64(buf + n + 16, nz64(user_id, "user_id"))
    cdef bytes d = digest(buf, n + 24)
    return load_be16(bptr(d))


cdef uint64_t shard_mask(object shard_count) except? 0xFFFFFFFFFFFFFFFF:
    cdef uint64_t c = check_u64(shard_count, 1, 65536, IdError, "shard_count")
    if c & (c - 1):
        raise IdError("shard_count must be a power of two")
    return c - 1


def lane_id(tenant, user_id):
    """BLAKE3(tenant ‖ user_id)[0] & (LANE_COUNT - 1)."""
    return c_lane_id(tenant, user_id)


def virtual_bucket(tenant, user_id):
    """u16 big-endian of BLAKE3("qim.vbucket.v1\\0" ‖ tenant ‖ user_id)[0..2]."""
    return c_virtual_bucket(tenant, user_id)


def mailbox_shard(tenant, user_id, shard_count):
    """virtual_bucket mod shard_count (a power of two in 1..65536)."""
    cdef uint64_t mask = shard_mask(shard_count)
    return c_virtual_bucket(tenant, user_id) & mask


def user_placement(tenant, user_id, shard_count):
    """(lane_id, virtual_bucket, mailbox_shard), computed once and carried along."""
    cdef uint64_t mask = shard_mask(shard_count)
    cdef uint64_t bucket = c_virtual_bucket(tenant, user_id)
    return (c_lane_id(tenant, user_id), bucket, bucket & mask)


def commit_bucket(tenant, conversation_id):
    """BLAKE3("qim.commit-bucket.v1\\0" ‖ tenant ‖ conversation_id)[0]."""
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_COMMIT)
    store_tenant(buf + n, tenant)
    cdef bytes raw = id16(conversation_id, "conversation_id")
    memcpy(buf + n + 16, bptr(raw), QIM_ID_LEN)
    cdef bytes d = digest(buf, n + 32)
    return bptr(d)[0]


def dispatch_id(message_id, target_shard):
    """BLAKE3("qim.group-dispatch.v1\\0" ‖ message_id ‖ target_shard u32)[0..16]."""
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_DISPATCH)
    cdef bytes raw = id16(message_id, "message_id")
    memcpy(buf + n, bptr(raw), QIM_ID_LEN)
    store_be32(buf + n + 16, <unsigned int>check_u64(target_shard, 0, 0xFFFFFFFF, IdError,
                                                    "target_shard"))
    return digest(buf, n + 20)[:16]


def event_id(dispatch_id, recipient_user, event_type):
    """BLAKE3("qim.event.v1\\0" ‖ dispatch_id ‖ recipient u64 ‖ event_type u8)[0..16]."""
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_EVENT)
    cdef bytes raw = id16(dispatch_id, "dispatch_id")
    memcpy(buf + n, bptr(raw), QIM_ID_LEN)
    store_be64(buf + n + 16, nz64(recipient_user, "recipient_user"))
    buf[n + 24] = <unsigned char>check_u64(event_type, 1, 0xFF, IdError, "event_type")
    return digest(buf, n + 25)[:16]


def client_message_id(store_nonce, device_id, ordinal):
    """BLAKE3("qim.cmid.v2\\0" ‖ store_nonce (16) ‖ device_id u64 ‖ ordinal u64)[0..16].

    store_nonce: the 16 random non-zero bytes a LocalStore draws when it is created, so
    a cmid is unique per local store for ever (a reinstalled device reusing its
    device_id never repeats an earlier store's cmids). Ordinal may be 0."""
    cdef unsigned char buf[80]
    cdef Py_ssize_t n = put_domain(buf, D_CMID)
    cdef bytes nonce = id16(store_nonce, "store_nonce")
    memcpy(buf + n, bptr(nonce), QIM_ID_LEN)
    store_be64(buf + n + 16, nz64(device_id, "device_id"))
    store_be64(buf + n + 24, check_u64(ordinal, 0, QIM_U64_MAX, IdError, "ordinal"))
    return digest(buf, n + 32)[:16]


def endpoint_scope(canonical_endpoint):
    """32 lowercase hex of BLAKE3("qim.endpoint-scope.v1\\0" ‖ utf8(endpoint))[0..16]."""
    if not isinstance(canonical_endpoint, str):
        raise TypeError("canonical_endpoint must be str")
    if not canonical_endpoint:
        raise IdError("canonical_endpoint must not be empty")
    try:
        raw = (<str>canonical_endpoint).encode("utf-8")
    except UnicodeEncodeError:
        raise IdError("canonical_endpoint is not encodable as UTF-8") from None
    return _blake3(D_ENDPOINT + raw).digest()[:16].hex()


def compose_message_id(unix_ms, logical, region_id, writer_id):
    """unix_ms (48) ‖ logical (16) ‖ region_id (16) ‖ writer_id (16) ‖ 0 (32); not all zero."""
    cdef uint64_t ms = check_u64(unix_ms, 0, 0xFFFFFFFFFFFF, IdError, "unix_ms")
    cdef uint64_t lg = check_u64(logical, 0, 0xFFFF, IdError, "logical")
    cdef uint64_t rg = check_u64(region_id, 0, 0xFFFF, IdError, "region_id")
    cdef uint64_t wr = check_u64(writer_id, 0, 0xFFFF, IdError, "writer_id")
    if (ms | lg | rg | wr) == 0:
        raise IdError("message_id must not be all zero")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, QIM_ID_LEN)
    cdef unsigned char* q = <unsigned char*>PyBytes_AS_STRING(out)
    store_be64(q, (ms << 16) | lg)
    store_be64(q + 8, (rg << 48) | (wr << 32))
    return out


def split_message_id(message_id):
    """(unix_ms, logical, region_id, writer_id); IdError on a non-zero reserved part."""
    cdef bytes raw = id16(message_id, "message_id")
    cdef const unsigned char* p = bptr(raw)
    cdef uint64_t hi = load_be64(p), lo = load_be64(p + 8)
    if lo & 0xFFFFFFFF:
        raise IdError("message_id reserved low 32 bits must be zero")
    return (hi >> 16, hi & 0xFFFF, lo >> 48, (lo >> 32) & 0xFFFF)
