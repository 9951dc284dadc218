"""Generate the golden vectors of qim._core from docs/design.md §3/§4/§5 alone.

Uses only blake3, struct, zlib and json and never imports qim: the expected values are
built by hand from the documented layouts, so they check the implementations instead
of echoing them. Run `python3 tests/vectors/gen_vectors.py` to rewrite the *.json
files beside this script (they are committed; a diff means the contract moved).

Case format (one list per module file): {"fn": name, "args": [...], "result": value}
or {"fn": name, "args": [...], "error": "ErrorClassName"}. Bytes are {"hex": "..."},
tuples are lists, MailboxEvent values are {"event": [11 fields]}.
"""

import json
import os
import struct
import zlib

from blake3 import blake3

HERE = os.path.dirname(os.path.abspath(__file__))
U64 = (1 << 64) - 1
BIG_TENANT = (1 << 128) - 2  # a large u128 tenant (all but the last bit set)
TENANTS = [0, 1, 0xDEADBEEF, 1 << 64, BIG_TENANT]


def H(x):
    return {"hex": x.hex()}


def b3(data):
    return blake3(data).digest()


def t16(tenant):
    return tenant.to_bytes(16, "big")


def u64(v):
    return struct.pack(">Q", v)


def ok(fn, args, result):
    return {"fn": fn, "args": args, "result": result}


def bad(fn, args, error):
    return {"fn": fn, "args": args, "error": error}


