"""Inline pushes at the mailbox (docs/decisions/0156; issue 41): which records carry their
entries, the previous position the fused script reads, and the contract that an inline
entry is byte-identical to what PULL_MAILBOX serves from that previous position.

Real Redis, the real materializer loop and MailboxPuller (with the real message and
reaction stores); the dispatch partitions are the stand-in of test_lost_reply.py.
"""

from __future__ import annotations

import asyncio
import time

from qim._core import ids, watermark
from qim._core import mailbox_seq as mseq
from qim._core.types import MessageCoord
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.infra.redis.client import connect
from qim.proto.v1 import internal_pb2, mailbox_pb2
from qim.protocol import EventType
from qim.services.mailbox.inline import INLINE_MAX_BYTES, inlinable, inline_entries
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.services.mailbox.pull import MailboxPuller
from qim.services.mailbox.targets import push_bodies
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.messages import RedisMessageStore
from qim.stores.redis.reactions import RedisReactionStore
from qim.wire.dispatch import Dispatch
from tests.mailbox.test_lost_reply import NOW_MS, DispatchLog

TENANT, SHARDS = 7, 8
SHARD = 3
SETTLE_S = 30.0


def placed(n: int) -> list[int]:
    """`n` user ids whose MailboxShard (of SHARDS) is SHARD: the puller serves them."""
    out, user = [], 1
    while len(out) < n:
        if ids.user_placement(TENANT, user, SHARDS)[2] == SHARD:
            out.append(user)
        user += 1
    return out


A, B, C, D, E = placed(5)


def dispatch(offset: int, sender: int, recipients: tuple[int, ...], body: bytes | None,
             conversation: bytes | None = None, event_type: int = EventType.MESSAGE) -> Dispatch:
    """A dispatch record at `offset` of SHARD from `sender` (a direct conversation of the
    first two recipients unless `conversation`)."""
    conv = conversation or ids.conversation_id_direct(TENANT, recipients[0], recipients[-1])
    coord = MessageCoord(b"M" + offset.to_bytes(15, "big"), conv, offset + 1, sender, NOW_MS + offset, 1, b"")
    return Dispatch(TENANT, b"D" + offset.to_bytes(15, "big"), coord, SHARD, b"c" * 15 + bytes([offset]),
                    tuple(sorted(recipients)), body, event_type)


def test_the_inline_decision_takes_small_direct_messages_with_inline_bodies_only():
    direct = dispatch(1, A, (A, B), b"hello")
    assert inlinable(direct)
    assert not inlinable(dispatch(1, A, (A, B), b"x", conversation=ids.conversation_id_group(TENANT, 9)))  # group
    assert not inlinable(dispatch(1, A, (A, B), None))  # body referenced: filled at pull time
    assert not inlinable(dispatch(1, A, (A, B), b""))  # nothing to show: never an empty body
    assert not inlinable(dispatch(1, A, (A, B), b"x" * INLINE_MAX_BYTES))  # over the budget
    assert not inlinable(dispatch(1, A, (A, B, C, D, E), b"x"))  # more users than a direct record has
    assert not inlinable(dispatch(1, A, (A, B), b"x", event_type=EventType.RECALL))  # a pull annotates it
    seq = mseq.compose(2, 1)
    got = inline_entries(direct, seq, 2, {A: 0, B: -1})
    assert got[A][0] == mseq.compose(2, 0) and got[B][0] == 0  # -1: no earlier entry
    own, other = (mailbox_pb2.MailboxEntry.FromString(got[u][1][0]) for u in (A, B))
    assert own.client_message_id == direct.client_message_id and other.client_message_id == b""
    assert own.body == other.body == b"hello" and own.mailbox_seq == seq
    assert inline_entries(direct, seq, 2, {A: 0}).keys() == {A}  # a user the store did not read: position only
    # the frame carries them per user, the others of the position get the position only
    frame = internal_pb2.PushBatch.FromString(push_bodies(TENANT, seq, b"m" * 16, [A, B, C], b"", got)[0])
    pos = frame.positions[0]
    assert list(pos.user_ids) == [A, B, C]
    assert {(i.user_id, i.prev_mailbox_seq, tuple(i.entries)) for i in pos.inline} == \
        {(A, got[A][0], tuple(got[A][1])), (B, 0, tuple(got[B][1]))}


async def materialized(client, records: list[Dispatch]) -> tuple[MailboxMaterializer, dict[int, dict]]:
    """Run the materializer over `records` (offset i each) until W passed them; the inline
    part pushed per mailbox_seq."""
    pushed: dict[int, dict] = {}
    log = DispatchLog()
    m = MailboxMaterializer("unused:1", RedisMailboxStore(client), [SHARD],
                            lambda tenant, seq, users, event, trace, inline: pushed.__setitem__(seq, inline),
                            FaultPoints("", MAILBOX_POINTS), consumer=log)  # type: ignore[arg-type]
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    try:
        for offset, d in enumerate(records):
            log.add(SHARD, offset, d.encode())
        deadline = time.monotonic() + SETTLE_S
        while watermark.start_offset(m.shards[SHARD].blob) < len(records):
            assert not m.shards[SHARD].dirty and time.monotonic() < deadline, "records not materialized"
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return m, pushed


async def pull(puller: MailboxPuller, user: int, cursor: int) -> mailbox_pb2.MailboxBatch:
    actor = internal_pb2.Actor(tenant_id=TENANT.to_bytes(16, "big"), user_id=user, device_id=1)
    q = mailbox_pb2.PullMailbox(cursor=cursor, max_entries=1)
    return await puller.pull(internal_pb2.MailboxPull(actor=actor, upstream=q.SerializeToString()))


