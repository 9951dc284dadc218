"""The send-policy seam end to end (docs/decisions/0099-send-policy-seam.md; issue 36
item 3): a private stack whose writers and RoomWriter load
QIM_SEND_POLICY=tests.policy.switch:by_switch (tests.policy.policies:by_content, and a
file's verdict for bodies with b"switch"). Through the gateway, for direct, group
and room sends: a refusal is ERROR POLICY_REFUSED with the request's id and the policy's
reason, a hold is ERROR UNAVAILABLE with retry_after_ms; a retried send (same
client_message_id) gets the same verdict, also when the policy would now answer
otherwise (refused then "accepted": still refused; accepted then "refused": the original
ACK), and after the writer is killed (the Amendment: the refusal is kept in the
CommitStore); nothing refused or held reaches a recipient. The Python SDK raises PolicyRefused
at once (no retry loop), tells SendFailed and keeps the body; a held send stays pending
and is retried after the hint until accepted, ahead of the device's later sends."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from qim.errors import ErrorCode
from qim.proto.v1 import message_pb2, room_pb2
from qim.protocol import Opcode
from qim.sdk import PolicyRefused
from qim.sdk import events as ev
from tests.e2e.rawclient import RawClient, call, wait_for_entries
from tests.e2e.roomkit import RawRoomClient, join_all, member, posts, room_id, until
from tests.e2e.test_groups import CONTROL, create, gconv, users
from tests.policy.switchstack import policy_stack_of, switch_file

REFUSED, HELD = ErrorCode.POLICY_REFUSED, ErrorCode.UNAVAILABLE


@pytest.fixture(scope="module")
def policy_switch(tmp_path_factory) -> Path:
    """The file steering tests.policy.switch for sends with b"switch" in the body."""
    return switch_file(tmp_path_factory)


@pytest.fixture(scope="module")
def policy_stack(tmp_path_factory, policy_switch):
    """One gateway, writer, RoomWriter... with the test policy loaded by the writer and
    the RoomWriter: by_content, and the switch's file for bodies with b"switch"
    (tests/policy/switchstack.py)."""
    with policy_stack_of(tmp_path_factory, policy_switch) as st:
        yield st


async def gsend(client: RawClient, group: int, body: bytes, cmid: bytes):
    """A group SEND_MESSAGE with this client_message_id -> (reply opcode, reply)."""
    return await call(client, Opcode.SEND_MESSAGE, message_pb2.SendMessage(
        client_message_id=cmid, conversation_id=gconv(group), message_type=1, body=body))


def refused(reply, opcode: int, reason: str) -> bool:
    """An ERROR of the send policy's refusal for a request of `opcode`."""
    return (reply.code, reply.message, reply.request_opcode) == (REFUSED, reason, opcode)


def held(reply, opcode: int) -> bool:
    """An ERROR of a held send: UNAVAILABLE with the policy's 300 ms hint."""
    return (reply.code, reply.retry_after_ms, reply.request_opcode) == (HELD, 300, opcode)