# --- ids (docs/design.md §3 table) -------------------------------------------------------
def gen_ids():
    cases = []
    for t in TENANTS:
        for a, b in [(1, 2), (42, 7), (U64, 1), (5, 5)]:
            lo, hi = min(a, b), max(a, b)
            cid = b"\x01" + b3(b"qim.direct.v1\0" + t16(t) + u64(lo) + u64(hi))[:15]
            cases.append(ok("conversation_id_direct", [t, a, b], H(cid)))
            cases.append(ok("conversation_id_direct", [t, b, a], H(cid)))  # swapped order
            cases.append(ok("conversation_kind", [H(cid)], 1))
            cases.append(ok("commit_bucket", [t, H(cid)],
                            b3(b"qim.commit-bucket.v1\0" + t16(t) + cid)[0]))
        for g in [1, 1000, U64]:
            gid = b"\x02" + b3(b"qim.group.v1\0" + t16(t) + u64(g))[:15]
            rid = b"\x03" + b3(b"qim.room.v1\0" + t16(t) + u64(g))[:15]
            cases.append(ok("conversation_id_group", [t, g], H(gid)))
            cases.append(ok("conversation_id_room", [t, g], H(rid)))
            cases.append(ok("conversation_kind", [H(gid)], 2))
            cases.append(ok("conversation_kind", [H(rid)], 3))
        for user in [1, 2, 12345, U64]:
            lane = b3(t16(t) + u64(user))[0] & 63
            d = b3(b"qim.vbucket.v1\0" + t16(t) + u64(user))
            bucket = struct.unpack(">H", d[:2])[0]
            cases.append(ok("lane_id", [t, user], lane))
            cases.append(ok("virtual_bucket", [t, user], bucket))
            for sc in [1, 64, 65536]:
                cases.append(ok("mailbox_shard", [t, user, sc], bucket % sc))
            cases.append(ok("user_placement", [t, user, 64], [lane, bucket, bucket % 64]))
    mids = [bytes.fromhex("0000018f0e1c2a3b0001000200030000" ), bytes(range(1, 17))]
    for mid in mids:
        for shard in [0, 1, 63, 0xFFFFFFFF]:
            did = b3(b"qim.group-dispatch.v1\0" + mid + struct.pack(">I", shard))[:16]
            cases.append(ok("dispatch_id", [H(mid), shard], H(did)))
            for user, et in [(1, 1), (U64, 255), (99, 3)]:
                eid = b3(b"qim.event.v1\0" + did + u64(user) + bytes([et]))[:16]
                cases.append(ok("event_id", [H(did), user, et], H(eid)))
    nonces = [bytes(15) + b"\x01", bytes(range(16, 32)), b"\xff" * 16]
    for nonce, dev, ordinal in [(nonces[0], 1, 0), (nonces[0], 1, 1), (nonces[1], 1, 0),
                                (nonces[1], 777, 123456789), (nonces[2], U64, U64)]:
        cmid = b3(b"qim.cmid.v2\0" + nonce + u64(dev) + u64(ordinal))[:16]
        cases.append(ok("client_message_id", [H(nonce), dev, ordinal], H(cmid)))
    for ep in ["tcp://127.0.0.1:7000", "tls://im.example.com:443", "wss://héllo.example/ws"]:
        scope = b3(b"qim.endpoint-scope.v1\0" + ep.encode("utf-8"))[:16].hex()
        cases.append(ok("endpoint_scope", [ep], scope))
    for ms, lg, rg, wr in [(1, 0, 0, 0), (1717171717171, 5, 2, 9),
                           ((1 << 48) - 1, 0xFFFF, 0xFFFF, 0xFFFF), (0, 0, 0, 1)]:
        raw = struct.pack(">QQ", (ms << 16) | lg, (rg << 48) | (wr << 32))
        cases.append(ok("compose_message_id", [ms, lg, rg, wr], H(raw)))
        cases.append(ok("split_message_id", [H(raw)], [ms, lg, rg, wr]))
    z16, one16 = bytes(16), bytes(15) + b"\x01"
    cases += [
        bad("conversation_id_direct", [0, 0, 1], "IdError"),
        bad("conversation_id_direct", [0, 1, 1 << 64], "IdError"),
        bad("conversation_id_direct", [-1, 1, 2], "IdError"),
        bad("conversation_id_direct", [1 << 128, 1, 2], "IdError"),
        bad("conversation_id_group", [0, 0], "IdError"),
        bad("conversation_id_room", [0, -5], "IdError"),
        bad("conversation_kind", [H(z16)], "IdError"),
        bad("conversation_kind", [H(one16)], "IdError"),  # kind byte 0
        bad("conversation_kind", [H(b"\x04" + bytes(15))], "IdError"),
        bad("conversation_kind", [H(b"\x01" * 15)], "IdError"),
        bad("lane_id", [0, 0], "IdError"),
        bad("mailbox_shard", [0, 1, 3], "IdError"),
        bad("mailbox_shard", [0, 1, 0], "IdError"),
        bad("mailbox_shard", [0, 1, 131072], "IdError"),
        bad("commit_bucket", [0, H(z16)], "IdError"),
        bad("dispatch_id", [H(mids[1]), 1 << 32], "IdError"),
        bad("dispatch_id", [H(mids[1][:15]), 1], "IdError"),
        bad("event_id", [H(mids[1]), 1, 0], "IdError"),
        bad("event_id", [H(mids[1]), 1, 256], "IdError"),
        bad("event_id", [H(mids[1]), 0, 1], "IdError"),
        bad("client_message_id", [H(one16), 0, 1], "IdError"),
        bad("client_message_id", [H(one16), 1, -1], "IdError"),
        bad("client_message_id", [H(z16), 1, 1], "IdError"),  # the store nonce is never all zero
        bad("client_message_id", [H(one16[:15]), 1, 1], "IdError"),
        bad("endpoint_scope", [""], "IdError"),
        bad("compose_message_id", [0, 0, 0, 0], "IdError"),
        bad("compose_message_id", [1 << 48, 0, 0, 0], "IdError"),
        bad("compose_message_id", [1, 1 << 16, 0, 0], "IdError"),
        bad("split_message_id", [H(bytes(15) + b"\x01")], "IdError"),  # reserved part
        bad("split_message_id", [H(z16)], "IdError"),
        bad("split_message_id", [H(b"\x01" * 17)], "IdError"),
    ]
    return cases


# --- frame (docs/design.md §4) ------------------------------------------------------------
def header(flags, opcode, index, rid, blen, magic=0x5149, version=1, crc=None):
    pre = struct.pack(">HBBHHII", magic, version, flags, opcode, index, rid, blen)
    if crc is None:
        crc = zlib.crc32(pre)
    return pre + struct.pack(">I", crc)