async def test_inline_entries_are_what_a_pull_from_the_previous_position_serves(private_redis):
    client = connect(private_redis.addr)
    try:
        records = [
            dispatch(0, C, (A, B, C), b"group", conversation=ids.conversation_id_group(TENANT, 5)),  # position only
            dispatch(1, A, (A, B), b"hello"),  # inline for both: prev = the group entry
            dispatch(2, B, (A, B), None),  # a referenced body: position only
            dispatch(3, A, (A, B), b"x" * 5000),  # over the budget: position only
            dispatch(4, B, (A, B), "é at last".encode()),  # inline: prev = offset 3
            dispatch(5, D, (D, E), b"first"),  # users without an earlier entry: prev 0
        ]
        m, pushed = await materialized(client, records)
        epoch = m.shards[SHARD].epoch
        seq = [mseq.compose(epoch, o) for o in range(len(records))]
        assert {s: sorted(i) for s, i in pushed.items()} == {seq[0]: [], seq[1]: [A, B], seq[2]: [], seq[3]: [],
                                                              seq[4]: [A, B], seq[5]: [D, E]}
        assert pushed[seq[1]][A][0] == pushed[seq[1]][B][0] == seq[0]
        assert pushed[seq[4]][A][0] == pushed[seq[4]][B][0] == seq[3]
        assert pushed[seq[5]][D][0] == pushed[seq[5]][E][0] == 0
        puller = MailboxPuller(RedisMessageStore(client), RedisMailboxStore(client), m, SHARDS,
                               reactions=RedisReactionStore(client))
        for s in (seq[1], seq[4], seq[5]):
            for user, (prev, entries) in pushed[s].items():
                batch = await pull(puller, user, prev)
                assert batch.next_cursor == s
                assert [e.SerializeToString() for e in batch.entries] == entries, (s, user)
        sender_own = mailbox_pb2.MailboxEntry.FromString(pushed[seq[1]][A][1][0])
        assert sender_own.client_message_id == records[1].client_message_id  # the sender's own entry
    finally:
        await client.aclose()


async def test_an_overtaking_direct_record_reads_its_previous_position_after_the_records_ahead(private_redis):
    """decisions/0142: the records queued ahead get their entries of the direct record's
    lanes in the same call, so the previous position read at its end counts them."""
    from qim.services.mailbox.overtake import overtake
    from qim.services.mailbox.record import ShardCursor

    client = connect(private_redis.addr)
    try:
        store = RedisMailboxStore(client)
        blob, epoch = await store.load_watermark(SHARD)
        cur = ShardCursor(SHARD, epoch, blob, b"me")
        group = ids.conversation_id_group(TENANT, 5)
        ahead = [(o, dispatch(o, C, (A, B, C), b"g", conversation=group).encode()) for o in range(3)]
        chosen = [(3, dispatch(3, A, (A, B), b"hi").encode())]
        [done] = await overtake(store, cur, ahead, chosen, {})
        assert done.status == "FRESH"
        assert {u: prev for u, (prev, _) in done.inline.items()} == {A: mseq.compose(epoch, 2),
                                                                      B: mseq.compose(epoch, 2)}
    finally:
        await client.aclose()


async def test_the_previous_position_spans_day_buckets_and_is_unknown_when_a_later_day_holds_more(private_redis):
    """qim_prev_offset (lua/mailbox_lib.lua): another day wholly below the offset counts
    by its highest offset (no read); a day holding a higher offset (created_at out of
    offset order near midnight) makes it unknown, so the push carries the position only."""
    from qim.stores.mailboxes import FusedRecord, day_of

    client = connect(private_redis.addr)
    try:
        store = RedisMailboxStore(client)
        day = day_of(NOW_MS) - 1
        seq8 = [mseq.to_bytes(mseq.compose(1, o)) for o in range(40)]
        await store.append(TENANT, 3, day - 1, [(A, seq8[3] + b"x")])
        await store.append(TENANT, 5, day - 1, [(A, seq8[5] + b"x")])

        async def prev(offset: int, d: int, dispatch: bytes) -> dict:
            got: dict = {}
            rec = FusedRecord(TENANT, dispatch * 16, dispatch * 32, offset, seq8[offset], d, [(A, seq8[offset] + b"y")],
                              inline=True)
            blob, _ = await store.load_watermark(SHARD)
            [(status, _)] = await store.fused(SHARD, 1, [rec], blob, b"W%d" % offset, prevs=got)
            assert status == "FRESH"
            return got

        assert await prev(9, day, b"a") == {(0, A): 5}  # the day before, by its index
        assert await prev(10, day, b"b") == {(0, A): 9}  # its own day's bucket
        await store.append(TENANT, 30, day + 1, [(A, seq8[30] + b"x")])  # a later day, a higher offset
        assert await prev(12, day, b"c") == {}  # unknown: position only
        other = placed(6)[-1]
        got: dict = {}
        rec = FusedRecord(TENANT, b"d" * 16, b"d" * 32, 13, seq8[13], day, [(other, seq8[13] + b"y")], inline=True)
        blob, _ = await store.load_watermark(SHARD)
        await store.fused(SHARD, 1, [rec], blob, b"W13", prevs=got)
        assert got == {(0, other): -1}  # no earlier entry
    finally:
        await client.aclose()
