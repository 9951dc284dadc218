"""Hypothesis argument strategies for the differential tests (tests/core/test_differential.py).

Every public function gets `call_args(*params)`: each parameter is a pair
(valid values, bad values). A drawn argument tuple is either all valid or has exactly
one parameter replaced by a bad value (out of range by a little or a lot, the wrong
type, a truncated or corrupted encoding), so every validation branch is reached while
most draws still get past the earlier checks. Valid encodings are built with the pure
twin; the tests compare both implementations on them and on their corruptions.
"""

from __future__ import annotations

import struct

import zstandard
from hypothesis import strategies as st

from qim._core.types import MailboxEvent

from ._impls import PURE

M48 = (1 << 48) - 1
U63 = (1 << 63) - 1
U64 = (1 << 64) - 1
U128 = (1 << 128) - 1

# values of the wrong type for any parameter (bool is an int and is tested as one)
JUNK = st.one_of(st.none(), st.floats(-1e3, 1e3, allow_nan=False), st.text(max_size=3),
                 st.just([1]), st.just(()), st.just(object()))


def call_args(*params) -> st.SearchStrategy[tuple]:
    """Argument tuples: all valid, or all valid but one parameter drawn from its bad values."""
    valid = st.tuples(*(v for v, _ in params))
    if not params:
        return valid

    def one_bad(i: int) -> st.SearchStrategy[tuple]:
        return st.tuples(*(bad if j == i else ok for j, (ok, bad) in enumerate(params)))

    return st.one_of(valid, st.integers(0, len(params) - 1).flatmap(one_bad))


def uint(lo: int, hi: int, *edges: int) -> tuple:
    """(valid, bad) for an int parameter with range lo..hi (more edges may be given)."""
    points = (lo, hi, *edges)
    valid = st.one_of(st.integers(lo, hi), st.sampled_from([p for p in points if lo <= p <= hi]))
    bad = st.one_of(st.integers(lo - 3, lo - 1), st.integers(hi + 1, hi + 3),
                    st.integers(-(1 << 130), 1 << 130), JUNK)
    return valid, bad


def as_buffer(raw: bytes) -> st.SearchStrategy:
    """The same bytes as bytes, bytearray or memoryview (all accepted as input)."""
    return st.sampled_from([bytes, bytearray, memoryview]).map(lambda kind: kind(raw))


def _flip(raw: bytes, at: int, mask: int) -> bytes:
    """raw with the byte at `at` (mod len) XOR-ed with mask (b"" stays b"")."""
    if not raw:
        return raw
    at %= len(raw)
    return raw[:at] + bytes([raw[at] ^ mask]) + raw[at + 1:]


def corrupted(good: st.SearchStrategy[bytes]) -> st.SearchStrategy:
    """Encodings that are wrong: truncated, one byte changed, extended, random, wrong type."""
    cut = good.flatmap(lambda b: st.integers(0, max(len(b) - 1, 0)).map(lambda i: b[:i]))
    flip = st.builds(_flip, good, st.integers(0), st.integers(1, 255))
    longer = st.tuples(good, st.binary(min_size=1, max_size=3)).map(lambda t: t[0] + t[1])
    return st.one_of(cut, flip, longer, st.binary(max_size=40), JUNK, st.integers())


def encoded(good: st.SearchStrategy[bytes]) -> tuple:
    """(valid, bad) for a bytes parameter holding an encoding."""
    return good.flatmap(as_buffer), corrupted(good)


# --- frame ------------------------------------------------------------------------
F = PURE["frame"]
header_fields = st.tuples(st.integers(0, 3), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF),
                          st.integers(0, 0xFFFFFFFF), st.integers(0, 65536))
good_header = header_fields.map(lambda f: F.encode_header(*f))
body = (st.binary(max_size=400), st.one_of(JUNK, st.integers()))
compress = (st.booleans(), st.sampled_from([0, 1, None, "", "x"]))


def _zstd(raw: bytes, mode: int) -> bytes:
    if mode == 2:  # streamed: no content size in the frame header
        cobj = zstandard.ZstdCompressor().compressobj()
        return cobj.compress(raw) + cobj.flush()
    return zstandard.ZstdCompressor(write_content_size=bool(mode)).compress(raw)


