"""Read receipts and the mention flag through qim.sdk.Client on the real stack (issue 37;
docs/decisions/0122): read ticks in a direct chat (pushed, and in the list of a device
that starts later), who-read in a small group and the refusal above the size limit,
receipts off is symmetric, a mention in a muted group still flagged."""

from __future__ import annotations

import pytest

from qim.errors import ErrorCode
from qim.sdk import PeerRead, ServerError
from qim.services.session.convstate import READERS_GROUP_MAX
from tests.e2e.sdkclient import client, close_all, server_list
from tests.sdk.realstack import eventually, users


async def _has(c, conv: bytes) -> bool:
    return conv in await server_list(c)


async def _unread(listed, n: int) -> bool:
    entry = await listed()
    return entry is not None and entry.unread == n


def _ticks(c, conv: bytes) -> list[int]:
    return [e.read_conversation_seq for e in c.told.of(PeerRead) if e.conversation_id == conv]


async def test_read_ticks_in_a_direct_chat_pushed_and_listed(stack, tmp_path):
    a, b = users(2)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    await cb.connect()
    conv = (await ca.open_direct(b)).conversation_id
    acks = [await ca.send_text(conv, f"m{i}") for i in range(3)]
    await eventually(lambda: len(cb.told.messages(conv)) == 3, what="three messages at b")
    assert ca.conversation_state(conv).peer_read_seq == 0
    await cb.mark_read(conv, acks[1].conversation_seq)
    await eventually(lambda: _ticks(ca, conv) == [acks[1].conversation_seq], what="first read tick")
    await cb.mark_read(conv)
    await eventually(lambda: _ticks(ca, conv)[-1:] == [acks[2].conversation_seq], what="second read tick")
    assert ca.conversation_state(conv).peer_read_seq == acks[2].conversation_seq
    assert next(e for e in ca.told.of(PeerRead)).reader_user_id == b
    # a device of the sender that starts now reads the tick from its list
    ca2 = await client(stack, tmp_path, a, 2)
    await ca2.connect()
    async def listed_tick() -> bool:  # pulled again while the server's projection of a's list lags
        if ca2.conversation_state(conv).peer_read_seq != acks[2].conversation_seq:
            await ca2.refresh_conversations()
        return ca2.conversation_state(conv).peer_read_seq == acks[2].conversation_seq
    await eventually(listed_tick, timeout=60, what="peer_read_seq on a new device")
    # the reader never gets its own tick; who-read of a direct chat is the peer
    assert _ticks(cb, conv) == []
    got = await ca.readers(conv, acks[2].conversation_seq)
    assert got.reader_user_ids == (b,) and got.counted == 1
    await close_all(ca, ca2, cb)


async def test_who_read_in_a_small_group_and_refused_above_the_limit(stack, tmp_path):
    a, b, c, d = users(4)
    ca, cb, cc = [await client(stack, tmp_path, u) for u in (a, b, c)]
    for x in (ca, cb, cc):
        await x.connect()
    group = (await ca.create_group([b, c, d])).conversation_id
    ack = await ca.send_text(group, "who reads this?")
    for x in (cb, cc):
        await eventually(lambda x=x: len(x.told.messages(group)) >= 1, what="the group message")
    got = await ca.readers(group, ack.conversation_seq)
    assert got.reader_user_ids == () and got.counted == 3
    await cb.mark_read(group)
    got = await ca.readers(group, ack.conversation_seq)
    assert got.reader_user_ids == (b,) and got.counted == 3
    await cc.mark_read(group)
    assert (await ca.readers(group, ack.conversation_seq)).reader_user_ids == tuple(sorted((b, c)))
    # in groups nothing is pushed
    assert ca.told.of(PeerRead) == []

    many = users(READERS_GROUP_MAX + 1)
    big = (await ca.create_group(many)).conversation_id
    ack = await ca.send_text(big, "too many to ask")
    with pytest.raises(ServerError) as refused:
        await ca.readers(big, ack.conversation_seq)
    assert refused.value.code == ErrorCode.FORBIDDEN and str(READERS_GROUP_MAX) in str(refused.value)
    await close_all(ca, cb, cc)


