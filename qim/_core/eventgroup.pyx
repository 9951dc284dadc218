# cython: language_level=3
"""Mailbox entry events and event groups, compiled (DESIGN.md §5, seed 000 "事件组硬上限").

Event, big-endian:
  0 version u8 = 1 | 1 event_type u8 (1..255) | 2 flags u8 (bit0 client_message_id,
  bit1 body) | 3 message_type u32 (carried unchanged) | 7 event_id 16 | 23 message_id 16
  | 39 conversation_id 16 | 55 conversation_seq u64 | 63 sender_id u64
  | 71 created_at_ms u64 (the three u64 < 2**63) | 79 custom_type_len u8 (<= 64)
  | 80 custom_type | [client_message_id 16] | [body_len u32 | body]
Group: count u8 (1..8) | count x (event_len u16 | event); at most 8 KiB encoded in all,
at most one event per event_type. Pure twin: _pure/eventgroup.py.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint64_t
from libc.string cimport memcpy, memset

from qim._core.bytesio cimport (
    all_zero, as_bytes, bptr, check_u64, load_be16, load_be32, load_be64,
    store_be16, store_be32, store_be64,
)
from qim._core.limits cimport (
    QIM_CUSTOM_TYPE_MAX, QIM_EG_MAX_BYTES, QIM_EG_MAX_EVENTS, QIM_ID_LEN, QIM_U63_MAX,
    check_consts,
)

from qim._core.types import MailboxEvent
from qim.errors import EventGroupError

check_consts()  # import-time guard against a stale build
assert len(MailboxEvent._fields) == 11

cdef object _Event = MailboxEvent

cdef extern from "Python.h":
    # tuple's tp_new slot: building a MailboxEvent through it skips the Python-level
    # call of tuple.__new__ (MailboxEvent is a namedtuple, so the layouts are equal)
    """
    static PyObject* qim_tuple_subtype_new(PyObject* cls, PyObject* items) {
        PyObject* args = PyTuple_Pack(1, items);
        PyObject* out;
        if (args == NULL) return NULL;
        out = PyTuple_Type.tp_new((PyTypeObject*)cls, args, NULL);
        Py_DECREF(args);
        return out;
    }
    """
    object qim_tuple_subtype_new(object cls, tuple items)


cdef bytes id16(object value, str what):
    cdef bytes raw = as_bytes(value, what)
    if len(raw) != QIM_ID_LEN or all_zero(bptr(raw), QIM_ID_LEN):
        raise EventGroupError(f"{what} must be 16 non-zero bytes")
    return raw


cdef inline uint64_t u63(object value, str what) except? 0xFFFFFFFFFFFFFFFF:
    return check_u64(value, 0, QIM_U63_MAX, EventGroupError, what)


cdef bytes c_pack_event(object event):
    if not isinstance(event, tuple) or len(event) != 11:
        raise TypeError("event must be a MailboxEvent")
    cdef tuple ev = <tuple>event
    cdef int etype = <int>check_u64(ev[0], 1, 0xFF, EventGroupError, "event_type")
    cdef bytes eid = id16(ev[1], "event_id")
    cdef bytes mid = id16(ev[2], "message_id")
    cdef bytes cid = id16(ev[3], "conversation_id")
    cdef uint64_t cseq = u63(ev[4], "conversation_seq")
    cdef uint64_t sender = u63(ev[5], "sender_id")
    cdef uint64_t created = u63(ev[6], "created_at_ms")
    cdef uint64_t mtype = check_u64(ev[7], 0, 0xFFFFFFFF, EventGroupError, "message_type")
    cdef bytes ctype = as_bytes(ev[8], "custom_type")
    cdef Py_ssize_t ct_len = len(ctype), blen = 0, n, off
    if ct_len > QIM_CUSTOM_TYPE_MAX:
        raise EventGroupError("custom_type longer than 64 bytes")
    cdef bytes cmid = as_bytes(ev[9], "client_message_id")
    cdef bytes body = None
    cdef int flags = 0
    if len(cmid):
        cmid = id16(cmid, "client_message_id")
        flags |= EV_FLAG_CMID
    if ev[10] is not None:
        body = as_bytes(ev[10], "body")
        blen = len(body)
        if <uint64_t>blen > 0xFFFFFFFF:
            raise EventGroupError("body longer than u32")
        flags |= EV_FLAG_BODY
    n = EV_FIXED_LEN + ct_len + (QIM_ID_LEN if flags & EV_FLAG_CMID else 0)
    n += (4 + blen) if flags & EV_FLAG_BODY else 0
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n)
    cdef unsigned char* q = <unsigned char*>PyBytes_AS_STRING(out)
    q[0] = EVENT_VERSION
    q[1] = <unsigned char>etype
    q[2] = <unsigned char>flags
    store_be32(q + 3, <unsigned int>mtype)
    memcpy(q + 7, bptr(eid), QIM_ID_LEN)
    memcpy(q + 23, bptr(mid), QIM_ID_LEN)
    memcpy(q + 39, bptr(cid), QIM_ID_LEN)
    store_be64(q + 55, cseq)
    store_be64(q + 63, sender)
    store_be64(q + 71, created)
    q[79] = <unsigned char>ct_len
    memcpy(q + 80, bptr(ctype), ct_len)
    off = EV_FIXED_LEN + ct_len
    if flags & EV_FLAG_CMID:
        memcpy(q + off, bptr(cmid), QIM_ID_LEN)
        off += QIM_ID_LEN
    if flags & EV_FLAG_BODY:
        store_be32(q + off, <unsigned int>blen)
        memcpy(q + off + 4, bptr(body), blen)
    return out


cdef inline bytes take_id(const unsigned char* p, str what):
    if all_zero(p, QIM_ID_LEN):
        raise EventGroupError(f"{what} must be 16 non-zero bytes")
    return PyBytes_FromStringAndSize(<const char*>p, QIM_ID_LEN)


cdef object c_unpack_event(const unsigned char* p, Py_ssize_t n):
    cdef Py_ssize_t off, ct_len, blen
    cdef int flags
    if n < EV_FIXED_LEN:
        raise EventGroupError("event shorter than its fixed part")
    if p[0] != EVENT_VERSION:
        raise EventGroupError(f"unknown event version {p[0]}")
    if p[1] == 0:
        raise EventGroupError("event_type 0")
    flags = p[2]
    if flags & ~(EV_FLAG_CMID | EV_FLAG_BODY):
        raise EventGroupError(f"unknown event flag bits 0x{flags:02x}")
    eid = take_id(p + 7, "event_id")
    mid = take_id(p + 23, "message_id")
    cid = take_id(p + 39, "conversation_id")
    cdef uint64_t cseq = load_be64(p + 55), sender = load_be64(p + 63)
    cdef uint64_t created = load_be64(p + 71)
    if cseq > QIM_U63_MAX or sender > QIM_U63_MAX or created > QIM_U63_MAX:
        raise EventGroupError("u64 field with bit 63 set")
    ct_len = p[79]
    if ct_len > QIM_CUSTOM_TYPE_MAX:
        raise EventGroupError("custom_type longer than 64 bytes")
    off = EV_FIXED_LEN + ct_len
    if off > n:
        raise EventGroupError("truncated custom_type")
    ctype = PyBytes_FromStringAndSize(<const char*>p + EV_FIXED_LEN, ct_len)
    cmid = b""
    body = None
    if flags & EV_FLAG_CMID:
        if off + QIM_ID_LEN > n:
            raise EventGroupError("truncated client_message_id")
        cmid = take_id(p + off, "client_message_id")
        off += QIM_ID_LEN
    if flags & EV_FLAG_BODY:
        if off + 4 > n:
            raise EventGroupError("truncated body_len")
        blen = load_be32(p + off)
        off += 4
        if blen > n - off:
            raise EventGroupError("truncated body")
        body = PyBytes_FromStringAndSize(<const char*>p + off, blen)
        off += blen
    if off != n:
        raise EventGroupError("trailing bytes after event")
    return qim_tuple_subtype_new(_Event, (p[1], eid, mid, cid, cseq, sender, created,
                                          load_be32(p + 3), ctype, cmid, body))


def pack_event(event):
    """Canonical bytes of one event. EventGroupError on a field out of range."""
    return c_pack_event(event)


def unpack_event(data):
    """Inverse of pack_event; EventGroupError on any malformed or trailing byte."""
    cdef bytes raw = as_bytes(data, "data")
    return c_unpack_event(bptr(raw), len(raw))


def pack_group(events):
    """Canonical bytes of an event group: 1..8 events, <= 8 KiB, one per event_type."""
    cdef unsigned char seen[256]
    cdef Py_ssize_t total = 1, count, i, off
    cdef int etype
    cdef bytes raw
    if not isinstance(events, (list, tuple)) or isinstance(events, _Event):
        raise TypeError("events must be a list of MailboxEvent")
    count = len(events)
    if count < 1 or count > QIM_EG_MAX_EVENTS:
        raise EventGroupError(f"event group needs 1..8 events, got {count}")
    memset(seen, 0, sizeof(seen))
    parts = []
    for ev in events:
        raw = c_pack_event(ev)
        etype = bptr(raw)[1]
        if seen[etype]:
            raise EventGroupError(f"two events of event_type {etype} in one group")
        seen[etype] = 1
        total += 2 + len(raw)
        if total > QIM_EG_MAX_BYTES:
            raise EventGroupError("event group larger than 8 KiB")
        parts.append(raw)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* q = <unsigned char*>PyBytes_AS_STRING(out)
    q[0] = <unsigned char>count
    off = 1
    for i in range(count):
        raw = <bytes>parts[i]
        store_be16(q + off, <unsigned short>len(raw))
        memcpy(q + off + 2, bptr(raw), len(raw))
        off += 2 + len(raw)
    return out


def unpack_group(data):
    """Inverse of pack_group with the same checks."""
    cdef bytes raw = as_bytes(data, "data")
    cdef const unsigned char* p = bptr(raw)
    cdef Py_ssize_t n = len(raw), off = 1, elen
    cdef unsigned char seen[256]
    cdef int count, i, etype
    if n == 0:
        raise EventGroupError("empty event group")
    if n > QIM_EG_MAX_BYTES:
        raise EventGroupError("event group larger than 8 KiB")
    count = p[0]
    if count < 1 or count > QIM_EG_MAX_EVENTS:
        raise EventGroupError(f"event group count {count} not in 1..8")
    memset(seen, 0, sizeof(seen))
    out = []
    for i in range(count):
        if off + 2 > n:
            raise EventGroupError("truncated event length")
        elen = load_be16(p + off)
        off += 2
        if off + elen > n:
            raise EventGroupError("truncated event")
        ev = c_unpack_event(p + off, elen)
        off += elen
        etype = p[off - elen + 1]
        if seen[etype]:
            raise EventGroupError(f"two events of event_type {etype} in one group")
        seen[etype] = 1
        out.append(ev)
    if off != n:
        raise EventGroupError("trailing bytes after event group")
    return out
