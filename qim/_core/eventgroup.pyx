# cython: language_level=3
"""Mailbox entry events and event groups, compiled (docs/design.md §5, seed 000 "事件组硬上限").

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
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.stdint cimport uint64_t
from libc.string cimport memcpy, memset

from qim._core.bytesio cimport (
    all_zero, as_bytes, bptr, load_be16, load_be32, load_be64, store_be16, store_be32, store_be64,
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
    # Why these, not Python-level code (the 8.9x event group figure of docs/perf-profile.md): the
    # profile of the compiled codec showed two rich comparisons per integer field
    # (`value < 0`, `value > 2**64-1` on Python ints) and three tuple allocations per
    # unpacked event (the item tuple, PyTuple_Pack, tuple.__new__'s copy). A
    # MailboxEvent is a namedtuple without __dict__: allocating it with its own
    # tp_alloc and filling the slots is exactly what tuple.__new__ does for a subtype.
    """
    static PyObject* qim_event_alloc(PyObject* cls) {
        return ((PyTypeObject*)cls)->tp_alloc((PyTypeObject*)cls, 11);
    }
    static void qim_event_set(PyObject* ev, Py_ssize_t i, PyObject* item) {
        Py_INCREF(item);
        PyTuple_SET_ITEM(ev, i, item);
    }
    """
    object qim_event_alloc(object cls)
    void qim_event_set(object ev, Py_ssize_t i, object item)
    unsigned long long PyLong_AsUnsignedLongLong(object o) noexcept
    void* PyErr_Occurred() noexcept
    void PyErr_Clear() noexcept


cdef struct EvParts:
    # one validated event: integers as C values, byte fields as pointers into bytes
    # objects kept alive by the caller (the event tuple itself, or `keep`)
    int etype
    int flags
    uint64_t cseq, sender, created, mtype
    const unsigned char* eid
    const unsigned char* mid
    const unsigned char* cid
    const unsigned char* ctype
    const unsigned char* cmid
    const unsigned char* body
    Py_ssize_t ct_len, blen, n


cdef inline uint64_t int_in(object value, uint64_t lo, uint64_t hi, str what) except? 0xFFFFFFFFFFFFFFFF:
    """`value` as a C u64 when it is an int in lo..hi: TypeError for a non-int,
    EventGroupError out of range (the messages of _pure/_util.check_int)."""
    cdef unsigned long long v
    if not isinstance(value, int):
        raise TypeError(f"{what} must be int, not {type(value).__name__}")
    v = PyLong_AsUnsignedLongLong(value)  # OverflowError for < 0 or >= 2**64
    if v == <unsigned long long>-1 and PyErr_Occurred() != NULL:
        PyErr_Clear()
        raise EventGroupError(f"{what} out of range {lo}..{hi}")
    if v < lo or v > hi:
        raise EventGroupError(f"{what} out of range {lo}..{hi}")
    return v


cdef inline bytes held(object value, str what, list keep):
    """as_bytes(value); a converted copy (bytearray, memoryview) is kept alive in `keep`."""
    if type(value) is bytes:
        return <bytes>value
    cdef bytes raw = as_bytes(value, what)
    keep.append(raw)
    return raw


cdef inline const unsigned char* id16(object value, str what, list keep) except NULL:
    cdef bytes raw = held(value, what, keep)
    if len(raw) != QIM_ID_LEN or all_zero(bptr(raw), QIM_ID_LEN):
        raise EventGroupError(f"{what} must be 16 non-zero bytes")
    return bptr(raw)


cdef list c_parse_event(object event, EvParts* e):
    """Validate one event into `e` (same checks, order and messages as the pure twin).
    Returns the list holding converted copies of bytes-like fields that were not bytes
    (keep it while `e` is used), None when every field was bytes (no list allocated)."""
    if not isinstance(event, tuple) or len(event) != 11:
        raise TypeError("event must be a MailboxEvent")
    cdef tuple ev = <tuple>event
    cdef bytes raw
    cdef list keep = None
    if not (type(ev[1]) is bytes and type(ev[2]) is bytes and type(ev[3]) is bytes and type(ev[8]) is bytes
            and type(ev[9]) is bytes and (ev[10] is None or type(ev[10]) is bytes)):
        keep = []
    e.etype = <int>int_in(ev[0], 1, 0xFF, "event_type")
    e.eid = id16(ev[1], "event_id", keep)
    e.mid = id16(ev[2], "message_id", keep)
    e.cid = id16(ev[3], "conversation_id", keep)
    e.cseq = int_in(ev[4], 0, QIM_U63_MAX, "conversation_seq")
    e.sender = int_in(ev[5], 0, QIM_U63_MAX, "sender_id")
    e.created = int_in(ev[6], 0, QIM_U63_MAX, "created_at_ms")
    e.mtype = int_in(ev[7], 0, 0xFFFFFFFF, "message_type")
    raw = held(ev[8], "custom_type", keep)
    e.ct_len = len(raw)
    if e.ct_len > QIM_CUSTOM_TYPE_MAX:
        raise EventGroupError("custom_type longer than 64 bytes")
    e.ctype = bptr(raw)
    raw = held(ev[9], "client_message_id", keep)
    e.flags = 0
    e.cmid = NULL
    e.body = NULL
    e.blen = 0
    if len(raw):
        e.cmid = id16(raw, "client_message_id", keep)
        e.flags |= EV_FLAG_CMID
    if ev[10] is not None:
        raw = held(ev[10], "body", keep)
        e.blen = len(raw)
        if <uint64_t>e.blen > 0xFFFFFFFF:
            raise EventGroupError("body longer than u32")
        e.body = bptr(raw)
        e.flags |= EV_FLAG_BODY
    e.n = EV_FIXED_LEN + e.ct_len + (QIM_ID_LEN if e.flags & EV_FLAG_CMID else 0)
    e.n += (4 + e.blen) if e.flags & EV_FLAG_BODY else 0
    return keep


cdef void c_write_event(const EvParts* e, unsigned char* q) noexcept:
    """The canonical bytes of a parsed event at `q` (e.n bytes)."""
    cdef Py_ssize_t off
    q[0] = EVENT_VERSION
    q[1] = <unsigned char>e.etype
    q[2] = <unsigned char>e.flags
    store_be32(q + 3, <unsigned int>e.mtype)
    memcpy(q + 7, e.eid, QIM_ID_LEN)
    memcpy(q + 23, e.mid, QIM_ID_LEN)
    memcpy(q + 39, e.cid, QIM_ID_LEN)
    store_be64(q + 55, e.cseq)
    store_be64(q + 63, e.sender)
    store_be64(q + 71, e.created)
    q[79] = <unsigned char>e.ct_len
    memcpy(q + 80, e.ctype, e.ct_len)
    off = EV_FIXED_LEN + e.ct_len
    if e.flags & EV_FLAG_CMID:
        memcpy(q + off, e.cmid, QIM_ID_LEN)
        off += QIM_ID_LEN
    if e.flags & EV_FLAG_BODY:
        store_be32(q + off, <unsigned int>e.blen)
        memcpy(q + off + 4, e.body, e.blen)


cdef bytes c_pack_event(object event):
    cdef EvParts e
    keep = c_parse_event(event, &e)  # noqa: F841 - holds converted fields while writing
    cdef bytes out = PyBytes_FromStringAndSize(NULL, e.n)
    c_write_event(&e, <unsigned char*>PyBytes_AS_STRING(out))
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
    ev = qim_event_alloc(_Event)
    qim_event_set(ev, 0, p[1])
    qim_event_set(ev, 1, eid)
    qim_event_set(ev, 2, mid)
    qim_event_set(ev, 3, cid)
    qim_event_set(ev, 4, cseq)
    qim_event_set(ev, 5, sender)
    qim_event_set(ev, 6, created)
    qim_event_set(ev, 7, load_be32(p + 3))
    qim_event_set(ev, 8, ctype)
    qim_event_set(ev, 9, cmid)
    qim_event_set(ev, 10, body)
    return ev


def pack_event(event):
    """Canonical bytes of one event. EventGroupError on a field out of range."""
    return c_pack_event(event)


def unpack_event(data):
    """Inverse of pack_event; EventGroupError on any malformed or trailing byte."""
    cdef bytes raw = as_bytes(data, "data")
    return c_unpack_event(bptr(raw), len(raw))


def pack_group(events):
    """Canonical bytes of an event group: 1..8 events, <= 8 KiB, one per event_type.

    Each event is validated, then written straight into one stack buffer (no bytes
    object per event, no list of parts)."""
    cdef unsigned char seen[256]
    cdef unsigned char buf[QIM_EG_MAX_BYTES]
    cdef Py_ssize_t total = 1, count
    cdef EvParts e
    if not isinstance(events, (list, tuple)) or isinstance(events, _Event):
        raise TypeError("events must be a list of MailboxEvent")
    count = len(events)
    if count < 1 or count > QIM_EG_MAX_EVENTS:
        raise EventGroupError(f"event group needs 1..8 events, got {count}")
    memset(seen, 0, sizeof(seen))
    buf[0] = <unsigned char>count
    for ev in events:
        keep = c_parse_event(ev, &e)  # held until the event is written below
        if seen[e.etype]:
            raise EventGroupError(f"two events of event_type {e.etype} in one group")
        seen[e.etype] = 1
        if total + 2 + e.n > QIM_EG_MAX_BYTES:
            raise EventGroupError("event group larger than 8 KiB")
        store_be16(buf + total, <unsigned short>e.n)
        c_write_event(&e, buf + total + 2)
        total += 2 + e.n
    return PyBytes_FromStringAndSize(<const char*>buf, total)


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
    out = PyList_New(count)
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
        Py_INCREF(ev)
        PyList_SET_ITEM(out, i, ev)
    if off != n:
        raise EventGroupError("trailing bytes after event group")
    return out


# Where the event_id lies in a one-event group: count u8, event_len u16, then the event's
# version, event_type, flags and message_type (7 bytes) before it.
cdef enum:
    ONE_EVENT_ID_AT = 10


def pack_each(prefix, event, event_ids):
    """[prefix ‖ pack_group([event with event_id e]) for e in event_ids]: the entries of
    one record's recipients, which differ only in their event_id (docs/decisions/0070).
    The event is validated and packed once; each entry is a copy with its event_id
    written in. EventGroupError as pack_group, or for an event_id that is not 16
    non-zero bytes; TypeError for a prefix or event_id that is not bytes-like, or
    event_ids that are not a list or tuple."""
    if not isinstance(event_ids, (list, tuple)):
        raise TypeError("event_ids must be a list of 16-byte ids")
    cdef bytes pre = as_bytes(prefix, "prefix")
    cdef bytes group = pack_group([event])
    cdef Py_ssize_t np = len(pre), n = len(pre) + len(group), k, count = len(event_ids)
    cdef const unsigned char* eid
    cdef list keep = []
    cdef bytes out
    cdef char* dst
    result = PyList_New(count)
    for k in range(count):
        item = event_ids[k]  # held while its bytes are copied
        eid = id16(item, "event_id", keep)
        out = PyBytes_FromStringAndSize(NULL, n)
        dst = PyBytes_AS_STRING(out)
        memcpy(dst, bptr(pre), np)
        memcpy(dst + np, bptr(group), n - np)
        memcpy(dst + np + ONE_EVENT_ID_AT, eid, QIM_ID_LEN)
        Py_INCREF(out)
        PyList_SET_ITEM(result, k, out)
    return result