async def test_direct_and_group_sends_refused_held_and_retried_get_the_same_verdict(policy_stack):
    ua, ub = users(2)
    a, b = await RawClient.login(policy_stack, ua), await RawClient.login(policy_stack, ub)
    try:
        send = Opcode.SEND_MESSAGE
        for body, check in ((b"cheap spam", lambda r: refused(r, send, "spam is not welcome here")),
                            (b"please hold", lambda r: held(r, send)),
                            (b"flip-refused", lambda r: refused(r, send, "refused at first sight"))):
            cmid = os.urandom(16)
            for attempt in range(2):  # the retry: same client_message_id, same answer
                op, reply = await a.send_text(ub, body, cmid=cmid)
                assert op == Opcode.ERROR and check(reply), (body, attempt, reply)
        cmid = os.urandom(16)
        op, first = await a.send_text(ub, b"flip-accepted", cmid=cmid)
        assert op == Opcode.SEND_ACK, first
        op, again = await a.send_text(ub, b"flip-accepted", cmid=cmid)  # the policy now refuses it
        assert op == Opcode.SEND_ACK and (again.message_id, again.conversation_seq) == (
            first.message_id, first.conversation_seq)
        op, ok = await a.send_text(ub, b"hello")
        assert op == Opcode.SEND_ACK and ok.conversation_seq == first.conversation_seq + 1

        group = users(1)[0]
        op, created = await create(a, group, [ua, ub])
        assert op == Opcode.GROUP_OK, created
        for body, check in ((b"group spam", lambda r: refused(r, send, "spam is not welcome here")),
                            (b"hold on", lambda r: held(r, send)),
                            (b"flip-refused", lambda r: refused(r, send, "refused at first sight"))):
            cmid = os.urandom(16)
            for attempt in range(2):
                op, reply = await gsend(a, group, body, cmid)
                assert op == Opcode.ERROR and check(reply), (body, attempt, reply)
        op, gok = await gsend(a, group, b"group hello", os.urandom(16))
        assert op == Opcode.SEND_ACK, gok
        # the recipient was told only what was accepted: the group's notice, two direct messages, one group message
        entries = await wait_for_entries(b, 4)
        bodies = sorted(e.body for e in entries if e.message_type != CONTROL)
        assert bodies == [b"flip-accepted", b"group hello", b"hello"], bodies
    finally:
        await a.close()
        await b.close()


async def test_room_posts_refused_held_and_retried_get_the_same_verdict(policy_stack):
    room = room_id()
    ua, ub = users(2)
    a, b = await RawRoomClient.login(policy_stack, ua), await RawRoomClient.login(policy_stack, ub)
    try:
        await join_all(room, a, b)
        send = Opcode.ROOM_SEND
        for body, check in ((b"room spam", lambda r: refused(r, send, "spam is not welcome here")),
                            (b"hold it", lambda r: held(r, send)),
                            (b"flip-refused", lambda r: refused(r, send, "refused at first sight"))):
            cmid = os.urandom(16)
            for attempt in range(2):
                op, reply = await a.post(room, body, cmid=cmid)
                assert op == Opcode.ERROR and check(reply), (body, attempt, reply)
        cmid = os.urandom(16)
        op, first = await a.post(room, b"flip-accepted", cmid=cmid)
        assert op == Opcode.ROOM_ACK, first
        op, again = await a.post(room, b"flip-accepted", cmid=cmid)
        assert op == Opcode.ROOM_ACK and again.room_seq == first.room_seq
        op, ok = await a.post(room, b"room hello")
        assert op == Opcode.ROOM_ACK and ok.room_seq == first.room_seq + 1

        def posted() -> list[bytes]:
            return [e.body for evs in b.room_events() for e in evs.events if e.kind == room_pb2.RoomEvent.POST]

        for _ in range(50):
            if len(posted()) >= 2:
                break
            await b.drain(0.2)
        assert posted() == [b"flip-accepted", b"room hello"]
    finally:
        await a.close()
        await b.close()


