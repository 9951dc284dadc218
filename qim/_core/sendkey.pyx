# cython: language_level=3
"""SEND_MESSAGE's routing key read straight from its wire bytes, compiled: the gateway's
fast path of `send_key` (qim/services/gateway/backends/writer.py; docs/design.md §4
"Gateway validation", §5.1). Pure twin and oracle: _pure/sendkey.py, whose docstring
states the rule; this module must answer exactly as it does for every input.

One pass over the bytes with no protobuf object: the fields 1-8 of SendMessage are
located (pointers into `body`, never copied), every check runs on them, and only the
key is allocated (the conversation_id slice). None sends the caller to the full path.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.unicode cimport Py_UNICODE_ISSPACE
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcmp

from qim._core.bytesio cimport all_zero, bptr
from qim._core.limits cimport QIM_CUSTOM_TYPE_MAX, QIM_ID_LEN, QIM_U63_MAX, check_consts

from qim.consts import (
    CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, MESSAGE_TYPE_CONTROL, MESSAGE_TYPE_TEXT,
)
from qim._core.ids import conversation_id_direct

check_consts()  # import-time guard against a stale build
assert (CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP) == (1, 2)
assert (MESSAGE_TYPE_TEXT, MESSAGE_TYPE_CONTROL) == (1, 4)

cdef enum:
    ENUM_MAX = 0x7FFFFFFF  # an enum is an int32: a larger varint is the full path's case
    FIELDS = 9  # numbers 1..8 are read; index 0 unused


cdef struct Span:
    # where a bytes field lies in the body (n == -1: absent), or a varint's value
    Py_ssize_t at
    Py_ssize_t n
    uint64_t value


cdef inline Py_ssize_t read_varint(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end,
                                   uint64_t* out) noexcept:
    """The position after the varint at `pos`, its value in *out; -1 when it is truncated
    or runs past 64 bits (the full path's case, as _pure/sendkey.py _varint)."""
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef Py_ssize_t i = pos
    cdef unsigned char b
    while i < end and i < pos + 10:
        b = p[i]
        if i == pos + 9 and b > 1:
            return -1
        value |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = value
            return i + 1
        shift += 7
        i += 1
    return -1


cdef bint shows_text(const unsigned char* p, Py_ssize_t end) noexcept:
    """True when the text certainly passes the full path's blank rule: a character that is
    not white space (Py_UNICODE_ISSPACE, what str.strip removes) before any malformed
    UTF-8 (as _pure/sendkey.py _shows_text: the well-formed sequences of Unicode's table
    3-7, which Python's strict decoder accepts). Usual text returns at its first byte."""
    cdef Py_ssize_t pos = 0, n, i
    cdef unsigned char lead, second
    cdef uint32_t cp  # a code point as an integer (a Py_UCS4 would be a character to Cython)
    while pos < end:
        lead = p[pos]
        if lead < 0x80:
            n, cp = 1, lead
        elif 0xC2 <= lead <= 0xDF:
            n, cp = 2, lead & 0x1F
        elif 0xE0 <= lead <= 0xEF:
            n, cp = 3, lead & 0x0F
        elif 0xF0 <= lead <= 0xF4:
            n, cp = 4, lead & 0x07
        else:
            return False
        if pos + n > end:
            return False
        if n > 1:
            second = p[pos + 1]
            # overlong forms, surrogates and past U+10FFFF are malformed (table 3-7)
            if ((lead == 0xE0 and second < 0xA0) or (lead == 0xED and second > 0x9F)
                    or (lead == 0xF0 and second < 0x90) or (lead == 0xF4 and second > 0x8F)):
                return False
            for i in range(1, n):
                if p[pos + i] & 0xC0 != 0x80:
                    return False
                cp = (cp << 6) | (p[pos + i] & 0x3F)
        if not Py_UNICODE_ISSPACE(<Py_UCS4>cp):
            return True
        pos += n
    return False


cdef inline bint good_id(const unsigned char* p, Py_ssize_t n) noexcept:
    return n == QIM_ID_LEN and not all_zero(p, n)


def route_key(body, tenant, user_id, max_body):
    """The conversation_id of a plain SEND_MESSAGE every gateway check accepts, else None
    (the full path decides; _pure/sendkey.py). `body`: the upstream bytes (any other type
    is None); `tenant`, `user_id`: the actor from AUTH; `max_body`: the body limit in
    bytes, an int (TypeError otherwise). Raises only that and what
    ids.conversation_id_direct raises."""
    if not isinstance(max_body, int):
        raise TypeError(f"max_body must be int, not {type(max_body).__name__}")
    # any int compares as the twin's does: below 0 every body is over, past the
    # address space none is
    cdef Py_ssize_t limit = -1 if max_body < 0 else (PY_SSIZE_T_MAX if max_body > PY_SSIZE_T_MAX else max_body)
    if type(body) is not bytes:
        return None
    cdef const unsigned char* p = bptr(<bytes>body)
    cdef Py_ssize_t end = len(<bytes>body), pos = 0, size
    cdef Span f[FIELDS]
    cdef int i, number, wire
    cdef uint64_t tag, value
    for i in range(FIELDS):
        f[i].at, f[i].n, f[i].value = 0, -1, 0
    while pos < end:
        pos = read_varint(p, pos, end, &tag)
        if pos < 0:
            return None
        if tag >> 3 >= FIELDS:
            return None  # replies and mentions (9-11), unknown numbers
        number, wire = <int>(tag >> 3), <int>(tag & 7)
        if number == 0 or f[number].n != -1:
            return None  # a repeated scalar is last-wins in protobuf: the full path's case
        if wire == 2 and (number <= 2 or number == 5 or number == 6 or number == 8):
            pos = read_varint(p, pos, end, &value)
            if pos < 0 or value > <uint64_t>(end - pos):
                return None
            size = <Py_ssize_t>value
            f[number].at, f[number].n = pos, size
            pos += size
        elif wire == 0 and (number == 3 or number == 4 or number == 7):
            pos = read_varint(p, pos, end, &f[number].value)
            if pos < 0:
                return None
            f[number].n = 0  # present
        else:
            return None
    if not (good_id(p + f[1].at, f[1].n) and good_id(p + f[2].at, f[2].n)):
        return None
    if f[8].n > 0 and (not good_id(p + f[8].at, f[8].n) or memcmp(p + f[8].at, p + f[1].at, QIM_ID_LEN) == 0):
        return None
    cdef Py_ssize_t content = f[6].n if f[6].n > 0 else 0  # an absent body is empty
    if f[5].n > QIM_CUSTOM_TYPE_MAX or content > limit:
        return None
    cdef uint64_t message_type = f[4].value
    if message_type > ENUM_MAX or message_type == 4:  # CONTROL
        return None
    if message_type == 1 and not shows_text(p + f[6].at, content):  # TEXT: the blank rule
        return None
    cdef int kind = p[f[2].at]
    if kind != 1 and kind != 2:  # direct, group (rooms and unknown kinds: the full path)
        return None
    conversation = PyBytes_FromStringAndSize(<const char*>(p + f[2].at), QIM_ID_LEN)
    if kind == 2:
        return conversation
    cdef uint64_t peer = f[3].value
    if peer == 0 or peer > QIM_U63_MAX:
        return None
    if conversation_id_direct(tenant, user_id, peer) != conversation:
        return None
    return conversation