good_zstd = st.builds(_zstd, st.binary(max_size=600) | st.integers(0, 900).map(bytes),
                      st.integers(0, 2))

frames_spec = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.binary(max_size=200),
                                 st.booleans(), st.integers(1, 90)), max_size=4)


def _wire(frames, shuffle, flip) -> bytes:
    chunks = [c for op, rid, b, comp, step in frames
              for c in F.encode_frame(op, rid, b, compress=comp, chunk_bytes=step)]
    if shuffle and len(chunks) > 1:
        chunks = chunks[shuffle % len(chunks):] + chunks[:shuffle % len(chunks)]
    return _flip(b"".join(chunks), *flip) if flip else b"".join(chunks)


def _cut(raw: bytes, cuts: list[int]) -> list[bytes]:
    marks = [0, *sorted({c for c in cuts if 0 < c < len(raw)}), len(raw)]
    return [raw[a:b] for a, b in zip(marks, marks[1:])] or [raw]


wire = st.builds(_wire, frames_spec, st.integers(0, 5),
                 st.none() | st.tuples(st.integers(0), st.integers(1, 255)))
feeds = st.tuples(wire, st.lists(st.integers(0, 2000), max_size=5)).flatmap(
    lambda t: st.tuples(*(as_buffer(p) for p in _cut(*t))))
decoder_args = call_args(uint(0, 1 << 32, 0, 100, 400), uint(1, 1 << 16, 1, 2, 4),
                         (feeds, st.lists(JUNK, min_size=1, max_size=2).map(tuple)))


# --- mailbox_seq ---------------------------------------------------------------------
seq_value = uint(1 << 48, U63, 1 << 49, U63 - 1)
seq_bytes = encoded(st.integers(1 << 48, U63).map(lambda v: v.to_bytes(8, "big")))

# --- watermark -----------------------------------------------------------------------
record = st.tuples(st.sampled_from([0, 1, 2, 3]), st.integers(0, 40) | st.just(M48),
                   st.integers(0, 40) | st.just(M48)).filter(
    lambda r: not r[0] & 1 or r[1] >= r[2])
raw_record = st.tuples(st.sampled_from([0, 1, 2, 3, 4, 0x80]),
                       st.sampled_from([0, 1, 5, M48, M48 + 1, U64]),
                       st.sampled_from([0, 1, 5, M48, M48 + 1, U64]))
bad_record = st.tuples(st.sampled_from([4, 0x80, 256, -1]), st.integers(-1, 3) | st.just(M48 + 1),
                       st.integers(0, 3) | st.just(M48 + 1))
records = st.one_of(st.lists(record, min_size=64, max_size=64), record.map(lambda r: [r] * 64))


def _blob(recs, reserved: int = 0) -> bytes:
    return b"".join(struct.pack(">BQQH", f, w, fl, reserved) for f, w, fl in recs)


good_blob = st.one_of(record.map(lambda r: _blob([r])), records.map(_blob))
bad_blob = st.one_of(corrupted(good_blob), raw_record.map(lambda r: _blob([r])),
                     st.lists(raw_record, min_size=64, max_size=64).map(_blob),
                     record.map(lambda r: _blob([r], reserved=1)))
blob = (good_blob.flatmap(as_buffer), bad_blob)
records_arg = (records.flatmap(lambda rs: st.sampled_from([rs, tuple(rs), [list(r) for r in rs]])),
               st.one_of(st.lists(record, min_size=63, max_size=65).filter(lambda rs: len(rs) != 64),
                         st.lists(bad_record | JUNK, min_size=64, max_size=64), JUNK))

# --- eventgroup ----------------------------------------------------------------------
nz_id = st.binary(min_size=16, max_size=16).filter(any)
bad_id = st.one_of(st.just(bytes(16)), st.binary(max_size=15), st.binary(min_size=17, max_size=18),
                   JUNK, st.integers())
