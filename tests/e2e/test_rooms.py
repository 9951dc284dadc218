"""Chatrooms end to end on the real stack (docs/protocol.md "Rooms";
docs/decisions/0045-rooms-phase-one-in-process-ring.md): SDK clients join, post and leave; a
reconnect replays what it missed (complete, or truncated once the ring wrapped: the
session stack's rings hold QIM_ROOM_RING_EVENTS=32 events); a retried post is one post;
bad input gets its error; nothing of a room reaches a mailbox, a session list or unread."""

from __future__ import annotations

import os

from qim._core import ids
from qim.consts import MESSAGE_TYPE_CUSTOM
from qim.errors import ErrorCode
from qim.proto.v1 import message_pb2, room_pb2
from qim.protocol import Opcode
from qim.stores.redis.keys import session_epoch_key
from tests.e2e.roomkit import (
    RawRoomClient,
    error_code,
    in_order_once,
    join_all,
    member,
    posts,
    redis_keys_naming,
    room_id,
    told,
    until,
)
from tests.e2e.sdkclient import close_all, server_list
from tests.e2e.test_groups import users
from tests.fixtures import ROOM_RING_EVENTS

RING_EVENTS = ROOM_RING_EVENTS  # the session stack's QIM_ROOM_RING_EVENTS


async def test_join_post_leave_between_sdk_clients_and_no_personal_path_is_touched(stack, tmp_path):
    room = room_id()
    ua, ub = users(2)
    a, b = await member(stack, tmp_path, ua), await member(stack, tmp_path, ub)
    try:
        info_a = await a.join_room(room)
        info_b = await b.join_room(room)
        assert info_b.room_epoch == info_a.room_epoch and info_b.member_count == 2
        ack1 = await a.send_room(room, "大家好")
        ack2 = await b.send_room(room, b"\x00card", message_type=MESSAGE_TYPE_CUSTOM, custom_type=b"demo.card")
        assert ack2.room_seq == ack1.room_seq + 1 and ack1.room_epoch == info_a.room_epoch
        for c in (a, b):
            await until(lambda c=c: posts(c, room) == ["大家好".encode(), b"\x00card"], what="both posts")
        custom = [m for e in told(a, room) for m in e.events if m.kind == "post"][1]
        assert (custom.sender_id, custom.message_type, custom.custom_type) == (ub, MESSAGE_TYPE_CUSTOM, b"demo.card")
        # a saw b join (a small room broadcasts membership), then sees b leave
        await until(lambda: any(m.kind == "joined" and m.sender_id == ub for e in told(a, room) for m in e.events))
        assert await b.leave_room(room) == 1
        await until(lambda: any(m.kind == "left" and m.sender_id == ub for e in told(a, room) for m in e.events),
                    what="the LEFT event")
        for c in (a, b):
            in_order_once(c, room)
        # rooms never touch the personal paths: no mailbox entry, no list entry, no unread
        conv = ids.conversation_id_room(0, room)
        for c in (a, b):
            assert await server_list(c) == {}
            assert await c.conversations() == []
            assert await c.conversation(conv) is None
        # (a login's session_epoch counter belongs to the device's login, not to a path)
        login = session_epoch_key(0, 0, 0).rsplit(":", 3)[0] + ":"
        touched = redis_keys_naming(stack, conv.hex(), f":{ua}:", f":{ub}:", f":{ua}", f":{ub}")
        assert [k for k in touched if not k.startswith(login)] == []
    finally:
        await close_all(a, b)


