"""Session list, unread and read state end to end (docs/design.md §6, §12; issue 7 proofs) on
the shared stack: real gateway, writer, fanout, mailbox and qim-session on real Redis
and Kafka. Messages go through the real write path; the projection is asynchronous, so
list checks poll for a bounded time and still require the exact final value."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from qim._core import ids
from qim.errors import ErrorCode
from qim.protocol import Opcode
from qim.stores.redis.keys import CommitKeys, convs_key, read_key
from tests.e2e.rawclient import RawClient
from tests.e2e.sessionclient import (
    durable_caught_up,
    entry_when,
    mark_read,
    new_user,
    pull_page,
    pushed,
    sessions,
    wait_push,
)


async def send_n(client: RawClient, peer: int, n: int, tag: bytes = b"m") -> list:
    acks = []
    for i in range(n):
        op, ack = await client.send_text(peer, tag + b"%d" % i)
        assert op == Opcode.SEND_ACK, ack
        acks.append(ack)
    return acks


def redis_of(stack) -> aioredis.Redis:
    host, port = stack.env["QIM_REDIS_ADDR"].rsplit(":", 1)
    return aioredis.Redis(host=host, port=int(port))


async def test_unread_three_mark_read_on_a_then_zero_on_b_with_read_sync(stack):
    me, peer = new_user(), new_user()
    conv = ids.conversation_id_direct(0, me, peer)
    dev_a, dev_b = await RawClient.login(stack, me, device=1), await RawClient.login(stack, me, device=2)
    sender = await RawClient.login(stack, peer)
    acks = await send_n(sender, me, 3)
    on_b = await entry_when(dev_b, conv, lambda e: e.unread == 3)
    assert on_b.unread_exact and on_b.read_conversation_seq == 0 and on_b.peer_user_id == peer
    assert on_b.last_message.body == b"m2" and on_b.last_activity_id == acks[2].message_id
    # sending marks read up to the sent message; the projection applies it shortly after
    sender_view = await entry_when(sender, conv, lambda e: e.last_message.conversation_seq == acks[2].conversation_seq
                                   and e.read_conversation_seq == acks[2].conversation_seq)
    assert sender_view.unread == 0

    op, ok = await mark_read(dev_a, conv, acks[2].conversation_seq, peer=peer)
    assert op == Opcode.MARK_READ_OK and ok.read_conversation_seq == acks[2].conversation_seq
    sync = await wait_push(dev_b, Opcode.READ_SYNC)
    assert (sync.conversation_id, sync.read_conversation_seq) == (conv, acks[2].conversation_seq)
    # absolute values, never increments; the user's badge settles in deltas of its own
    # (docs/decisions/0129), so the conversation's delta is the first one with a session
    delta = await wait_push(dev_b, Opcode.SESSION_DELTA, lambda d: len(d.sessions) > 0)
    assert [(s.conversation_id, s.unread, s.read_conversation_seq) for s in delta.sessions] == \
        [(conv, 0, acks[2].conversation_seq)]
    await wait_push(dev_a, Opcode.SESSION_DELTA, lambda d: len(d.sessions) > 0 and d.sessions[0].unread == 0)
    assert pushed(dev_a, Opcode.READ_SYNC) == []  # the reading device itself gets MARK_READ_OK only
    after = [e for e in await sessions(dev_b) if e.conversation_id == conv]
    assert (after[0].unread, after[0].read_conversation_seq) == (0, acks[2].conversation_seq)

    # the sender's state is its own: unchanged, and no read frames reach it
    again = next(e for e in await sessions(sender) if e.conversation_id == conv)
    assert (again.unread, again.read_conversation_seq) == (0, sender_view.read_conversation_seq)
    assert pushed(sender, Opcode.READ_SYNC) == [] and pushed(sender, Opcode.SESSION_DELTA) == []

    # forward only: an older position answers with the absolute current one; a position
    # past the newest message is clamped to it
    op, ok = await mark_read(dev_b, conv, 1, peer=peer)
    assert op == Opcode.MARK_READ_OK and ok.read_conversation_seq == acks[2].conversation_seq
    more = await send_n(sender, me, 1, b"late")
    await entry_when(dev_a, conv, lambda e: e.unread == 1)
    op, ok = await mark_read(dev_a, conv, 10**9, peer=peer)
    assert ok.read_conversation_seq == more[0].conversation_seq
    for c in (dev_a, dev_b, sender):
        await c.close()


async def test_own_messages_never_count_also_after_relogin_with_an_empty_store(stack):
    me, peer = new_user(), new_user()
    conv = ids.conversation_id_direct(0, me, peer)
    other = await RawClient.login(stack, peer)
    first = await send_n(other, me, 2, b"from-peer")
    client = await RawClient.login(stack, me, device=1)
    mine = await send_n(client, peer, 4, b"mine")
    await client.close()
    # a new device with nothing local: the server's list alone must say 0 and carry the
    # read position the client merges (sending marked the conversation read)
    fresh = await RawClient.login(stack, me, device=77)
    peer_seqs = [a.conversation_seq for a in first]

    def settled(e) -> bool:
        # while the read position catches up (sending marks read, asynchronously), the
        # peer's messages above it may count, the own ones never
        assert e.unread == sum(1 for q in peer_seqs if q > e.read_conversation_seq), e
        return e.read_conversation_seq == mine[-1].conversation_seq

    entry = await entry_when(fresh, conv, settled)
    assert entry.unread == 0 and entry.last_message.conversation_seq == mine[-1].conversation_seq
    assert entry.last_message.client_message_id == mine[-1].client_message_id  # own head keeps its cmid
    assert entry.peer_user_id == peer
    peer_view = await entry_when(other, conv, lambda e: e.unread == 4)
    assert peer_view.read_conversation_seq == first[-1].conversation_seq

    # even with the read position gone, own messages never count (sender ≠ self). A late
    # replay of an own registration may restore the position (sending marks read): then
    # drop it again; what must never happen is an own message counted.
    r = redis_of(stack)
    await durable_caught_up(stack, r)
    for attempt in range(5):
        await r.hdel(read_key(0, me), conv.hex())
        late = await send_n(other, me, 1, b"after%d" % attempt)  # marks the conversation dirty for `me`
        peer_seqs.append(late[0].conversation_seq)
        seq = late[0].conversation_seq
        entry = await entry_when(fresh, conv, lambda e, seq=seq: e.last_message.conversation_seq == seq)
        assert entry.unread == sum(1 for q in peer_seqs if q > entry.read_conversation_seq)
        if entry.read_conversation_seq == 0:
            assert entry.unread == len(peer_seqs)  # every peer message, none of the 4 own
            break
    else:
        raise AssertionError("the read position kept coming back")
    await r.aclose()
    await other.close(), await fresh.close()


async def test_sending_marks_the_conversation_read_up_to_the_sent_message(stack):
    me, peer = new_user(), new_user()
    conv = ids.conversation_id_direct(0, me, peer)
    other, client = await RawClient.login(stack, peer), await RawClient.login(stack, me)
    await send_n(other, me, 2)
    await entry_when(client, conv, lambda e: e.unread == 2)
    reply = await send_n(client, peer, 1, b"reply")
    entry = await entry_when(client, conv, lambda e: e.read_conversation_seq == reply[0].conversation_seq)
    assert entry.unread == 0
    await other.close(), await client.close()


async def test_pages_are_newest_first_and_follow_activity(stack):
    me = new_user()
    peers = [new_user() for _ in range(5)]
    client = await RawClient.login(stack, me)
    for p in peers:
        c = await RawClient.login(stack, p)
        await send_n(c, me, 1)
        await c.close()
    convs = [ids.conversation_id_direct(0, me, p) for p in peers]
    await entry_when(client, convs[-1], lambda e: True)
    await entry_when(client, convs[0], lambda e: True)
    pages, cursor = [], b""
    while True:
        op, batch = await pull_page(client, limit=2, cursor=cursor)
        assert op == Opcode.SESSION_LIST_BATCH
        pages.append([s.conversation_id for s in batch.sessions])
        if not batch.has_more:
            break
        cursor = batch.next_cursor
    assert pages == [convs[4:2:-1], convs[2:0:-1], convs[0:1]]
    again = await RawClient.login(stack, peers[0])
    await send_n(again, me, 1, b"again")
    await entry_when(client, convs[0], lambda e: e.unread == 2)  # heads come from history at once...
    for _ in range(100):  # ...the order from the registration, which may land a moment later
        order = [e.conversation_id for e in await sessions(client)]
        if order[0] == convs[0]:
            break
        await asyncio.sleep(0.1)
    assert order == [convs[0], convs[4], convs[3], convs[2], convs[1]]
    op, err = await pull_page(client, cursor=b"short")
    assert op == Opcode.ERROR and err.code == ErrorCode.INVALID_ARGUMENT
    await again.close(), await client.close()


async def test_a_missing_record_fails_the_page_never_a_silent_zero(stack):
    me, peer = new_user(), new_user()
    conv = ids.conversation_id_direct(0, me, peer)
    other = await RawClient.login(stack, peer)
    acks = await send_n(other, me, 2)
    r = redis_of(stack)
    for _ in range(100):  # registered by the projection (the list itself stays cold)
        if await r.zscore(convs_key(0, me), conv.hex()) is not None:
            break
        await asyncio.sleep(0.1)
    await r.delete(CommitKeys(0, conv).record(acks[0].message_id))
    client = await RawClient.login(stack, me)
    op, err = await pull_page(client)
    assert op == Opcode.ERROR and err.code == ErrorCode.INTERNAL and "record missing" in err.message
    await r.aclose()
    await other.close(), await client.close()


async def test_mark_read_is_refused_outside_the_actors_conversations(stack):
    me, peer, stranger = new_user(), new_user(), new_user()
    conv = ids.conversation_id_direct(0, me, peer)
    other = await RawClient.login(stack, peer)
    await send_n(other, me, 1)
    outsider = await RawClient.login(stack, stranger)
    op, err = await mark_read(outsider, conv, 1, peer=peer)  # names a peer, but not its conversation
    assert op == Opcode.ERROR and err.code == ErrorCode.FORBIDDEN
    op, err = await mark_read(outsider, conv, 1)
    assert op == Opcode.ERROR and err.code == ErrorCode.NOT_FOUND
    op, err = await mark_read(outsider, ids.conversation_id_group(0, new_user()), 1)
    assert op == Opcode.ERROR and err.code == ErrorCode.FORBIDDEN
    await other.close(), await outsider.close()
