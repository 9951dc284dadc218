"""Id derivations (docs/design.md §3 table) on both implementations."""

from __future__ import annotations

import collections

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from qim.errors import IdError

from ._impls import COMPILED, PURE

U64 = 2**64 - 1
BIG = 2**128 - 1


def test_direct_is_symmetric_and_kinded(ids) -> None:
    for tenant in (0, 7, BIG):
        a = ids.conversation_id_direct(tenant, 10, 20)
        assert a == ids.conversation_id_direct(tenant, 20, 10)
        assert len(a) == 16 and a[0] == 1 and ids.conversation_kind(a) == 1
    assert ids.conversation_id_direct(0, 10, 20) != ids.conversation_id_direct(1, 10, 20)
    assert ids.conversation_id_direct(0, 10, 20) != ids.conversation_id_direct(0, 10, 21)
    expect = b"\x01" + blake3(b"qim.direct.v1\0" + bytes(16) + (1).to_bytes(8, "big")
                              + (2).to_bytes(8, "big")).digest()[:15]
    assert ids.conversation_id_direct(0, 2, 1) == expect


def test_group_and_room_differ(ids) -> None:
    g, r = ids.conversation_id_group(0, 5), ids.conversation_id_room(0, 5)
    assert g[0] == 2 and r[0] == 3 and g[1:] != r[1:]
    assert ids.conversation_kind(g) == 2 and ids.conversation_kind(r) == 3


def test_tenant_width_is_128_bits(ids) -> None:
    # tenants 1 and 2**64 + 1 share the low 64 bits but must hash differently
    assert ids.lane_id(1, 9) == ids.lane_id(1, 9)
    assert ids.conversation_id_group(1, 9) != ids.conversation_id_group(2**64 + 1, 9)
    assert ids.virtual_bucket(BIG, 1) == int.from_bytes(
        blake3(b"qim.vbucket.v1\0" + b"\xff" * 16 + (1).to_bytes(8, "big")).digest()[:2], "big")


def test_placement(ids) -> None:
    for user in (1, 2, 1000, U64):
        lane, bucket, shard = ids.user_placement(0, user, 64)
        assert lane == ids.lane_id(0, user) and 0 <= lane < 64
        assert bucket == ids.virtual_bucket(0, user) and 0 <= bucket < 65536
        assert shard == bucket % 64 == ids.mailbox_shard(0, user, 64)
        assert ids.mailbox_shard(0, user, 1) == 0
        assert ids.mailbox_shard(0, user, 65536) == bucket


def test_lanes_and_buckets_spread(ids) -> None:
    lanes = collections.Counter(ids.lane_id(0, u) for u in range(1, 6401))
    assert len(lanes) == 64 and max(lanes.values()) < 200
    shards = collections.Counter(ids.mailbox_shard(3, u, 64) for u in range(1, 6401))
    assert len(shards) == 64 and max(shards.values()) < 200


def test_commit_bucket_dispatch_event_cmid(ids) -> None:
    cid = ids.conversation_id_group(0, 77)
    assert 0 <= ids.commit_bucket(0, cid) < 256
    assert ids.commit_bucket(0, cid) == blake3(
        b"qim.commit-bucket.v1\0" + bytes(16) + cid).digest()[0]
    mid = ids.compose_message_id(1_717_000_000_000, 1, 2, 3)
    d0, d1 = ids.dispatch_id(mid, 0), ids.dispatch_id(mid, 1)
    assert len(d0) == 16 and d0 != d1
    e = ids.event_id(d0, 42, 1)
    assert len(e) == 16 and e != ids.event_id(d0, 42, 2) and e != ids.event_id(d0, 43, 1)
    assert e == ids.event_id(bytearray(d0), 42, 1)  # deterministic, never random
    nonce, other = b"\x07" * 16, b"\x08" * 16
    c0 = ids.client_message_id(nonce, 9, 0)
    assert len(c0) == 16 and c0 != ids.client_message_id(nonce, 9, 1) and any(c0)
    # a reinstalled device (same device_id, new store) never repeats an earlier store's cmid
    assert c0 != ids.client_message_id(other, 9, 0)
    assert c0 == blake3(b"qim.cmid.v2\0" + nonce + (9).to_bytes(8, "big") + bytes(8)).digest()[:16]


def test_endpoint_scope(ids) -> None:
    s = ids.endpoint_scope("tcp://127.0.0.1:7000")
    assert len(s) == 32 and s == s.lower() and int(s, 16) >= 0
    assert s != ids.endpoint_scope("tcp://127.0.0.1:7001")
    with pytest.raises(IdError):
        ids.endpoint_scope("")
    with pytest.raises(IdError):
        ids.endpoint_scope("bad\udcff")
    with pytest.raises(TypeError):
        ids.endpoint_scope(b"tcp://x")


