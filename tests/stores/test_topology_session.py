"""The SessionStore, ReadPositionStore and SessionEpochStore on several standalone Redis
instances (docs/decisions/0096, 0097): three real instances, layout core=(a, b, c),
mailbox=(c, a, b), 8 MailboxShards. A user's conversation set, peers, name, checked
mark, read positions and session epochs are on the instance of its MailboxShard, a
session shard's checkpoint on the shard's instance, the first-registration queue one
per instance holding its own users' rows, drained from every instance. Each instance is
looked at with a client of its own; the same calls on one instance give the same
answers. A durable batch over shards of two instances keeps each shard's rule: its
checkpoint moves only after every registration its records produced ran, even the
direct sender's on the other instance, whichever instance refuses."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.config.redislayout import RedisLayout
from qim.services.session.register import Message, registrations
from qim.stores.errors import NotOwner
from qim.stores.redis.keys import (
    convs_checked_key,
    convs_key,
    name_key,
    peers_key,
    read_key,
    session_epoch_key,
    session_shard_checkpoint_key,
    ucs_pending_key,
)
from qim.stores.redis.presence import RedisSessionEpochs
from qim.stores.redis.sessions import RedisReadPositions, RedisSessionStore
from qim.stores.redis.topology import RedisTopology, topology_of
from qim.stores.sessions import Registration
from tests.stores.conftest import shard_users
from tests.stores.test_topology_archive import layout3, where

TENANT = 7
BINDING = "cluster|topic|8"
SHARDS = (0, 1, 2, 3)  # mailbox instances c, a, b, c
GROUP = ids.conversation_id_group(TENANT, 77)


def everyone(layout: RedisLayout) -> list[int]:
    return [u for s in SHARDS for u in shard_users(TENANT, s, 2)]


def everybody(_user: int) -> bool:
    return True


async def scenario(topology: RedisTopology, layout: RedisLayout) -> list:
    """Every call of the three stores over users of every instance; what each answered."""
    s = RedisSessionStore(topology, first_registrations=True)
    r, e = RedisReadPositions(topology), RedisSessionEpochs(topology)
    users = everyone(layout)
    seen: list = []
    # a group message to everyone (the first user sent it), then direct ones across instances
    seen.append(await s.register([Registration(TENANT, u, GROUP, 1000 + i, 4 if i == 0 else 0, 0)
                                  for i, u in enumerate(users)]))
    pairs = list(zip(users, reversed(users)))[:len(users) // 2]
    msgs = [Message(TENANT, ids.conversation_id_direct(TENANT, a, b), 1, 2000 + i, a, [b])
            for i, (a, b) in enumerate(pairs)]
    seen.append(await s.register(registrations(msgs, everybody)))
    for u in users:
        seen.append(await s.conversations(TENANT, u))
        convs = [bytes.fromhex(c.decode()) for _, c in seen[-1]]
        seen.append(await s.peers(TENANT, u, convs))
        seen.append(await s.scores(TENANT, u, [c.hex().encode() for c in convs]))
        seen.append(await s.listed(TENANT, u, GROUP))
        seen.append(await s.mark_checked(TENANT, u, 1))
        seen.append(await s.checked_conversations(TENANT, u))
        await s.set_display_name(TENANT, u, f"name {u}")
        seen.append(await r.mark_read(TENANT, u, GROUP, 3))
        seen.append(await r.positions(TENANT, u, [GROUP] + convs))
        seen.append([await e.next_epoch(TENANT, u, 1) for _ in range(2)])
    await s.set_display_name(TENANT, users[1], "")
    seen.append(await s.display_names(TENANT, users + [404]))
    # the durable path: every shard bound, then one batch over all of them
    seen.append([await s.checkpoint_bind(shard, BINDING, 1) for shard in SHARDS])
    await s.checkpoint_advance(SHARDS[0], BINDING, 1, 0, 2)
    moves = {shard: (1, 2 if shard == SHARDS[0] else 0, 9) for shard in SHARDS}
    late = [Message(TENANT, ids.conversation_id_direct(TENANT, a, b), 2, 3000 + i, b, [a])
            for i, (a, b) in enumerate(pairs)]
    regs = registrations(late, everybody)
    seen.append(await s.project(BINDING, moves, regs))
    seen.append(await s.project(BINDING, moves, regs))  # a retry after a lost reply: passes, adds nothing
    seen.append([await s.checkpoint_bind(shard, BINDING, 1) for shard in SHARDS])
    # the first-registration queue, drained from every instance, oldest first
    seen.append(head := await s.pending_first(5))
    await s.done_first(head)
    seen.append(await s.pending_first(100))
    return seen


async def test_session_state_lands_on_the_users_instance_and_answers_as_on_one(redis_three):
    three = redis_three
    layout = layout3(three)
    one = topology_of(three[0].addr)
    try:
        single = await scenario(one, layout)
    finally:
        await one.aclose()
    three[0].client().flushall()
    topology = topology_of(layout)
    try:
        spread = await scenario(topology, layout)
    finally:
        await topology.aclose()
    assert spread == single  # the same answers in the same order
    users = everyone(layout)
    assert spread[0] == len(users) and len(spread[-1]) + 5 == 2 * len(users)  # 1 group + 1 direct each, 5 drained
    assert [f.first_seen_at_ms for f in spread[-2]] == [1000, 1001, 1002, 1003, 1004]

    addrs = [e.addr for e in three]
    for u in users:
        at = addrs.index(layout.mailbox[layout.user_shard(TENANT, u) % 3])
        for key in (convs_key(TENANT, u), peers_key(TENANT, u), read_key(TENANT, u), convs_checked_key(TENANT, u),
                    session_epoch_key(TENANT, u, 1)):
            assert where(three, key) == [at], key
        assert where(three, name_key(TENANT, u)) == ([] if u == users[1] else [at])
    for shard in SHARDS:
        assert where(three, session_shard_checkpoint_key(shard)) == [addrs.index(layout.mailbox[shard % 3])]
    for i, eng in enumerate(three):  # each queue holds rows of its own users only
        queued = {int(m.split(b":")[1]) for m in eng.client().zrange(ucs_pending_key(), 0, -1)}
        assert queued and all(addrs.index(layout.mailbox[layout.user_shard(TENANT, u) % 3]) == i for u in queued)


async def test_a_refused_shard_leaves_the_registrations_its_moved_neighbour_produced(redis_three):
    """Shard 0 (instance c) and shard 1 (instance a) in one durable batch; shard 0 was
    fenced by a newer owner. Shard 1's record is a direct message from u (a user of
    shard 0, on c) to v: it registers u too. Shard 1's checkpoint moves (its instance's
    call is its own), so u's registration must have run although c's call was refused;
    shard 0's own registration (w) and checkpoint stay as they were."""
    three = redis_three
    layout = layout3(three)
    topology = topology_of(layout)
    s, reads = RedisSessionStore(topology), RedisReadPositions(topology)
    (u, w), (v,) = shard_users(TENANT, 0, 2), shard_users(TENANT, 1, 1)
    direct = ids.conversation_id_direct(TENANT, u, v)
    try:
        for shard in (0, 1):
            await s.checkpoint_bind(shard, BINDING, 1)
        await s.checkpoint_bind(0, BINDING, 2)  # a newer owner took shard 0
        regs = registrations([Message(TENANT, direct, 5, 1000, u, [v]),  # shard 1's record
                              Message(TENANT, GROUP, 1, 1001, w, [w])], everybody)  # shard 0's
        with pytest.raises(NotOwner) as refused:
            await s.project(BINDING, {0: (1, 0, 1), 1: (1, 0, 1)}, regs)
        assert refused.value.shard == 0
        addrs = [e.addr for e in three]
        c, a = (three[addrs.index(layout.mailbox[shard])].client() for shard in (0, 1))
        assert a.hget(session_shard_checkpoint_key(1), "p") == b"1"  # shard 1 moved ...
        assert await s.conversations(TENANT, v) == [(1000, direct.hex().encode())]
        assert await s.conversations(TENANT, u) == [(1000, direct.hex().encode())]  # ... after u's registration
        assert await reads.positions(TENANT, u, [direct]) == [5] and await s.peers(TENANT, u, [direct]) == [v]
        assert c.hget(session_shard_checkpoint_key(0), "p") == b"0"  # shard 0: nothing of its call
        assert await s.conversations(TENANT, w) == []
        # the projector drops the refused shard and writes the rest again: recognised, nothing added
        assert await s.project(BINDING, {1: (1, 0, 1)}, registrations(
            [Message(TENANT, direct, 5, 1000, u, [v])], everybody)) == 0
    finally:
        await topology.aclose()