async def test_replay_after_a_reconnect_is_complete_then_truncated_once_the_ring_wrapped(stack, tmp_path):
    room = room_id()
    ua, ub = users(2)
    a, b = await member(stack, tmp_path, ua), await member(stack, tmp_path, ub)
    try:
        await a.join_room(room)
        await b.join_room(room)
        await a.send_room(room, "before")
        await until(lambda: posts(b, room) == [b"before"], what="the first post")
        await b.runtime.close()  # b offline (its rooms are kept in memory)
        for i in range(3):
            await a.send_room(room, f"missed {i}")
        await b.runtime.connect()  # the reconnect joins again from b's position
        await until(lambda: posts(b, room) == [b"before", b"missed 0", b"missed 1", b"missed 2"], what="replay")
        info = b.rooms.info(room)
        assert info is not None and info.recovered and not info.truncated
        assert not any(e.truncated for e in told(b, room))

        await b.runtime.close()
        wrapped = [f"wrapped {i}".encode() for i in range(RING_EVENTS + 8)]
        for body in wrapped:
            await a.send_room(room, body)
        await b.runtime.connect()
        await until(lambda: posts(b, room)[-1:] == [wrapped[-1]], what="the replay of the wrapped ring")
        info = b.rooms.info(room)
        assert info is not None and info.truncated and not info.recovered
        cut = [e for e in told(b, room) if e.truncated]
        assert len(cut) == 1 and cut[0].first_seq == info.first_seq and cut[0].first_seq > 0
        got = posts(b, room)[4:]
        assert got == wrapped[-len(got):] and 0 < len(got) <= RING_EVENTS  # the newest, in order, the rest gone
        in_order_once(b, room)
    finally:
        await close_all(a, b)


async def test_a_retried_post_is_one_post_and_other_content_is_conflict(stack):
    room = room_id()
    ua, ub = users(2)
    a, b = await RawRoomClient.login(stack, ua), await RawRoomClient.login(stack, ub)
    try:
        await join_all(room, a, b)
        cmid = os.urandom(16)
        op, first = await a.post(room, b"once", cmid)
        op2, again = await a.post(room, b"once", cmid)
        assert op == op2 == Opcode.ROOM_ACK and again == first
        op, conflict = await a.post(room, b"other", cmid)
        assert op == Opcode.ERROR and error_code(conflict) == ErrorCode.CONFLICT
        op, after = await a.post(room, b"next")
        assert after.room_seq == first.room_seq + 1  # the retry took no seq
        await b.drain()
        bodies = [e.body for f in b.room_events() for e in f.events if e.kind == room_pb2.RoomEvent.POST]
        assert bodies == [b"once", b"next"]
    finally:
        await a.close()
        await b.close()


async def test_bad_room_input_gets_its_error(stack):
    room = room_id()
    (ua,) = users(1)
    c = await RawRoomClient.login(stack, ua)
    try:
        for bad in (0, 1 << 63, (1 << 64) - 1):
            op, err = await c.join(bad)
            assert op == Opcode.ERROR and error_code(err) == ErrorCode.INVALID_ARGUMENT, bad
        op, err = await c.post(room, b"not joined")
        assert op == Opcode.ERROR and error_code(err) == ErrorCode.FORBIDDEN
        op, err = await c.join(room, since=(0, 5))
        assert op == Opcode.ERROR and error_code(err) == ErrorCode.INVALID_ARGUMENT
        op, joined = await c.join(room)
        assert op == Opcode.ROOM_JOINED
        op, _ = await c.post(room, b"held")
        op, old = await c.join(room, since=(joined.room_epoch + 12345, 3))  # an epoch the room no longer has
        assert op == Opcode.ROOM_JOINED and old.truncated and not old.recovered
        assert [e.body for e in old.events if e.kind == room_pb2.RoomEvent.POST] == [b"held"]  # the whole ring
        op, err = await c.join(room, since=(joined.room_epoch, old.room_seq + 10))
        assert op == Opcode.ERROR and error_code(err) == ErrorCode.INVALID_ARGUMENT
        for kw, code in (({"message_type": 4}, ErrorCode.INVALID_ARGUMENT),
                         ({"message_type": 0}, ErrorCode.INVALID_ARGUMENT),
                         ({"custom_type": b"t" * 65}, ErrorCode.PAYLOAD_TOO_LARGE)):
            op, err = await c.post(room, b"x", **kw)
            assert op == Opcode.ERROR and error_code(err) == code, kw
        op, err = await c.post(room, b"x" * (1024 * 1024 + 1))
        assert op == Opcode.ERROR and error_code(err) == ErrorCode.PAYLOAD_TOO_LARGE
        # a room is never a SEND_MESSAGE conversation
        send = message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=ids.conversation_id_room(0, room),
                                       message_type=1, body=b"x")
        op, err = await c.request(Opcode.SEND_MESSAGE, send.SerializeToString())
        assert op == Opcode.ERROR and err.code == ErrorCode.INVALID_ARGUMENT
    finally:
        await c.close()
