"""One room's rules at the RoomWriter (qim/services/room/room.py), pure logic: room_seq,
replay outcomes, join/leave events up to 500 members, idempotent posts, recall, and one
push per gateway link per flush whatever the member count."""

from __future__ import annotations

import pytest

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import internal_pb2, room_pb2
from qim.services.room.room import Room
from qim.wire.room import send_identity

POST, RECALL, JOINED, LEFT = (room_pb2.RoomEvent.POST, room_pb2.RoomEvent.RECALL, room_pb2.RoomEvent.JOINED,
                              room_pb2.RoomEvent.LEFT)


class FakeLink:
    def __init__(self, link_id: int) -> None:
        self.link_id = link_id
        self.frames: list[room_pb2.RoomEvents] = []

    def push(self, room, frame: bytes) -> None:
        self.frames.append(room_pb2.RoomEvents.FromString(internal_pb2.RoomPush.FromString(frame).events))

    def seqs(self) -> list[int]:
        return [e.room_seq for f in self.frames for e in f.events]


def make(ring_events: int = 100, epoch: int = 5 << 32 | 1) -> Room:
    return Room(0, 42, epoch, ring_events, 1 << 20, dirty=lambda r: None, clock=lambda: 1000)


def join(room: Room, link, conn: int, user: int, since=None, recent: int = 0) -> room_pb2.RoomJoined:
    req = room_pb2.JoinRoom(room_id=42, recent=recent)
    if since is not None:
        req.since.room_epoch, req.since.room_seq = since
    body, _ = room.join(link, conn, user, "", req)
    return room_pb2.RoomJoined.FromString(body)


def post(room: Room, link, conn: int, user: int, body: bytes, cmid: bytes = b"") -> room_pb2.RoomAck:
    req = room_pb2.RoomSend(room_id=42, client_message_id=cmid or body.ljust(16, b"."), message_type=1, body=body)
    ack, _ = room.post(link.link_id, conn, user, "", req, send_identity(req))
    return room_pb2.RoomAck.FromString(ack)


def test_seq_is_contiguous_and_posts_push_once_per_link():
    room, g1, g2 = make(), FakeLink(1), FakeLink(2)
    for conn, (link, user) in enumerate([(g1, 10), (g1, 11), (g2, 12)], start=1):
        join(room, link, conn, user)
    acks = [post(room, g1, 1, 10, b"m%d" % i) for i in range(3)]
    assert [a.room_seq for a in acks] == [4, 5, 6] and {a.room_epoch for a in acks} == {room.epoch}
    g1.frames.clear()
    g2.frames.clear()
    room.flush()
    assert len(g1.frames) == 1 and len(g2.frames) == 1  # one frame per gateway, not per member
    # the last JOINED (3) waited for this flush too: it follows the joiner's snapshot
    assert g1.seqs() == g2.seqs() == [3, 4, 5, 6] and g1.frames[0].member_count == 3


def test_replay_recovered_truncated_and_fresh():
    room, g = make(ring_events=4), FakeLink(1)
    join(room, g, 1, 10)  # JOINED = seq 1
    for i in range(5):
        post(room, g, 1, 10, b"p%d" % i)  # seqs 2..6; ring holds 3..6
    ok = join(room, g, 2, 11, since=(room.epoch, 4))
    assert ok.recovered and not ok.truncated and [e.room_seq for e in ok.events] == [5, 6] and ok.room_seq == 6
    wrapped = join(room, g, 3, 12, since=(room.epoch, 1))
    assert wrapped.truncated and not wrapped.recovered and wrapped.first_seq == 4  # 2 JOINED events since
    assert [e.room_seq for e in wrapped.events] == [4, 5, 6, 7]  # its own JOINED (8) comes live
    other = join(room, g, 4, 13, since=(room.epoch + 1, 3))
    assert other.truncated and [e.room_seq for e in other.events][0] == other.first_seq
    fresh = join(room, g, 5, 14, recent=2)
    assert not fresh.recovered and not fresh.truncated and [e.room_seq for e in fresh.events] == [8, 9]
    current = join(room, g, 1, 10, since=(room.epoch, room.seq))  # a re-join at the head: nothing, recovered
    assert current.recovered and list(current.events) == []
    with pytest.raises(RequestError) as ahead:
        join(room, g, 6, 15, since=(room.epoch, room.seq + 1))
    assert ahead.value.code == ErrorCode.INVALID_ARGUMENT


def test_membership_events_only_up_to_500_members_and_counts_above():
    room, g = make(ring_events=10_000), FakeLink(1)
    for user in range(1, 502):
        join(room, g, user, user)
    kinds = [room_pb2.RoomEvent.FromString(e.event).kind for e in room.ring.after(0)]
    assert kinds.count(JOINED) == 500 and room.member_count == 501 and room.seq == 500
    room.leave(1, 501)  # 501 -> 500: leaving a room above the bound says nothing
    room.leave(1, 500)  # 500 -> 499: said
    assert room.seq == 501 and room_pb2.RoomEvent.FromString(room.ring.get(501).event).kind == LEFT
    join(room, g, 1000, 7)  # a second connection of user 7: one member, no event
    assert room.member_count == 499 and room.seq == 501


def test_idempotent_retry_conflict_forbidden_and_recall():
    room, g = make(), FakeLink(1)
    join(room, g, 1, 10)
    join(room, g, 2, 11)
    first = post(room, g, 1, 10, b"hello", cmid=b"c" * 16)
    again = post(room, g, 1, 10, b"hello", cmid=b"c" * 16)
    assert again == first and room.seq == first.room_seq  # nothing posted twice
    with pytest.raises(RequestError) as conflict:
        post(room, g, 1, 10, b"other", cmid=b"c" * 16)
    assert conflict.value.code == ErrorCode.CONFLICT
    with pytest.raises(RequestError) as outsider:
        post(room, g, 9, 99, b"not joined")
    assert outsider.value.code == ErrorCode.FORBIDDEN

    def recall(conn: int, user: int, seq: int, cmid: bytes) -> room_pb2.RoomAck:
        req = room_pb2.RoomSend(room_id=42, client_message_id=cmid)
        req.recall.room_epoch, req.recall.room_seq = room.epoch, seq
        ack, _ = room.post(1, conn, user, "", req, send_identity(req))
        return room_pb2.RoomAck.FromString(ack)

    with pytest.raises(RequestError) as other:
        recall(2, 11, first.room_seq, b"r" * 16)
    assert other.value.code == ErrorCode.FORBIDDEN
    done = recall(1, 10, first.room_seq, b"s" * 16)
    event = room_pb2.RoomEvent.FromString(room.ring.get(done.room_seq).event)
    assert event.kind == RECALL and event.recalled_seq == first.room_seq
    replayed = room_pb2.RoomEvent.FromString(room.ring.get(first.room_seq).event)
    assert replayed.recalled and replayed.body == b"" and replayed.client_message_id == b"c" * 16
    with pytest.raises(RequestError) as gone:
        recall(1, 10, 999, b"t" * 16)
    assert gone.value.code == ErrorCode.NOT_FOUND


def test_a_closed_link_takes_its_members_and_the_link_stops_getting_frames():
    room, g1, g2 = make(), FakeLink(1), FakeLink(2)
    join(room, g1, 1, 10)
    join(room, g2, 1, 11)
    assert room.drop_link(1) == 1 and set(room.links) == {2} and room.member_count == 1
    g1.frames.clear()
    post(room, g2, 1, 11, b"after")
    room.flush()
    assert g1.frames == [] and g2.seqs()[-1] == room.seq
    room.drop_link(2)
    assert room.idle_since is not None and room.links == {}