async def test_the_sdk_raises_a_typed_refusal_and_retries_held_sends_in_order(policy_stack, tmp_path):
    ua, ub = users(2)
    a = await member(policy_stack, tmp_path, ua)
    try:
        conv = (await a.open_direct(ub)).conversation_id
        with pytest.raises(PolicyRefused) as info:
            await a.send(conv, b"sdk spam")
        assert info.value.code == REFUSED and info.value.message == "spam is not welcome here"
        failed = a.told.of(ev.SendFailed)
        assert [(f.code, f.message) for f in failed] == [(REFUSED, "spam is not welcome here")]
        assert a.runtime.store.pending_state(failed[0].client_message_id) == "failed"
        ack = await a.send(conv, b"once-held, then fine")  # held once (200 ms), retried, accepted
        assert ack.conversation_seq >= 1
        # a held send keeps the device's order: the send after it commits after it
        held_cmid = await a.send(conv, b"once-held, first", wait=False)
        next_cmid = await a.send(conv, b"sent while the first is held", wait=False)

        def acked() -> dict:
            return {x.client_message_id: x.conversation_seq for e in a.told.of(ev.PendingResolved) for x in e.acks}

        await until(lambda: {held_cmid, next_cmid} <= acked().keys(), what="both sends acknowledged")
        assert acked()[held_cmid] == ack.conversation_seq + 1 and acked()[next_cmid] == ack.conversation_seq + 2
        room = room_id()
        await a.join_room(room)
        with pytest.raises(PolicyRefused):
            await a.send_room(room, "room spam")
        await a.send_room(room, "room hello")
        await until(lambda: posts(a, room) == [b"room hello"], what="the accepted post only")
    finally:
        await a.close()


async def served(request, deadline_s: float = 90.0):
    """`request()` again while the writer is not back (UNAVAILABLE) -> (opcode, reply)."""
    deadline = asyncio.get_running_loop().time() + deadline_s
    while True:
        op, reply = await request()
        if op != Opcode.ERROR or reply.code != HELD or asyncio.get_running_loop().time() > deadline:
            return op, reply
        await asyncio.sleep(0.3)


async def test_a_refusal_outlives_a_writer_kill_and_a_policy_that_changed(policy_stack, policy_switch):
    """Decision 0099, Amendment: the refusal is kept in the CommitStore, so after the
    writer is killed (SIGKILL: its memory is gone) and the policy flips to accept, a
    retried direct or group send (same cmid) is still refused with the first reason;
    the same cmid with other content is CONFLICT; a new cmid is accepted."""
    ua, ub = users(2)
    a, b = await RawClient.login(policy_stack, ua), await RawClient.login(policy_stack, ub)
    send, reason = Opcode.SEND_MESSAGE, "switched off for now"
    try:
        group = users(1)[0]
        op, created = await create(a, group, [ua, ub])
        assert op == Opcode.GROUP_OK, created
        policy_switch.write_text(f"refuse:{reason}")
        dcmid, gcmid = os.urandom(16), os.urandom(16)
        op, reply = await a.send_text(ub, b"switch direct", cmid=dcmid)
        assert op == Opcode.ERROR and refused(reply, send, reason), reply
        op, reply = await gsend(a, group, b"switch group", gcmid)
        assert op == Opcode.ERROR and refused(reply, send, reason), reply
        await asyncio.to_thread(policy_stack.kill_service, "writer")
        policy_switch.write_text("accept")
        await asyncio.to_thread(policy_stack.start_service, "writer")
        await asyncio.to_thread(policy_stack.wait_ready, ["writer"])
        op, reply = await served(lambda: a.send_text(ub, b"switch direct", cmid=dcmid))
        assert op == Opcode.ERROR and refused(reply, send, reason), reply
        op, reply = await served(lambda: gsend(a, group, b"switch group", gcmid))
        assert op == Opcode.ERROR and refused(reply, send, reason), reply
        op, reply = await a.send_text(ub, b"switch otherwise", cmid=dcmid)
        assert op == Opcode.ERROR and reply.code == ErrorCode.CONFLICT, reply
        op, ok = await a.send_text(ub, b"switch direct", cmid=os.urandom(16))  # the policy accepts now
        assert op == Opcode.SEND_ACK, ok
        entries = await wait_for_entries(b, 2)  # the group's notice and the accepted send only
        assert sorted(e.body for e in entries if e.message_type != CONTROL) == [b"switch direct"]
    finally:
        policy_switch.write_text("accept")
        if not policy_stack.alive("writer"):
            await asyncio.to_thread(policy_stack.start_service, "writer")
            await asyncio.to_thread(policy_stack.wait_ready, ["writer"])
        await a.close()
        await b.close()
