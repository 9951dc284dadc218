"""Bodies and threshold sizes of the load generator (qim/cli/bodies.py)."""

from __future__ import annotations

import random

from qim.cli.bodies import (
    BLOB_CUSTOM_TYPE,
    BLOB_MESSAGE_TYPE,
    OVER_LIMIT,
    body_bytes,
    chunk_edges,
    deal,
    inline_limit,
    plan_blobs,
    threshold_sizes,
)
from qim.consts import MAX_MESSAGE_BODY, STREAM_WRITE_CHUNK_BYTES
from qim.proto.v1 import message_pb2
from qim.services.writer.committer import inline_decision


def test_bodies_are_deterministic_distinct_and_never_zero():
    assert body_bytes(b"s", 100) == body_bytes(b"s", 100)
    assert body_bytes(b"s", 100) != body_bytes(b"t", 100)
    assert len(body_bytes(b"s", MAX_MESSAGE_BODY)) == MAX_MESSAGE_BODY
    for i in range(600):  # one-byte bodies: a raw SHAKE output would be zero about twice here
        assert body_bytes(i.to_bytes(2, "big"), 1) != b"\x00"


def test_inline_edges_match_the_writers_decision():
    for audience in (1, 2, 3, 20):
        edge = inline_limit(audience)
        assert inline_decision(audience, edge) and not inline_decision(audience, edge + 1)
    assert (inline_limit(2), inline_limit(3), inline_limit(20)) == (4096, 2730, 409)


def test_threshold_sizes_cover_every_edge():
    direct = threshold_sizes(2)
    for s in (4095, 4096, 4097, 8191, 8192, 8193, 65535, 65536, 65537, 1048575, 1048576, 7935, 7936, 7937):
        assert s in direct
    assert {2729, 2730, 2731} <= set(threshold_sizes(3)) and {408, 409, 410} <= set(threshold_sizes(20))
    assert OVER_LIMIT not in direct and max(direct) == MAX_MESSAGE_BODY
    assert len(direct) == len(set(direct))


def test_chunk_edges_make_a_send_of_exactly_one_chunk():
    plain, prev, _batch = chunk_edges()

    def size(n: int, previous: bytes) -> int:
        return message_pb2.SendMessage(client_message_id=b"\x01" * 16, conversation_id=b"\x02" * 16,
                                       recipient_user_id=(1 << 62) + 9, message_type=BLOB_MESSAGE_TYPE,
                                       custom_type=BLOB_CUSTOM_TYPE, body=b"\x00" * n,
                                       previous_client_message_id=previous).ByteSize()

    assert size(plain, b"") == STREAM_WRITE_CHUNK_BYTES and size(prev, b"\x03" * 16) == STREAM_WRITE_CHUNK_BYTES


def test_plan_places_every_threshold_and_a_bounded_mix():
    rng = random.Random(1)
    blobs = plan_blobs(100, [4096, 4097], 0.05, rng)
    sizes = [b.size for b in blobs]
    assert sizes.count(4096) >= 1 and sizes.count(4097) >= 1
    mix = sizes.copy()
    mix.remove(4096), mix.remove(4097)
    assert mix and all(4097 <= s <= MAX_MESSAGE_BODY for s in mix)
    assert [b.position for b in blobs] == sorted(b.position for b in blobs)
    assert all(0 <= b.position <= 100 for b in blobs)
    assert plan_blobs(100, [], 0.0, rng) == []


def test_deal_gives_every_size_to_the_first_slots():
    sizes = list(range(10))
    assert deal(sizes, 8, 3) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9], [], [], [], []]
    assert deal(sizes, 2, 3) == [list(range(5)), list(range(5, 10))]
    assert deal(sizes, 0, 3) == []