def gen_frame():
    cases, streams = [], []
    good = [(0, 0x0101, 0, 0, 0), (1, 0x0201, 3, 0xFFFFFFFF, 65536), (2, 0xFFFF, 0xFFFF, 7, 5),
            (3, 0x0A04, 1, 123456, 100)]
    for f, op, idx, rid, blen in good:
        hdr = header(f, op, idx, rid, blen)
        cases.append(ok("encode_header", [f, op, idx, rid, blen], H(hdr)))
        cases.append(ok("decode_header", [H(hdr)], [f, op, idx, rid, blen]))
        cases.append(ok("decode_header", [H(b"xyz" + hdr + b"tail"), 3], [f, op, idx, rid, blen]))
    h = header(0, 0x0101, 0, 9, 4)
    cases += [
        bad("decode_header", [H(h[:19])], "TruncatedFrame"),
        bad("decode_header", [H(h), 1], "TruncatedFrame"),
        bad("decode_header", [H(header(0, 0x0101, 0, 9, 4, magic=0x4951))], "BadMagic"),
        bad("decode_header", [H(h[:16] + bytes([h[16] ^ 1]) + h[17:])], "BadCrc"),
        bad("decode_header", [H(h[:5] + bytes([h[5] ^ 0x40]) + h[6:])], "BadCrc"),
        bad("decode_header", [H(header(0, 0x0101, 0, 9, 4, version=2))], "BadVersion"),
        bad("decode_header", [H(header(0, 0x0101, 0, 9, 4, version=0))], "BadVersion"),
        bad("decode_header", [H(header(4, 0x0101, 0, 9, 4))], "BadFlags"),  # NEED_ACK
        bad("decode_header", [H(header(0x80, 0x0101, 0, 9, 4))], "BadFlags"),
        bad("decode_header", [H(header(0, 0x0101, 0, 9, 65537))], "ChunkTooLarge"),
        bad("decode_header", [H(header(0, 0x0101, 0, 9, 0xFFFFFFFF))], "ChunkTooLarge"),
        # magic is checked before CRC, CRC before version
        bad("decode_header", [H(header(0, 1, 0, 9, 4, magic=0, crc=0))], "BadMagic"),
        bad("decode_header", [H(header(0, 1, 0, 9, 4, version=9, crc=0))], "BadCrc"),
        bad("encode_header", [4, 1, 0, 0, 0], "BadFlags"),
        bad("encode_header", [8, 1, 0, 0, 0], "BadFlags"),
        bad("encode_header", [0, 1, 0, 0, 65537], "ChunkTooLarge"),
        bad("encode_header", [0, 1 << 16, 0, 0, 0], "ValueError"),
        bad("encode_header", [0, 1, 1 << 16, 0, 0], "ValueError"),
        bad("encode_header", [0, 1, 0, 1 << 32, 0], "ValueError"),
        bad("encode_header", [256, 1, 0, 0, 0], "ValueError"),
        bad("encode_header", [0, 1, 0, 0, -1], "ValueError"),
    ]
    # encode_frame of plain bodies: header + chunk body, MORE on all but the last
    for body, step in [(b"", 65536), (b"hello", 65536), (bytes(range(256)) * 3, 300)]:
        chunks, i, parts = [], 0, [body[k:k + step] for k in range(0, len(body), step)] or [b""]
        for i, part in enumerate(parts):
            more = 2 if i + 1 < len(parts) else 0
            chunks.append(H(header(more, 0x0201, i, 77, len(part)) + part))
        cases.append(ok("encode_frame", [0x0201, 77, H(body), False, step], chunks))
    # decoder streams: concatenated wire bytes and the frames (or the error) they give
    one = header(0, 0x0102, 0, 1, 3) + b"abc"
    empty = header(0, 0x0104, 0, 0, 0)
    c0 = header(2, 0x0302, 0, 5, 2) + b"AA"
    c1 = header(2, 0x0302, 1, 5, 2) + b"BB"
    c2 = header(0, 0x0302, 2, 5, 1) + b"C"
    ping = header(0, 0x0103, 0, 6, 1) + b"p"
    streams += [
        {"stream": H(one + empty), "frames": [[0x0102, 1, H(b"abc")], [0x0104, 0, H(b"")]]},
        {"stream": H(c0 + ping + c1 + c2),
         "frames": [[0x0103, 6, H(b"p")], [0x0302, 5, H(b"AABBC")]]},
        {"stream": H(c0 + c2), "error": "ChunkOrder"},
        {"stream": H(c1), "error": "ChunkOrder"},
        {"stream": H(c0 + header(3, 0x0302, 1, 5, 2) + b"BB"), "error": "ChunkOrder"},
        {"stream": H(one + header(0, 1, 0, 1, 1, magic=0x5150) + b"x"), "error": "BadMagic"},
        {"stream": H(one[:16] + b"\0\0\0\0" + b"abc"), "error": "BadCrc"},
        {"stream": H(header(0, 1, 0, 1, 1, version=2) + b"x"), "error": "BadVersion"},
        {"stream": H(header(4, 1, 0, 1, 1) + b"x"), "error": "BadFlags"},
        {"stream": H(header(0, 1, 0, 1, 70000)), "error": "ChunkTooLarge"},
        {"stream": H(header(1, 1, 0, 1, 4) + b"junk"), "error": "DecompressError"},
    ]
    return {"cases": cases, "streams": streams}


