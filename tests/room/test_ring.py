"""The replay ring (qim/services/room/ring.py): bounded by count and bytes, contiguous
seqs, the newest always kept, entries concatenate into a valid RoomJoined."""

from __future__ import annotations

import pytest

from qim.proto.v1 import room_pb2
from qim.services.room.ring import Entry, Ring, varint


def entry(seq: int, size: int = 10) -> Entry:
    event = room_pb2.RoomEvent(room_seq=seq, kind=room_pb2.RoomEvent.POST, sender_id=7, body=b"x" * size)
    return Entry.of(seq, event.SerializeToString(), 7, room_pb2.RoomEvent.POST)


def test_varint_matches_protobuf():
    for n in (0, 1, 127, 128, 300, 2**32, 2**63 - 1):
        # a uint64 field 1 is tag 0x08 then the varint
        assert room_pb2.RoomPosition(room_epoch=n).SerializeToString() == (b"\x08" + varint(n) if n else b"")


def test_count_bound_keeps_the_newest_contiguous():
    ring = Ring(max_events=3, max_bytes=1 << 20)
    evicted = [ring.append(entry(s)) for s in range(1, 6)]
    assert evicted == [0, 0, 0, 1, 1] and ring.evicted == 2
    assert (ring.first_seq, ring.last_seq, len(ring)) == (3, 5, 3)
    assert [e.seq for e in ring.after(0)] == [3, 4, 5]
    assert [e.seq for e in ring.after(3)] == [4, 5] and list(ring.after(5)) == []
    assert [e.seq for e in ring.newest(2)] == [4, 5] and [e.seq for e in ring.newest(10)] == [3, 4, 5]
    assert ring.get(2) is None and ring.get(4).seq == 4 and ring.get(6) is None


def test_byte_bound_and_the_newest_always_stays():
    one = len(entry(1, 100).wire)
    ring = Ring(max_events=100, max_bytes=one * 2)
    for s in range(1, 4):
        ring.append(entry(s, 100))
    assert [e.seq for e in ring.after(0)] == [2, 3] and ring.bytes == 2 * one
    ring.append(entry(4, 10_000))  # alone over the bound: kept, everything older goes
    assert [e.seq for e in ring.after(0)] == [4] and ring.bytes == len(entry(4, 10_000).wire)


def test_out_of_order_seq_is_refused():
    ring = Ring(4, 1 << 20)
    ring.append(entry(5))
    with pytest.raises(ValueError):
        ring.append(entry(7))


def test_entries_concatenate_into_a_room_joined_and_replace_keeps_bytes_exact():
    ring = Ring(10, 1 << 20)
    for s in range(1, 4):
        ring.append(entry(s))
    joined = room_pb2.RoomJoined.FromString(b"".join(e.wire for e in ring.after(0))
                                            + room_pb2.RoomJoined(room_id=9, room_epoch=5).SerializeToString())
    assert [e.room_seq for e in joined.events] == [1, 2, 3] and joined.room_id == 9 and joined.room_epoch == 5
    before = ring.bytes
    ring.replace(entry(2, 0))
    assert ring.bytes == before - len(entry(2).wire) + len(entry(2, 0).wire) and room_pb2.RoomEvent.FromString(ring.get(2).event).body == b""
