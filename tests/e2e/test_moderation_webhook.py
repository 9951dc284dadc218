"""The before-send moderation webhook end to end (issue 38; docs/decisions/0114): a
private stack whose writer and RoomWriter load QIM_SEND_POLICY=qim.policy.webhook:policy,
asking a real HTTPS webhook on loopback (tests/policy/hookserver.py, certificate of a
development CA given as QIM_MODERATION_WEBHOOK_CA_FILE) with
QIM_WEBHOOK_FAIL_POLICY=direct=open,group=closed,room=open.

Through the gateway: 403 is POLICY_REFUSED with the webhook's reason (the SDK raises
PolicyRefused); a masking answer commits the masked body (decision 0126: SEND_ACK,
ROOM_ACK and EDIT_OK say `replaced` with the committed body, recipients and history have
only it, the SDK's row too); 500, garbage, a broken
connection and a hang past the timeout are "no answer": direct sends are accepted (open),
group sends held with "moderation unavailable" (closed: UNAVAILABLE, retryable, decision 0133),
room posts accepted (open);
a retried send (same client_message_id) gets the same verdict without a second webhook
request, also after the writer is SIGKILLed and restarted; recipients get only what
was accepted. The request names the reply target and the mentions."""

from __future__ import annotations

import asyncio
import os

import pytest

from qim.consts import MESSAGE_TYPE_CONTROL
from qim.errors import ErrorCode
from qim.policy.webhook import FAIL_CLOSED_REASON, FAIL_CLOSED_RETRY_MS
from qim.proto.v1 import room_pb2
from qim.protocol import Opcode
from qim.sdk import PolicyRefused
from qim.sdk import events as ev
from qim.sdk.requests import pull_history
from qim.wire.control import control_event
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.e2e.roomkit import RawRoomClient, join_all, member, room_id
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_groups import CONTROL, create, users
from tests.e2e.test_send_policy import gsend, served
from tests.fixtures import running_stack
from tests.moderation.test_mute import ctl
from tests.policy.hookserver import REFUSAL, SECRET, HookServer
from tests.policy.switchstack import ROOT
from tests.sdk.realstack import eventually

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


def held(op: int, reply) -> bool:
    """An ERROR UNAVAILABLE "moderation unavailable" with the webhook's retry hint (decision 0133)."""
    return op == Opcode.ERROR and (reply.code, reply.message, reply.retry_after_ms, reply.request_opcode) == (
        ErrorCode.UNAVAILABLE, FAIL_CLOSED_REASON, FAIL_CLOSED_RETRY_MS, SEND)