async def test_receipts_off_is_symmetric(stack, tmp_path):
    a, b = users(2)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    await cb.connect()
    conv = (await ca.open_direct(b)).conversation_id
    first = await ca.send_text(conv, "one")
    assert (await cb.open_direct(a)).conversation_id == conv
    await cb.send_text(conv, "two")  # b's send marks b read up to it
    await eventually(lambda: len(ca.told.messages(conv)) == 2, what="b's message at a")
    assert await cb.set_read_receipts(False) is False
    assert await cb.read_receipts() is False
    # b reads: nothing reaches a; a reads: b sees nothing either
    third = await ca.send_text(conv, "three")
    await eventually(lambda: len(cb.told.messages(conv)) == 3, what="third message at b")
    await cb.mark_read(conv)
    await ca.mark_read(conv)
    for c in (ca, cb):  # listed (the projection may lag on a busy machine), and no position shown
        await eventually(lambda c=c: _has(c, conv), timeout=60, what="the chat listed")
        assert (await server_list(c))[conv].peer_read_seq == 0
    assert (await ca.readers(conv, first.conversation_seq)).reader_user_ids == ()
    with pytest.raises(ServerError) as refused:
        await cb.readers(conv, first.conversation_seq)
    assert refused.value.code == ErrorCode.FORBIDDEN
    # on again: the next read is a tick, and no tick of the reads made while off was sent
    assert await cb.set_read_receipts(True) is True
    fourth = await ca.send_text(conv, "four")
    await eventually(lambda: len(cb.told.messages(conv)) == 4, what="fourth message at b")
    await cb.mark_read(conv)
    await eventually(lambda: _ticks(ca, conv)[-1:] == [fourth.conversation_seq], what="tick after turning on")
    assert third.conversation_seq not in _ticks(ca, conv)
    assert _ticks(cb, conv) == []  # a's read while b was off never reached b
    await close_all(ca, cb)


async def test_a_mention_in_a_muted_group_is_still_flagged(stack, tmp_path):
    a, b, c = users(3)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    await cb.connect()
    group = (await ca.create_group([b, c])).conversation_id
    await eventually(lambda: cb.store.conversation(group) is not None, what="the group at b")
    await cb.mute(group)
    await ca.send_text(group, "no mention")

    async def listed():
        return (await server_list(cb)).get(group)
    await eventually(lambda: _unread(listed, 1), timeout=60, what="one unread listed")
    entry = await listed()
    assert entry.muted_until and not entry.mentioned
    await ca.send(group, "@b look".encode(), mentions=[b])
    await eventually(lambda: _unread(listed, 2), timeout=60, what="two unread listed")
    entry = await listed()
    assert entry.mentioned and entry.muted_until
    await cb.refresh_conversations()
    assert cb.conversation_state(group).mentioned and cb.conversation_state(group).muted()
    await cb.mark_read(group)
    entry = await listed()
    assert not entry.mentioned and entry.unread == 0
    await close_all(ca, cb)


async def test_a_client_that_does_not_know_the_new_frames_keeps_working(stack, tmp_path, caplog):
    """An older client (no handlers for READ_RECEIPT and CONVERSATION_STATE_SYNC) skips them."""
    a, b = users(2)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    old = await client(stack, tmp_path, a, 2)
    old.runtime.core.frame_handlers.clear()  # what an SDK from before these frames does
    for c in (ca, cb, old):
        await c.connect()
    conv = (await ca.open_direct(b)).conversation_id
    first = await ca.send_text(conv, "tick me")
    await eventually(lambda: len(cb.told.messages(conv)) == 1, what="the message at b")
    with caplog.at_level("DEBUG", logger="qim.sdk.connection"):
        await ca.pin(conv)  # CONVERSATION_STATE_SYNC to the old device
        await cb.mark_read(conv)  # READ_RECEIPT to both of a's devices
        await eventually(lambda: _ticks(ca, conv) == [first.conversation_seq], what="the tick on the new device")
        await eventually(lambda: "ignoring server frame 0x040e" in caplog.text
                         and "ignoring server frame 0x040b" in caplog.text, what="the old device skipped both")
    await cb.send_text(conv, "still working")
    await eventually(lambda: any(m.body == b"still working" for m in old.told.messages(conv)),
                     what="the old device still receives")
    assert _ticks(old, conv) == []
    await close_all(ca, cb, old)
