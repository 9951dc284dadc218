"""What an online app is told, against the real stack (docs/design.md §9;
2 and 5): whole bodies also when the mailbox only references them, every conversation
in conversation_seq order, and no wake-up lost while connect() is still syncing."""

from __future__ import annotations

import asyncio
import os
import random
import threading

from qim.sdk import direct_conversation
from qim.sdk.requests import create_group
from tests.sdk.realstack import eventually, runtime, shutdown, users


async def test_referenced_direct_bodies_reach_an_online_recipient_whole(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect(), await rb.connect()
    # 2 x 4096 fits the 8 KiB inline budget; 4097 is the first referenced size; 1 MiB the limit
    sent = [os.urandom(4096), os.urandom(4097), os.urandom(1 << 20)]
    for body in sent:
        await ra.send_message(conv, b, body)
    await eventually(lambda: len(rb.told.messages(conv)) >= 3, what="three messages told")
    told = rb.told.messages(conv)
    assert [len(m.body) for m in told] == [4096, 4097, 1 << 20]
    assert [m.body for m in told] == sent  # byte-exact, never an empty reference
    assert [m.body for m in await rb.store.run(rb.store.messages, conv)] == sent
    await shutdown(ra, rb)


async def test_small_body_in_a_large_group_reaches_an_online_member_whole(stack, tmp_path):
    a, b, *offline = users(12)  # 12 x 1 KiB > 8 KiB: the entries reference the body
    gid = random.getrandbits(62) + 1
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect(), await rb.connect()
    ok = await create_group(ra, gid, [b, *offline])
    body = os.urandom(1024)
    ack = await ra.send_message(ok.conversation_id, 0, body)
    await eventually(lambda: rb.told.messages(ok.conversation_id), what="group message told")
    (msg,) = rb.told.messages(ok.conversation_id)
    assert msg.message_id == ack.message_id and msg.body == body
    await shutdown(ra, rb)


async def test_burst_of_unawaited_sends_is_told_in_conversation_seq_order(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect(), await rb.connect()
    texts = [f"burst {i:03d}".encode() for i in range(64)]
    cmids = await asyncio.gather(*(ra.submit_message(conv, b, t) for t in texts))  # submission order = i
    acks = await asyncio.gather(*(ra.wait_ack(c) for c in cmids))
    await eventually(lambda: len(rb.told.messages(conv)) >= 64, what="64 messages told")
    told = rb.told.messages(conv)
    # the SDK's part: told once each, per conversation in conversation_seq order
    assert [m.conversation_seq for m in told] == sorted(x.conversation_seq for x in acks)
    assert sorted(m.message_id for m in told) == sorted(x.message_id for x in acks)
    # the writer's part (previous_client_message_id honoured): seq order is submission order
    assert [x.conversation_seq for x in acks] == [m.conversation_seq for m in told]
    assert [m.body for m in told] == texts
    await shutdown(ra, rb)


async def test_push_arriving_during_connect_sync_still_wakes_a_pull(stack, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect()
    entered, release = threading.Event(), threading.Event()
    real_apply = rb.store.apply_mailbox_batch

    def held_apply(*args):  # the first batch of the connect-time sync waits (store thread)
        if not release.is_set():
            entered.set()
            release.wait(20)
        return real_apply(*args)

    rb.store.apply_mailbox_batch = held_apply
    connecting = asyncio.ensure_future(rb.connect())
    await eventually(entered.is_set, what="connect-time sync started")
    ack = await ra.send_message(conv, b, b"while you were syncing")
    await eventually(lambda: rb.stats["pushes"] >= 1, what="push received during the sync")
    release.set()
    await connecting
    # nobody calls pull_mailbox here: the push alone must have led to a pull
    st = rb.store

    async def applied() -> bool:  # stored AND the cursor passed it (a MAILBOX_BATCH applied it)
        rows, cursor = await st.run(st.messages, conv), await st.run(st.cursor)
        return bool(rows) and cursor is not None and cursor[2] >= rows[0].mailbox_seq

    await eventually(applied, timeout=10, what="message applied by a pull")
    assert [m.message_id for m in await st.run(st.messages, conv)] == [ack.message_id]
    assert [m.message_id for m in rb.told.messages(conv)] == [ack.message_id]
    await shutdown(ra, rb)
