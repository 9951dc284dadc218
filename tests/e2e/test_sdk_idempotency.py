"""Idempotency keys the SDK owns, against the real stack (docs/design.md §3, §9; issue 10
faults 4 and 14): a client_message_id is unique per local store for ever, a CONFLICT on
one's own send reaches the app and keeps the text, and create_group / leave_group /
recall keep their key until they have an answer, so a retry after a lost reply gets
the original answer from the writer."""

from __future__ import annotations

import random

import pytest

from qim._core import ids
from qim.errors import ErrorCode
from qim.proto.v1 import group_pb2, message_pb2
from qim.sdk import ConnectionLost, ServerError, direct_conversation
from qim.sdk import events as ev
from qim.sdk.requests import create_group, leave_group, pull_history, recall
from tests.e2e.rawclient import RawClient
from tests.sdk.realstack import eventually, runtime, shutdown, users


async def test_reused_device_id_with_an_empty_store_sends_new_messages(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    old_rt = runtime(stack, tmp_path, a, name="-old-install")
    await old_rt.connect()
    old = [await old_rt.send_message(conv, b, t) for t in (b"hello", b"second")]
    device = old_rt.store.device_id
    await shutdown(old_rt)
    new_rt = runtime(stack, tmp_path, a, device=device, name="-new-install")  # empty store, same device id
    await new_rt.connect()
    same_text = await new_rt.send_message(conv, b, b"hello")  # was bound to the old ACK
    other_text = await new_rt.send_message(conv, b, b"different")  # was CONFLICT
    assert same_text.message_id not in {x.message_id for x in old}
    assert old[1].conversation_seq < same_text.conversation_seq < other_text.conversation_seq
    rb = runtime(stack, tmp_path, b)
    await rb.connect()

    async def four() -> bool:
        await rb.pull_mailbox()
        return len(await rb.store.run(rb.store.messages, conv)) == 4

    await eventually(four, what="four messages at the recipient")
    assert [m.body for m in await rb.store.run(rb.store.messages, conv)] == [
        b"hello", b"second", b"hello", b"different"]
    await shutdown(new_rt, rb)


async def test_conflict_on_own_send_reaches_the_app_and_keeps_the_text(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    rt = runtime(stack, tmp_path, a)
    await rt.connect()
    st = rt.store
    nxt = st.reserve_ordinal() + 1  # same block: the next send takes this ordinal
    cmid = ids.client_message_id(st.store_nonce, st.device_id, nxt)
    raw = await RawClient.login(stack, a, device=st.device_id + 1)  # another device of the user took it
    await raw.send_text(b, b"somebody else's text", cmid=cmid)
    await raw.close()
    with pytest.raises(ServerError) as info:
        await rt.send_message(conv, b, b"my text")
    assert info.value.code == ErrorCode.CONFLICT
    (failed,) = rt.told.of(ev.SendFailed)
    assert failed.client_message_id == cmid and failed.code == ErrorCode.CONFLICT
    (row,) = await st.run(st.pending_sends, ("failed",))
    assert row.client_message_id == cmid and row.body == b"my text"
    await shutdown(rt)


def lose_next_reply(rt) -> list:
    """The next request reaches the server and is applied; its reply is lost (kept in
    the returned list, so the test can compare the retry's answer with it)."""
    real, lost = rt.request, []

    async def lossy(opcode, body, timeout=None):
        rt.request = real
        lost.append(await real(opcode, body, timeout))
        raise ConnectionLost("reply lost (test)")

    rt.request = lossy
    return lost


async def test_group_ops_and_recall_retried_after_a_lost_reply_get_the_original_answer(stack, tmp_path):
    a, b = users(2)
    gid = random.getrandbits(62) + 1
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect(), await rb.connect()
    lost = lose_next_reply(ra)
    with pytest.raises(ConnectionLost):
        await create_group(ra, gid, [b])
    created = await create_group(ra, gid, [b])  # was CONFLICT: a new cmid for the same group
    assert group_pb2.GroupOk.FromString(lost[0][1]) == created  # the writer replayed the original answer
    assert created.membership_version == 1 and created.conversation_seq >= 1
    assert await create_group(ra, gid, [b]) == created  # answered: the original answer again
    conv = created.conversation_id
    ack = await ra.send_message(conv, 0, b"to be recalled")
    lost = lose_next_reply(ra)
    with pytest.raises(ConnectionLost):
        await recall(ra, conv, ack.message_id)
    recalled = await recall(ra, conv, ack.message_id)  # was control_conversation_seq 0
    assert message_pb2.RecallOk.FromString(lost[0][1]) == recalled
    assert recalled.state == message_pb2.MESSAGE_STATE_RECALLED
    assert recalled.control_conversation_seq > ack.conversation_seq
    lost = lose_next_reply(rb)
    with pytest.raises(ConnectionLost):
        await leave_group(rb, gid)
    left = await leave_group(rb, gid)  # was FORBIDDEN: b is no member any more
    assert group_pb2.GroupOk.FromString(lost[0][1]) == left
    assert left.membership_version == 2 and left.conversation_seq > recalled.control_conversation_seq
    page = await pull_history(ra, conv, limit=50)
    control = [i for i in page.items if i.message_type == 4]
    assert len(control) == 3  # CREATED, the recall notice, LEFT: each applied once
    await shutdown(ra, rb)