async def answered(request, deadline_s: float = 90.0):
    """`served`, but a held send (no webhook answer under fail closed) is an answer: only
    an UNAVAILABLE of a writer not back yet is asked again."""
    deadline = asyncio.get_running_loop().time() + deadline_s
    while True:
        op, reply = await request()
        if op != Opcode.ERROR or reply.code != ErrorCode.UNAVAILABLE or reply.message == FAIL_CLOSED_REASON \
                or asyncio.get_running_loop().time() > deadline:
            return op, reply
        await asyncio.sleep(0.3)


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
        gcmids = {text: os.urandom(16) for text in (b"group hello", b"group mask it", b"group refuse", b"group boom",
                                                     b"group hang")}

        async def check_all() -> dict:
            acks = {}
            for text, cmid in direct.items():
                op, reply = await served(lambda text=text, cmid=cmid: a.send_text(ub, text, cmid=cmid))
                if text == b"please refuse":
                    assert refused(op, reply, REFUSAL), reply
                else:  # accepted (masked: replaced), or no answer under fail open
                    assert op == Opcode.SEND_ACK, (text, reply)
                    acks[text] = (reply.message_id, reply.conversation_seq, reply.replaced, reply.body)
            for text, cmid in gcmids.items():
                op, reply = await answered(lambda text=text, cmid=cmid: gsend(a, group, text, cmid))
                if text in (b"group hello", b"group mask it"):
                    assert op == Opcode.SEND_ACK, reply
                    acks[text] = (reply.message_id, reply.conversation_seq, reply.replaced, reply.body)
                elif b"refuse" in text:
                    assert refused(op, reply, REFUSAL), (text, reply)
                else:  # no answer under fail closed: held, retryable (decision 0133), never refused
                    assert held(op, reply), (text, reply)
            return acks

        first = await check_all()
        # a masked send is committed with the webhook's body, and the sender is told
        assert first[b"mask me"][2:] == (True, b"**** me") and first[b"group mask it"][2:] == (True, b"group **** it")
        assert first[b"hello"][2:] == (False, b"")
        again = await check_all()  # every send retried: same verdict, same ACK
        assert again == first
        await asyncio.to_thread(hook_stack.kill_service, "writer")
        await asyncio.to_thread(hook_stack.start_service, "writer")
        await asyncio.to_thread(hook_stack.wait_ready, ["writer"])
        assert await check_all() == first  # and after a writer SIGKILL
        # one webhook request per answered send, whatever its answer, across the retries and
        # the kill; a held send (no answer) is asked again at each retry
        answered_once = [*direct.values(), *(c for t, c in gcmids.items() if t not in (b"group boom", b"group hang"))]
        assert {hook.calls_for(c) for c in answered_once} == {1}
        assert all(hook.calls_for(gcmids[t]) >= 3 for t in (b"group boom", b"group hang"))
        entries = await wait_for_entries(b, 9)  # the group's notice, six direct sends, two group sends
        bodies = sorted(e.body for e in entries if e.message_type != CONTROL)
        assert bodies == sorted([b"hello", b"**** me", b"boom", b"garbage", b"broken", b"hang", b"group hello",
                                 b"group **** it"]), bodies
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
            assert op == Opcode.ROOM_ACK and not reply.replaced, (body, reply)
        op, reply = await a.post(room, b"room mask")
        assert op == Opcode.ROOM_ACK and (reply.replaced, reply.body) == (True, b"room ****"), reply

        def posted() -> list[bytes]:
            return [e.body for evs in b.room_events() for e in evs.events if e.kind == room_pb2.RoomEvent.POST]

        for _ in range(50):
            if len(posted()) >= 4:
                break
            await b.drain(0.2)
        assert posted() == [b"room hello", b"room boom", b"room hang", b"room ****"]
    finally:
        await a.close()
        await b.close()
    sdk = await member(hook_stack, tmp_path, users(1)[0])
    try:
        conv = (await sdk.open_direct(ub)).conversation_id
        with pytest.raises(PolicyRefused) as info:
            await sdk.send(conv, b"sdk refuse")
        assert info.value.message == REFUSAL
        masked = await sdk.send(conv, b"sdk mask")
        assert (masked.replaced, masked.body) == (True, b"sdk ****")
        assert (await sdk.send(conv, b"sdk boom")).conversation_seq >= 1  # fail open for direct
    finally:
        await sdk.close()


