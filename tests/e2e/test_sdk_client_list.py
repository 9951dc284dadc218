"""The conversation list of qim.sdk.Client against the real stack: unread by
the one definition and in agreement with the server's list, the exact flag, read
positions moved here and synced from other devices, events in order."""

from __future__ import annotations

import asyncio

from qim.sdk import events as ev
from tests.e2e.sdkclient import client, close_all, unread_pair
from tests.sdk.realstack import eventually, users


async def test_unread_agrees_with_the_server_and_read_syncs_to_the_other_device(stack, tmp_path):
    a, b = users(2)
    ca = await client(stack, tmp_path, a)
    cb1 = await client(stack, tmp_path, b, 1)
    cb2 = await client(stack, tmp_path, b, 2)
    for c in (ca, cb1, cb2):
        await c.connect()
    conv = (await ca.open_direct(b)).conversation_id
    acks = [await ca.send_text(conv, f"第{i}条 🍵") for i in range(4)]
    await ca.recall(conv, acks[1].message_id)  # recalled: no longer unread
    # told as MessagesUpdated, or as MessagesAdded already recalled when pulled after the recall
    await eventually(lambda: all(any(m.message_id == acks[1].message_id and m.state == 1 and not m.body
                                     for m in c.store.messages(conv)) for c in (cb1, cb2)),
                     what="recall applied on both devices")
    await cb1.send_text(conv, "own message: never unread")
    last = await ca.send_text(conv, "after the reply")
    await eventually(lambda: len(cb2.told.messages(conv)) >= 6, what="six messages on device 2")
    await eventually(lambda: len(cb1.told.messages(conv)) >= 6, what="six messages on device 1")
    # device 1 sent last-but-one: read up to its own message, then one more from a
    for c in (cb1, cb2):
        got = await unread_pair(c, conv)
        assert got == ((1, True), (1, True)), got
    # device 2 still counts from before: a fresh list pull and local counting agree
    await cb2.refresh_conversations()
    assert await unread_pair(cb2, conv) == ((1, True), (1, True))

    moved = await cb1.mark_read(conv)
    assert moved == last.conversation_seq
    assert (await cb1.conversation(conv)).unread == 0
    await eventually(lambda: cb2.told.of(ev.ReadPositionChanged)
                     and cb2.told.of(ev.ReadPositionChanged)[-1].source in ("sync", "server")
                     and cb2.told.of(ev.ReadPositionChanged)[-1].read_conversation_seq == moved,
                     what="READ_SYNC told on device 2")
    assert any(e.source == "sync" for e in cb2.told.of(ev.ReadPositionChanged))
    for c in (cb1, cb2):
        assert await unread_pair(c, conv) == ((0, True), (0, True))
    # the sender's own list: own messages never unread
    assert await unread_pair(ca, conv) == ((0, True), (0, True))
    await close_all(ca, cb1, cb2)


async def test_more_than_the_exact_window_is_200_and_not_exact_on_both_sides(stack, tmp_path):
    a, b = users(2)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    await cb.connect()
    conv = (await ca.open_direct(b)).conversation_id
    cmids = [await ca.send_text(conv, f"m{i}", wait=False) for i in range(205)]
    await asyncio.gather(*(ca.runtime.wait_ack(c) for c in cmids))
    await eventually(lambda: len(cb.told.messages(conv)) >= 205, timeout=60, what="205 messages told")
    assert await unread_pair(cb, conv) == ((200, False), (200, False))
    last = (await cb.conversation(conv)).last_conversation_seq
    await cb.mark_read(conv, last - 3)
    assert await unread_pair(cb, conv) == ((3, True), (3, True))
    await close_all(ca, cb)


async def test_conversations_updated_comes_first_and_already_counts_the_batch(stack, tmp_path):
    a, b = users(2)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    await cb.connect()
    conv = (await ca.open_direct(b)).conversation_id
    for i in range(5):
        await ca.send_text(conv, f"hello {i}")
    await eventually(lambda: len(cb.told.messages(conv)) >= 5, what="five messages told")
    seen, unread_told = 0, None
    for e in cb.told.events:
        if isinstance(e, ev.ConversationsUpdated) and conv in e.conversation_ids:
            entry = next(c for c in e.conversations if c.conversation_id == conv)
            unread_told = entry.unread
            assert unread_told >= seen  # never behind what was already told
        if isinstance(e, ev.MessagesAdded):
            mine = [m for m in e.messages if m.conversation_id == conv]
            seen += len(mine)
            assert unread_told == seen, "ConversationsUpdated before MessagesAdded must already count them"
    assert seen == 5
    entry = (await cb.conversations())[0]
    assert entry.conversation_id == conv and entry.peer_user_id == a
    assert entry.last_message.body == b"hello 4" and entry.last_message.sender_id == a
    await close_all(ca, cb)