def test_message_id_compose_split(ids) -> None:
    mid = ids.compose_message_id(1_717_171_717_171, 65535, 7, 513)
    assert mid[-4:] == bytes(4) and mid[:6] == (1_717_171_717_171).to_bytes(6, "big")
    assert ids.split_message_id(mid) == (1_717_171_717_171, 65535, 7, 513)
    earlier = ids.compose_message_id(1_717_171_717_170, 65535, 65535, 65535)
    assert earlier < mid  # time ordered as bytes
    with pytest.raises(IdError):
        ids.split_message_id(mid[:-1] + b"\x01")
    with pytest.raises(IdError):
        ids.compose_message_id(0, 0, 0, 0)


@pytest.mark.parametrize("call", [
    lambda m: m.conversation_id_direct(0, 0, 1), lambda m: m.conversation_id_direct(0, 1, U64 + 1),
    lambda m: m.conversation_id_direct(-1, 1, 2), lambda m: m.conversation_id_group(BIG + 1, 1),
    lambda m: m.conversation_id_room(0, 0), lambda m: m.conversation_kind(bytes(16)),
    lambda m: m.conversation_kind(b"\x05" + bytes(15)), lambda m: m.conversation_kind(b"\x01"),
    lambda m: m.lane_id(0, 0), lambda m: m.virtual_bucket(0, -3),
    lambda m: m.mailbox_shard(0, 1, 48), lambda m: m.user_placement(0, 1, 0),
    lambda m: m.commit_bucket(0, b"\x01" * 15), lambda m: m.dispatch_id(bytes(16), 0),
    lambda m: m.dispatch_id(b"\x01" * 16, -1), lambda m: m.event_id(b"\x01" * 16, 1, 0),
    lambda m: m.client_message_id(b"\x01" * 16, 0, 0), lambda m: m.client_message_id(b"\x01" * 16, 1, U64 + 1),
    lambda m: m.client_message_id(bytes(16), 1, 0), lambda m: m.client_message_id(b"\x01" * 15, 1, 0),
    lambda m: m.compose_message_id(2**48, 0, 0, 0), lambda m: m.compose_message_id(1, 0, -1, 0),
])
def test_id_errors(ids, call) -> None:
    with pytest.raises(IdError) as info:
        call(ids)
    assert type(info.value) is IdError


def test_type_errors(ids) -> None:
    with pytest.raises(TypeError):
        ids.lane_id(0, 1.0)
    with pytest.raises(TypeError):
        ids.lane_id("0", 1)
    with pytest.raises(TypeError):
        ids.conversation_kind("x" * 16)


# --- differential ---------------------------------------------------------------------

def _call(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared by class
        return ("error", type(e))


int_st = st.one_of(st.integers(-2, 70), st.integers(U64 - 2, U64 + 2),
                   st.integers(2**128 - 2, 2**128 + 1), st.integers(0, 2**70))
bytes_st = st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=18),
                     st.just(bytes(16)), st.just(b"\x01" * 12 + bytes(4)))
FNS = [("conversation_id_direct", "iii"), ("conversation_id_group", "ii"),
       ("conversation_id_room", "ii"), ("conversation_kind", "b"), ("lane_id", "ii"),
       ("virtual_bucket", "ii"), ("mailbox_shard", "iii"), ("user_placement", "iii"),
       ("commit_bucket", "ib"), ("dispatch_id", "bi"), ("event_id", "bii"),
       ("client_message_id", "bii"), ("compose_message_id", "iiii"), ("split_message_id", "b")]


@pytest.mark.differential
@settings(max_examples=300, deadline=None)
@given(ints=st.lists(int_st, min_size=4, max_size=4), blobs=st.lists(bytes_st, min_size=2,
       max_size=2), text=st.text(max_size=30), shard=st.sampled_from([1, 2, 3, 64, 65536, 0]))
def test_differential(ints, blobs, text, shard) -> None:
    p, c = PURE["ids"], COMPILED["ids"]
    for name, sig in FNS:
        it, bt = iter(ints), iter(blobs)
        args = [next(it) if k == "i" else next(bt) for k in sig]
        if name in ("mailbox_shard", "user_placement"):
            args[2] = shard
        assert _call(getattr(p, name), *args) == _call(getattr(c, name), *args), name
    assert _call(p.endpoint_scope, text) == _call(c.endpoint_scope, text)