async def test_a_masked_group_send_and_edits_seen_masked_by_sender_recipient_and_history(hook_stack, hook, tmp_path):
    ua, ub = users(2)
    ca, cb = await client(hook_stack, tmp_path, ua), await client(hook_stack, tmp_path, ub)
    try:
        for c in (ca, cb):
            await c.connect()
        conv = (await ca.create_group([ub])).conversation_id
        first = await ca.send_text(conv, "plain words")
        ack = await ca.send(conv, b"a mask here", reply_to=first.message_id, mentions=[ub])
        assert (ack.replaced, ack.body) == (True, b"a **** here")
        # the webhook was asked with the reply target and the mentions (decision 0120's fields)
        asked = next(r for r in hook.requests if r["client_message_id"] == ack.client_message_id.hex())
        assert (asked["reply_to_message_id"], asked["mentions"], asked["edit_of"]) == (
            first.message_id.hex(), {"user_ids": [str(ub)], "all": False}, None)

        async def body_of(c, message_id: bytes) -> bytes | None:
            rows = await c.store.run(c.store.messages, conv)
            return next((m.body for m in rows if m.message_id == message_id), None)

        for c in (ca, cb):  # the sender's store and the recipient's: only the masked body
            await eventually(lambda c=c: _is(body_of(c, ack.message_id), b"a **** here"), timeout=60,
                             what="the masked body stored")
        edited = await ca.edit(conv, first.message_id, "edit mask it")
        assert (edited.replaced, edited.body, edited.version) == (True, b"edit **** it", 1)
        with pytest.raises(PolicyRefused) as info:
            await ca.edit(conv, first.message_id, "edit refuse")
        assert info.value.message == REFUSAL
        plain = await ca.edit(conv, first.message_id, "edit plainly")
        assert (plain.replaced, plain.body, plain.version) == (False, None, 2)
        for c in (ca, cb):
            await eventually(lambda c=c: _is(body_of(c, first.message_id), b"edit plainly"), timeout=60,
                             what="the last edit stored")
        edit_cmids = {r["client_message_id"] for r in hook.requests if r["edit_of"] == first.message_id.hex()}
        assert len(edit_cmids) == 3  # every edit was asked, with the edited message named
        batch = await pull_history(cb.runtime, conv, 0, anchor_seq=0, newer=True, limit=50)
        bodies = {i.message_id: i.body for i in batch.items if i.message_type != MESSAGE_TYPE_CONTROL}
        assert bodies[ack.message_id] == b"a **** here" and bodies[first.message_id] == b"edit plainly"
        notices = [control_event(i.body).edit.body for i in batch.items if i.message_type == MESSAGE_TYPE_CONTROL
                   and control_event(i.body).WhichOneof("event") == "edit"]
        assert notices == [b"edit **** it", b"edit plainly"]  # the refused edit left no version
        assert not any(b"mask" in i.body for i in batch.items), "an unmasked body reached history"
    finally:
        await close_all(ca, cb)


async def _is(got, want: bytes) -> bool:
    return await got == want


async def test_fail_closed_holds_a_send_until_the_webhook_answers_then_commits_it_once(hook_stack, hook, tmp_path):
    """Decision 0133: the receiver down (500) under fail closed keeps the SDK's group send
    pending (retried, asked again, never failed); back up, the send commits once."""
    ua, ub = users(2)
    ca, cb = await client(hook_stack, tmp_path, ua), await client(hook_stack, tmp_path, ub)
    try:
        for c in (ca, cb):
            await c.connect()
        conv = (await ca.create_group([ub])).conversation_id
        hook.mode = "boom"  # every request answered 500: no answer
        cmid = await ca.send(conv, "审核 down, kept".encode(), wait=False)
        await eventually(lambda: hook.calls_for(cmid) >= 3, timeout=90, what="the held send retried")
        assert ca.runtime.store.pending_state(cmid) == "pending" and not ca.told.of(ev.SendFailed)
        hook.mode = None
        await eventually(lambda: ca.runtime.store.pending_state(cmid) in ("acked", "committed"), timeout=90,
                         what="the held send committed once the webhook answers")

        async def received() -> list:
            return [m for m in await cb.messages(conv) if m.body == "审核 down, kept".encode()]

        await eventually(received, timeout=60, what="the recipient got the send")
        assert len(await received()) == 1 and not ca.told.of(ev.SendFailed)
    finally:
        hook.mode = None
        await close_all(ca, cb)


async def test_a_muted_member_is_told_the_mute_while_the_webhook_is_down_or_refuses(hook_stack, hook, tmp_path):
    """Decision 0127, Amendment: the mute wins over the webhook's hold (no answer, fail
    closed) and its 403: the muted member is told the mute, not "moderation unavailable"."""
    owner, muted = users(2)
    group_id = int.from_bytes(os.urandom(7), "big") | 1
    ca, cb = await client(hook_stack, tmp_path, owner), await client(hook_stack, tmp_path, muted)
    reason = f"刷屏 flood {os.urandom(3).hex()}"
    try:
        for c in (ca, cb):
            await c.connect()
        conv = (await ca.create_group([muted], group_id=group_id)).conversation_id
        mute = ("moderation", "mute", str(muted), str(group_id), "--reason", reason)
        assert await asyncio.to_thread(ctl, hook_stack, *mute) == 0
        for text in ("boom while muted", "hang while muted", "refuse while muted"):
            with pytest.raises(PolicyRefused) as info:
                await cb.send_text(conv, text)
            assert "muted in this group" in info.value.message and reason in info.value.message, (text, info.value)
    finally:
        await close_all(ca, cb)
