"""The before-send moderation webhook end to end (issue 38; docs/decisions/0114): a
private stack whose writer and RoomWriter load QIM_SEND_POLICY=qim.policy.webhook:policy,
asking a real HTTPS webhook on loopback (tests/policy/hookserver.py, certificate of a
development CA given as QIM_MODERATION_WEBHOOK_CA_FILE) with
QIM_WEBHOOK_FAIL_POLICY=direct=open,group=closed,room=open.

Through the gateway: 403 is POLICY_REFUSED with the webhook's reason (the SDK raises
PolicyRefused); a masking answer is refused (not built); 500, garbage, a broken
connection and a hang past the timeout are "no answer": direct sends are accepted (open),
group sends refused with "moderation unavailable" (closed), room posts accepted (open);
a retried send (same client_message_id) gets the same verdict without a second webhook
request, also after the writer is SIGKILLed and restarted; recipients get only what
was accepted."""

from __future__ import annotations

import asyncio
import os

import pytest

from qim.errors import ErrorCode
from qim.policy.webhook import FAIL_CLOSED_REASON, MASK_REASON
from qim.proto.v1 import room_pb2
from qim.protocol import Opcode
from qim.sdk import PolicyRefused
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.e2e.roomkit import RawRoomClient, join_all, member, room_id
from tests.e2e.test_groups import CONTROL, create, users
from tests.e2e.test_send_policy import gsend, served
from tests.fixtures import running_stack
from tests.policy.hookserver import REFUSAL, SECRET, HookServer
from tests.policy.switchstack import ROOT

SEND = Opcode.SEND_MESSAGE


@pytest.fixture(scope="module")
def hook(tmp_path_factory):
    """The webhook the stack asks."""
    server = HookServer(tmp_path_factory.mktemp("hookpki")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hook_stack(tmp_path_factory, hook):
    """A stack moderated by `hook` (module doc)."""
    env = {"QIM_SEND_POLICY": "qim.policy.webhook:policy", "QIM_MODERATION_WEBHOOK_URL": hook.url,
           "QIM_MODERATION_WEBHOOK_SECRET": SECRET, "QIM_MODERATION_WEBHOOK_CA_FILE": hook.ca_file,
           "QIM_MODERATION_SYNC_TIMEOUT_MS": "900", "QIM_MODERATION_BREAKER_FAILURES": "1000",
           "QIM_WEBHOOK_FAIL_POLICY": "direct=open,group=closed,room=open", "PYTHONPATH": str(ROOT)}
    with running_stack(tmp_path_factory.mktemp("moderated"), extra_env=env) as st:
        yield st


def refused(op: int, reply, reason: str) -> bool:
    """An ERROR POLICY_REFUSED of a SEND_MESSAGE with `reason`."""
    return op == Opcode.ERROR and (reply.code, reply.message, reply.request_opcode) == (
        ErrorCode.POLICY_REFUSED, reason, SEND)


async def test_verdicts_fail_policy_per_kind_and_retries_across_a_writer_kill(hook_stack, hook):
    ua, ub = users(2)
    a, b = await RawClient.login(hook_stack, ua), await RawClient.login(hook_stack, ub)
    try:
        group = users(1)[0]
        op, created = await create(a, group, [ua, ub])
        assert op == Opcode.GROUP_OK, created
        direct = {text: os.urandom(16) for text in (b"hello", b"please refuse", b"mask me", b"boom", b"garbage",
                                                     b"broken", b"hang")}
        gcmids = {text: os.urandom(16) for text in (b"group hello", b"group refuse", b"group boom", b"group hang")}

        async def check_all() -> dict:
            acks = {}
            for text, cmid in direct.items():
                op, reply = await served(lambda text=text, cmid=cmid: a.send_text(ub, text, cmid=cmid))
                if text == b"please refuse":
                    assert refused(op, reply, REFUSAL), reply
                elif text == b"mask me":
                    assert refused(op, reply, MASK_REASON), reply
                else:  # accepted, or no answer under fail open
                    assert op == Opcode.SEND_ACK, (text, reply)
                    acks[text] = (reply.message_id, reply.conversation_seq)
            for text, cmid in gcmids.items():
                op, reply = await served(lambda text=text, cmid=cmid: gsend(a, group, text, cmid))
                if text == b"group hello":
                    assert op == Opcode.SEND_ACK, reply
                    acks[text] = (reply.message_id, reply.conversation_seq)
                else:
                    assert refused(op, reply, REFUSAL if b"refuse" in text else FAIL_CLOSED_REASON), (text, reply)
            return acks

        first = await check_all()
        again = await check_all()  # every send retried: same verdict, same ACK
        assert again == first
        await asyncio.to_thread(hook_stack.kill_service, "writer")
        await asyncio.to_thread(hook_stack.start_service, "writer")
        await asyncio.to_thread(hook_stack.wait_ready, ["writer"])
        assert await check_all() == first  # and after a writer SIGKILL
        # one webhook request per send, whatever its outcome, across the retries and the kill
        assert {hook.calls_for(c) for c in (*direct.values(), *gcmids.values())} == {1}
        entries = await wait_for_entries(b, 7)  # the group's notice, five direct sends, one group send
        bodies = sorted(e.body for e in entries if e.message_type != CONTROL)
        assert bodies == sorted([b"hello", b"boom", b"garbage", b"broken", b"hang", b"group hello"]), bodies
    finally:
        if not hook_stack.alive("writer"):
            await asyncio.to_thread(hook_stack.start_service, "writer")
            await asyncio.to_thread(hook_stack.wait_ready, ["writer"])
        await a.close()
        await b.close()


async def test_room_posts_and_the_sdk(hook_stack, hook, tmp_path):
    room = room_id()
    ua, ub = users(2)
    a, b = await RawRoomClient.login(hook_stack, ua), await RawRoomClient.login(hook_stack, ub)
    try:
        await join_all(room, a, b)
        op, reply = await a.post(room, b"room refuse")
        assert op == Opcode.ERROR and (reply.code, reply.message) == (ErrorCode.POLICY_REFUSED, REFUSAL), reply
        for body in (b"room hello", b"room boom", b"room hang"):  # no answer: fail open for rooms
            op, reply = await a.post(room, body)
            assert op == Opcode.ROOM_ACK, (body, reply)

        def posted() -> list[bytes]:
            return [e.body for evs in b.room_events() for e in evs.events if e.kind == room_pb2.RoomEvent.POST]

        for _ in range(50):
            if len(posted()) >= 3:
                break
            await b.drain(0.2)
        assert posted() == [b"room hello", b"room boom", b"room hang"]
    finally:
        await a.close()
        await b.close()
    sdk = await member(hook_stack, tmp_path, users(1)[0])
    try:
        conv = (await sdk.open_direct(ub)).conversation_id
        with pytest.raises(PolicyRefused) as info:
            await sdk.send(conv, b"sdk refuse")
        assert info.value.message == REFUSAL
        with pytest.raises(PolicyRefused) as masked:
            await sdk.send(conv, b"sdk mask")
        assert masked.value.message == MASK_REASON
        assert (await sdk.send(conv, b"sdk boom")).conversation_seq >= 1  # fail open for direct
    finally:
        await sdk.close()
