"""Registration: which (user, conversation) a message registers, and the one script both
projection paths share, on a real Redis. The seed lost registrations when the two paths
wrote differently and their arrival order mattered: every order must give one state."""

from __future__ import annotations

import itertools
import random

import pytest

from qim._core import ids
from qim.infra.redis.client import connect
from qim.services.session.register import Message, Registration, from_message, merge, registrations
from qim.stores.redis.keys import convs_key, peers_key, read_key
from qim.stores.redis.sessions import RedisReadPositions, RedisSessionStore

DIRECT = ids.conversation_id_direct(0, 5, 9)
GROUP = ids.conversation_id_group(0, 77)
EVERYONE = lambda user: True  # noqa: E731


def test_recipient_dispatch_registers_recipient_and_mirrors_the_sender():
    regs = from_message(0, DIRECT, 4, 1000, sender=5, users=[9], owns=EVERYONE)
    assert regs == [Registration(0, 9, DIRECT, 1000, 0, 5),   # peer = the sender
                    Registration(0, 5, DIRECT, 1000, 4, 9)]   # sending marks read; peer learned


def test_sender_own_dispatch_marks_read_and_owns_filters():
    assert from_message(0, DIRECT, 4, 1000, 5, [5, 9], owns=lambda u: u == 5) == [Registration(0, 5, DIRECT, 1000, 4, 9)]
    assert from_message(0, DIRECT, 4, 1000, 5, [9], owns=lambda u: u == 9) == [Registration(0, 9, DIRECT, 1000, 0, 5)]


def test_group_registrations_have_no_peer():
    regs = from_message(0, GROUP, 7, 50, sender=1, users=[1, 2, 3], owns=EVERYONE)
    assert [(r.user, r.own_seq, r.peer) for r in regs] == [(1, 7, 0), (2, 0, 0), (3, 0, 0)]


def test_rooms_and_garbage_ids_are_refused():
    with pytest.raises(ValueError):
        from_message(0, ids.conversation_id_room(0, 3), 1, 1, 1, [1], EVERYONE)
    with pytest.raises(ValueError):
        from_message(0, bytes(16), 1, 1, 1, [1], EVERYONE)


def test_merge_keeps_the_newest_activity_highest_own_seq_and_a_known_peer():
    a = Registration(0, 5, DIRECT, 10, 3, 0)
    b = Registration(0, 5, DIRECT, 30, 0, 9)
    c = Registration(0, 5, DIRECT, 20, 6, 0)
    for order in itertools.permutations([a, b, c]):
        assert merge(order) == [Registration(0, 5, DIRECT, 30, 6, 9)]


async def _state(r, user: int):
    return (await r.zrange(convs_key(0, user), 0, -1, withscores=True), await r.hgetall(read_key(0, user)),
            await r.hgetall(peers_key(0, user)))


def _reference(messages, owns):
    """The definition registrations() must match: every message's from_message(), merged."""
    return merge([r for m in messages for r in from_message(*m, owns)])


@pytest.mark.parametrize("seed", range(40))
def test_a_batch_collapsed_per_recipient_list_registers_what_each_message_would(seed):
    rnd = random.Random(seed)
    groups = [ids.conversation_id_group(0, g) for g in (77, 78)]
    lists = [tuple(range(100, 100 + rnd.randint(1, 40))) for _ in range(3)]  # membership changing mid-batch
    messages = []
    for seq in range(1, rnd.randint(2, 60)):
        if rnd.random() < 0.3:  # a direct message, the sender listed or not
            a, b = rnd.sample(range(100, 110), 2)
            messages.append(Message(0, ids.conversation_id_direct(0, min(a, b), max(a, b)), seq,
                                    rnd.randint(1000, 2000), a, rnd.choice([[b], [a, b]])))
        else:
            users = rnd.choice(lists)
            sender = rnd.choice(users + (999,))  # a sender on another shard is not among the recipients
            messages.append(Message(rnd.choice([0, 1]), rnd.choice(groups), seq, rnd.randint(1000, 2000), sender,
                                    list(users)))
    owns = rnd.choice([EVERYONE, lambda u: u % 3 != 0])
    got = registrations(messages, owns)
    assert sorted(got) == sorted(_reference(messages, owns))
    assert len({(r.tenant, r.user, r.conversation_id) for r in got}) == len(got)  # one per (user, conversation)


def test_registrations_refuse_a_room_message():
    room = ids.conversation_id_room(0, 5)
    with pytest.raises(ValueError):
        registrations([Message(0, room, 1, 1000, 5, [9])], EVERYONE)


async def test_both_paths_in_any_order_reach_one_state(private_redis):
    """Messages 1 (seq 1, from 9) and 2 (seq 2, from 5), each seen by the durable path
    (recipient dispatch + mirror) and the low-latency path (recipient list), in every
    interleaving, including a late replay of the old message after the new one."""
    r = connect(private_redis.addr)
    registrar = RedisSessionStore(r)
    m1 = from_message(0, DIRECT, 1, 1000, sender=9, users=[5], owns=EVERYONE)
    m2 = from_message(0, DIRECT, 2, 2000, sender=5, users=[9], owns=EVERYONE)
    low1 = from_message(0, DIRECT, 1, 1000, sender=9, users=[5, 9], owns=EVERYONE)
    batches = [m1, m2, low1]
    states = set()
    for order in itertools.permutations(batches):
        await r.flushdb()
        for batch in order:
            await registrar.register(batch)
        await registrar.register(m1)  # a replay after a crash
        states.add(repr(await _state(r, 5)) + repr(await _state(r, 9)))
    assert len(states) == 1
    convs, read, peers = await _state(r, 5)
    assert convs == [(DIRECT.hex().encode(), 2000.0)]
    assert read == {DIRECT.hex().encode(): b"2"}  # user 5 sent seq 2
    assert peers == {DIRECT.hex().encode(): b"9"}
    convs9, read9, peers9 = await _state(r, 9)
    assert convs9 == [(DIRECT.hex().encode(), 2000.0)] and read9 == {DIRECT.hex().encode(): b"1"}
    assert peers9 == {DIRECT.hex().encode(): b"5"}
    await r.aclose()


async def test_registration_reports_new_conversations_and_read_never_moves_back(private_redis):
    r = connect(private_redis.addr)
    registrar, reads = RedisSessionStore(r), RedisReadPositions(r)
    assert await registrar.register([Registration(0, 5, GROUP, 10, 8, 0)]) == 1
    assert await registrar.register([Registration(0, 5, GROUP, 5, 3, 0)]) == 0
    assert await r.hget(read_key(0, 5), GROUP.hex()) == b"8"
    assert await reads.mark_read(0, 5, GROUP, 6) == (8, False)
    assert await reads.mark_read(0, 5, GROUP, 12) == (12, True)
    assert await r.zscore(convs_key(0, 5), GROUP.hex()) == 10.0
    await r.script_flush()  # the batch path reloads by SHA after NOSCRIPT
    assert await registrar.register([Registration(0, 6, GROUP, 1, 0, 0)]) == 1
    await r.aclose()