# --- mailbox_seq (docs/design.md §3) -----------------------------------------------------
def gen_mailbox_seq():
    cases = []
    for e, o in [(1, 0), (1, 1), (2, 0), (0x7FFF, (1 << 48) - 1), (300, 123456789)]:
        v = (e << 48) | o
        cases += [ok("compose", [e, o], v), ok("split", [v], [e, o]), ok("is_valid", [v], True),
                  ok("to_bytes", [v], H(struct.pack(">Q", v))),
                  ok("from_bytes", [H(struct.pack(">Q", v))], v)]
    cases.append(ok("compose", [1, 0], 1 << 48))
    for v in [0, 1, (1 << 48) - 1, 1 << 63, U64, -1]:
        cases.append(ok("is_valid", [v], False))
        cases.append(bad("split", [v], "SeqError"))
        cases.append(bad("to_bytes", [v], "SeqError"))
    cases += [
        bad("compose", [0, 0], "SeqError"), bad("compose", [0x8000, 0], "SeqError"),
        bad("compose", [1, 1 << 48], "SeqError"), bad("compose", [1, -1], "SeqError"),
        bad("from_bytes", [H(bytes(8))], "SeqError"),
        bad("from_bytes", [H(b"\x80" + bytes(7))], "SeqError"),
        bad("from_bytes", [H(b"\x00\x01" + bytes(5))], "SeqError"),
        bad("from_bytes", [H(b"\x00\x01" + bytes(7))], "SeqError"),
    ]
    return cases


# --- watermark (docs/design.md §3 "Packed watermark") ------------------------------------
def rec(flags, w, floor, reserved=0):
    return struct.pack(">BQQH", flags, w, floor, reserved)