EVENT_FIELDS = (
    uint(1, 255), (nz_id, bad_id), (nz_id, bad_id), (nz_id, bad_id), uint(0, U63),
    uint(0, U63), uint(0, U63), uint(0, 0xFFFFFFFF, 1, 3, 5),
    (st.binary(max_size=64), st.one_of(st.binary(min_size=65, max_size=66), JUNK, st.integers())),
    (st.just(b"") | nz_id, bad_id), (st.none() | st.binary(max_size=1100), JUNK | st.integers()),
)
good_event = st.tuples(*(v for v, _ in EVENT_FIELDS)).map(lambda t: MailboxEvent(*t))
any_event = call_args(*EVENT_FIELDS).map(lambda t: MailboxEvent(*t))
event_arg = (good_event, st.one_of(any_event, JUNK, st.integers(),
                                   st.lists(st.integers(), min_size=11, max_size=11).map(tuple)))
EG = PURE["eventgroup"]
good_group = st.lists(good_event, min_size=1, max_size=8, unique_by=lambda e: e.event_type)
group_arg = (good_group,
             st.one_of(st.lists(any_event, max_size=9), good_group.map(tuple), JUNK,
                       st.lists(good_event, min_size=2, max_size=3).map(
                           lambda es: [e._replace(event_type=7) for e in es])))
prefix_arg = (st.binary(max_size=8).flatmap(as_buffer), st.one_of(JUNK, st.integers()))
event_ids_arg = (st.lists(nz_id, max_size=5).flatmap(lambda ids: st.sampled_from([ids, tuple(ids)])),
                 st.one_of(st.lists(nz_id | bad_id, min_size=1, max_size=3), JUNK, st.integers(),
                           st.lists(nz_id, max_size=2).map(iter)))
event_bytes = encoded(good_event.map(EG.pack_event))
group_bytes = encoded(good_group.map(lambda es: EG.pack_group(
    [e._replace(body=None if e.body is None else e.body[:600]) for e in es])))

# --- ids -----------------------------------------------------------------------------
tenant = uint(0, U128, 1, U64, U64 + 1)
nz64 = uint(1, U64, 1, 2)
conv_id = (st.one_of(st.tuples(st.integers(1, 3), st.binary(min_size=15, max_size=15)).map(
    lambda t: bytes([t[0]]) + t[1]), nz_id), bad_id)  # kinds 1..3 mostly, any byte sometimes
shard_count = (st.sampled_from([1 << k for k in range(17)]),
               st.one_of(st.sampled_from([0, 3, 48, 65535, 1 << 17]), JUNK))
endpoint = (st.text(min_size=1, max_size=30), st.one_of(st.just(""), st.just("bad\udcff"),
                                                        st.binary(max_size=5), JUNK))
message_id = (st.tuples(st.integers(0, M48), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF),
                        st.integers(0, 0xFFFF)).filter(any).map(
    lambda t: PURE["ids"].compose_message_id(*t)),
              st.one_of(bad_id, st.binary(min_size=16, max_size=16)))

# --- sendkey ---------------------------------------------------------------------------
# SendMessage encodings near every check of the gateway's send path (qim/wire/validate.py):
# ids good, zero or short; the direct conversation of (tenant, user, peer) or another;
# custom_type and body at their limits; message types 0-5 and past the int32 enum; TEXT
# bodies blank or not; reply and mentions sometimes; then wire oddities appended
# (a repeated field, an unknown one, a wrong wire type, an overlong varint).
SEND_MAX_BODY = 300  # a small limit so bodies reach it
_id_or_bad = st.one_of(nz_id, nz_id, nz_id, st.just(bytes(16)), st.binary(max_size=17))
_SPACES = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
_text_body = st.one_of(  # near the blank rule: white space of every kind, then text or malformed UTF-8
    st.binary(max_size=SEND_MAX_BODY + 2), st.just(b""), st.just(" \u3000\n".encode()),
    st.binary(min_size=1, max_size=8).map(lambda b: b"hello " + b),
    st.tuples(st.text(_SPACES, max_size=4), st.text(max_size=4), st.binary(max_size=3)).map(
        lambda t: (t[0] + t[1]).encode("utf-8", "surrogatepass") + t[2]),
    st.tuples(st.text(_SPACES, max_size=3), st.sampled_from(
        [b"\xc0\xa0", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf0\x8f\xbf\xbf",
         b"\xe3\x80", b"\xc2", b"\xf5", b"\x80", b"\xe4\xbd\xa0", b"\xf0\x9f\x98\x80", b"\xc2\xa0"])).map(
        lambda t: t[0].encode() + t[1]))