class Recorded:
    """A ConversationStateStore that records what it was given (the drain's target)."""

    def __init__(self) -> None:
        self.batches: list[list] = []

    async def register(self, rows) -> None:
        self.batches.append(list(rows))

    async def conversations(self, tenant: int, user: int) -> list:
        return [r for b in self.batches for r in b if (r.tenant, r.user) == (tenant, user)]


async def test_the_drainer_takes_every_instances_queue_oldest_first(redis_three, monkeypatch):
    from qim.services.session import firstreg

    three = redis_three
    layout = layout3(three)
    topology = topology_of(layout)
    s = RedisSessionStore(topology, first_registrations=True)
    users = everyone(layout)
    monkeypatch.setattr(firstreg, "DRAIN_BATCH", 3)
    try:
        await s.register([Registration(TENANT, u, GROUP, 1000 + i, 0, 0) for i, u in enumerate(users)])
        assert all(e.client().zcard(ucs_pending_key()) > 0 for e in three)  # every instance queued its own
        table = Recorded()
        drainer = firstreg.FirstRegistrations(s, table)
        while await drainer.drain_once():
            pass
        assert [[r.first_seen_at_ms for r in b] for b in table.batches] == [
            [1000 + i for i in range(k, min(k + 3, len(users)))] for k in range(0, len(users), 3)]
        assert [r.user for b in table.batches for r in b] == users
        assert [e.client().zcard(ucs_pending_key()) for e in three] == [0, 0, 0]
    finally:
        await topology.aclose()