def gen_watermark():
    cases = [ok("empty", [], H(bytes(19)))]
    uniform = [(0, 0, 0), (1, 0, 0), (1, 41, 7), (3, (1 << 48) - 1, 5), (2, 0, 0)]
    for f, w, fl in uniform:
        blob = rec(f, w, fl)
        cases.append(ok("decode", [H(blob)], [[f, w, fl]] * 64))
        cases.append(ok("encode", [[[f, w, fl]] * 64], H(blob)))
        cases.append(ok("start_offset", [H(blob)], w + 1 if f & 1 else 0))
        for lane in (0, 63):
            cases.append(ok("visible_offset", [H(blob), lane], w if f & 1 else -1))
    lanes = [(1, 100 + i, 50) if i % 2 else (0, 0, 0) for i in range(64)]
    full = b"".join(rec(*r) for r in lanes)
    cases += [
        ok("decode", [H(full)], [list(r) for r in lanes]),
        ok("encode", [[list(r) for r in lanes]], H(full)),
        ok("start_offset", [H(full)], 0),
        ok("visible_offset", [H(full), 0], -1),
        ok("visible_offset", [H(full), 1], 101),
        ok("visible_offset", [H(full), 63], 163),
        # a 1216-byte blob whose lanes are all equal decodes fine, re-encodes as 19
        ok("decode", [H(rec(1, 9, 9) * 64)], [[1, 9, 9]] * 64),
        ok("advance_all", [H(rec(1, 9, 9) * 64), 5], H(rec(1, 9, 9))),
        ok("advance_all", [H(bytes(19)), 0], H(rec(1, 0, 0))),
        ok("advance_all", [H(rec(1, 10, 0)), 12], H(rec(1, 12, 0))),
        ok("advance_all", [H(rec(3, 10, 4)), 7], H(rec(3, 10, 4))),  # duplicate: W stays
    ]
    adv = b"".join(rec(1, max(r[1], 120), r[2]) for r in lanes)
    cases.append(ok("advance_all", [H(full), 120], H(adv)))
    cases.append(ok("start_offset", [H(adv)], 121))
    mixed = b"".join(rec(1, 10 + i, 0) for i in range(64))
    cases.append(ok("start_offset", [H(mixed)], 11))
    for blob in [b"", bytes(18), bytes(20), bytes(38), bytes(1215), bytes(1217),
                 rec(4, 0, 0), rec(0x81, 0, 0), rec(1, 0, 0, reserved=1),
                 rec(1, 1 << 48, 0), rec(0, 0, 1 << 48), rec(1, 3, 4),
                 rec(1, 0, 0) * 63 + rec(1, 0, 0, reserved=0x100)]:
        cases.append(bad("decode", [H(blob)], "WatermarkError"))
        cases.append(bad("start_offset", [H(blob)], "WatermarkError"))
    cases += [
        bad("encode", [[[0, 0, 0]] * 63], "WatermarkError"),
        bad("encode", [[[0, 0, 0]] * 65], "WatermarkError"),
        bad("encode", [[[4, 0, 0]] * 64], "WatermarkError"),
        bad("encode", [[[1, 2, 3]] * 64], "WatermarkError"),
        bad("encode", [[[1, 1 << 48, 0]] * 64], "WatermarkError"),
        bad("encode", [[[1, 2]] * 64], "WatermarkError"),
        bad("advance_all", [H(bytes(19)), 1 << 48], "WatermarkError"),
        bad("advance_all", [H(bytes(19)), -1], "WatermarkError"),
        bad("advance_all", [H(rec(0, 0, 10)), 3], "WatermarkError"),  # below W_floor
        bad("visible_offset", [H(bytes(19)), 64], "ValueError"),
        bad("visible_offset", [H(bytes(19)), -1], "ValueError"),
    ]
    return cases


# --- eventgroup (docs/design.md §5) ------------------------------------------------------
def ev_bytes(et, eid, mid, cid, cseq, sender, created, mtype, ctype=b"", cmid=b"", body=None):
    flags = (1 if cmid else 0) | (2 if body is not None else 0)
    out = struct.pack(">BBBI", 1, et, flags, mtype) + eid + mid + cid
    out += struct.pack(">QQQB", cseq, sender, created, len(ctype)) + ctype + cmid
    if body is not None:
        out += struct.pack(">I", len(body)) + body
    return out


def ev_json(et, eid, mid, cid, cseq, sender, created, mtype, ctype=b"", cmid=b"", body=None):
    return {"event": [et, H(eid), H(mid), H(cid), cseq, sender, created, mtype, H(ctype),
                      H(cmid), None if body is None else H(body)]}