_ODDITIES = (b"\x18\x05", b"\x0a\x02ab", b"\x60\x01", b"\x52\x00", b"\x58\x01",
             b"\x50\x07", b"\x5a\x01\x07", b"\x08\x01", b"\x22\x00", b"\xa0\x01\x01", b"\x80\x00",
             b"\x20\x81\x80\x80\x80\x80\x80\x80\x80\x80\x01", b"\x20\xff\xff\xff\xff\x0f", b"\x38\x80\x00")


@st.composite
def send_case(draw) -> tuple[bytes, int, int, int]:
    """(SendMessage bytes, tenant, user_id, max_body): a send the gateway takes with, most
    of the time, one or two of its parts drawn from near or past a check instead."""
    from qim.proto.v1 import message_pb2

    def odd(good, bad):  # the good value 5 times in 6
        return draw(st.one_of(st.just(good), bad) if draw(st.integers(0, 5)) == 0 else st.just(good))

    tenant = draw(st.one_of(st.integers(0, 3), st.integers(0, U128)))
    user, peer = draw(st.integers(1, U63)), draw(st.integers(1, U63))
    peer = odd(peer, st.sampled_from([0, U63 + 1, U64]))
    kind = odd(draw(st.sampled_from([1, 1, 2])), st.sampled_from([3, 0, 9]))
    if kind == 1 and 0 < peer <= U64:
        conversation = odd(PURE["ids"].conversation_id_direct(tenant, user, peer), _id_or_bad)
    else:
        conversation = bytes([kind]) + draw(st.binary(min_size=15, max_size=15))
    cmid = odd(draw(nz_id), _id_or_bad)
    message_type = odd(draw(st.sampled_from([1, 1, 2, 3, 5])), st.sampled_from([0, 4, 99, 0x7FFFFFFF, -1]))
    body = draw(st.one_of(st.binary(min_size=1, max_size=20).map(lambda b: b"hi " + b),
                          st.text(min_size=1, max_size=5).map(lambda t: t.encode("utf-8", "surrogatepass")))) \
        if message_type == 1 else b""
    msg = message_pb2.SendMessage(
        client_message_id=cmid, conversation_id=conversation, recipient_user_id=min(peer, U64),
        group_id=draw(st.sampled_from([0, 0, 5, U64])), message_type=message_type,
        custom_type=odd(b"", st.binary(max_size=66)), body=odd(body, _text_body),
        previous_client_message_id=odd(b"", st.one_of(_id_or_bad, st.just(cmid))))
    if draw(st.integers(0, 7)) == 0:
        msg.reply_to_message_id = draw(_id_or_bad)
    if draw(st.integers(0, 7)) == 0:
        msg.mention_user_ids.extend(draw(st.lists(st.integers(0, U64), max_size=3)))
    if draw(st.integers(0, 9)) == 0:
        msg.mention_all = True
    raw = msg.SerializeToString() + odd(b"", st.sampled_from(_ODDITIES))
    return raw, tenant, user, odd(SEND_MAX_BODY, st.integers(-2, SEND_MAX_BODY + 2))


send_args = st.one_of(
    send_case(),
    send_case().flatmap(lambda c: st.tuples(st.one_of(corrupted(st.just(c[0])), as_buffer(c[0])),
                                            st.just(c[1]), st.just(c[2]), st.just(c[3]))),
    call_args((send_case().map(lambda c: c[0]), st.binary(max_size=40)), tenant, nz64,
              (st.integers(0, 1 << 70), st.one_of(JUNK, st.integers(-(1 << 70), -1)))))