def gen_eventgroup():
    eid, mid, cid = b3(b"e")[:16], bytes(range(1, 17)), b"\x02" + b3(b"g")[:15]
    cmid = b3(b"c")[:16]
    events = [
        (1, eid, mid, cid, 1, 42, 1717171717171, 1),
        (2, eid, mid, cid, (1 << 63) - 1, 0, 0, 0, b"x" * 64, cmid, b""),
        (3, eid, mid, cid, 7, 9, 10, 3, b"app.card", b"", b"hello body"),
        (4, eid, mid, cid, 7, 9, 10, 0xFFFFFFFF, b"", cmid),  # unknown future type kept
        (255, eid, mid, cid, 8, 1, 2, 4, b"", b"", bytes(1000)),
    ]
    cases = []
    for e in events:
        raw = ev_bytes(*e)
        cases.append(ok("pack_event", [ev_json(*e)], H(raw)))
        cases.append(ok("unpack_event", [H(raw)], ev_json(*e)))
    grp = [events[0], events[1], events[2]]
    graw = bytes([3]) + b"".join(struct.pack(">H", len(ev_bytes(*e))) + ev_bytes(*e) for e in grp)
    cases.append(ok("pack_group", [[ev_json(*e) for e in grp]], H(graw)))
    cases.append(ok("unpack_group", [H(graw)], [ev_json(*e) for e in grp]))
    eight = [(t, eid, mid, cid, t, 1, 2, 1) for t in range(1, 9)]
    eraw = bytes([8]) + b"".join(struct.pack(">H", 80) + ev_bytes(*e) for e in eight)
    cases.append(ok("pack_group", [[ev_json(*e) for e in eight]], H(eraw)))
    cases.append(ok("unpack_group", [H(eraw)], [ev_json(*e) for e in eight]))
    base = ev_bytes(*events[0])
    big = (1, eid, mid, cid, 1, 1, 1, 1, b"", b"", bytes(8192 - 1 - 2 - 84))
    cases.append(ok("pack_group", [[ev_json(*big)]], H(b"\x01" + struct.pack(">H", 8189)
                                                       + ev_bytes(*big))))
    too_big = big[:-1] + (bytes(8192 - 84 - 2),)
    nine = eight + [(9, eid, mid, cid, 9, 1, 2, 1)]
    z = bytes(16)
    cases += [
        bad("pack_event", [ev_json(0, eid, mid, cid, 1, 1, 1, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(256, eid, mid, cid, 1, 1, 1, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(1, z, mid, cid, 1, 1, 1, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid[:15], cid, 1, 1, 1, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, z, 1, 1, 1, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, cid, 1 << 63, 1, 1, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, cid, 1, -1, 1, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, cid, 1, 1, 1 << 63, 1)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, cid, 1, 1, 1, 1 << 32)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, cid, 1, 1, 1, 1, b"x" * 65)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, cid, 1, 1, 1, 1, b"", z)], "EventGroupError"),
        bad("pack_event", [ev_json(1, eid, mid, cid, 1, 1, 1, 1, b"", cmid[:8])],
            "EventGroupError"),
        bad("unpack_event", [H(base[:79])], "EventGroupError"),
        bad("unpack_event", [H(base + b"\0")], "EventGroupError"),
        bad("unpack_event", [H(b"\x02" + base[1:])], "EventGroupError"),
        bad("unpack_event", [H(base[:1] + b"\0" + base[2:])], "EventGroupError"),
        bad("unpack_event", [H(base[:2] + b"\x04" + base[3:])], "EventGroupError"),
        bad("unpack_event", [H(base[:2] + b"\x01" + base[3:])], "EventGroupError"),  # no cmid
        bad("unpack_event", [H(base[:2] + b"\x02" + base[3:] + b"\0\0\0\x05ab")],
            "EventGroupError"),
        bad("unpack_event", [H(base[:79] + b"\x41" + b"x" * 65)], "EventGroupError"),
        bad("unpack_event", [H(base[:7] + z + base[23:])], "EventGroupError"),
        bad("unpack_event", [H(base[:55] + b"\x80" + base[56:])], "EventGroupError"),
        bad("pack_group", [[]], "EventGroupError"),
        bad("pack_group", [[ev_json(*e) for e in nine]], "EventGroupError"),
        bad("pack_group", [[ev_json(*events[0]), ev_json(*events[0])]], "EventGroupError"),
        bad("pack_group", [[ev_json(*too_big)]], "EventGroupError"),
        bad("unpack_group", [H(b"")], "EventGroupError"),
        bad("unpack_group", [H(b"\x00")], "EventGroupError"),
        bad("unpack_group", [H(b"\x09" + eraw[1:])], "EventGroupError"),
        bad("unpack_group", [H(graw + b"\0")], "EventGroupError"),
        bad("unpack_group", [H(graw[:-1])], "EventGroupError"),
        bad("unpack_group", [H(b"\x02" + graw[1:1 + 2 + len(base)] * 2)], "EventGroupError"),
        bad("unpack_group", [H(b"\x01" + bytes(8192))], "EventGroupError"),
    ]
    return cases


def main():
    outputs = {
        "ids": gen_ids(), "frame": gen_frame(), "mailbox_seq": gen_mailbox_seq(),
        "watermark": gen_watermark(), "eventgroup": gen_eventgroup(),
    }
    for name, data in outputs.items():
        with open(os.path.join(HERE, f"{name}.json"), "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
            fh.write("\n")


if __name__ == "__main__":
    main()
