"""One Redis instance down must not stall the durable session projection of the shards
on the other instances (issue 35 §1; docs/decisions/0097, Amendment).

Real broker and three standalone Redis instances of the test's own, layout as
`qim-dev engines up --redis-instances 3` (mailbox instance of shard s: s mod 3), the
DurableProjector of one node serving all 8 session shards. Every shard gets records of
its own users; then one instance is stopped and more records come for every shard, plus
a direct message whose sender lives on the stopped instance, dispatched to a shard on a
healthy one (its sender registration must be written before that shard's checkpoint
moves: sessionsplit.py), and more records of the held shards while they are held.
While the instance is down, the shards of the two others
advance their checkpoints and lists; the stopped instance's shards, and the shard
whose sender registration needs it, stay where they were. Restarted (AOF), every shard
catches up: every conversation in every list with its newest created_at_ms, the
sender's registration there, each checkpoint at its partition's end.
"""

from __future__ import annotations

import asyncio

import pytest

from qim._core import ids
from qim._core.types import MessageCoord
from qim.consts import DISPATCH_TOPIC
from qim.dev.redis_instances import layout_of
from qim.infra.kafka.bridge import AsyncProducer
from qim.services.session.consumer import DurableProjector
from qim.services.session.register import Message, registrations
from qim.stores.errors import ShardsUnavailable
from qim.stores.redis.keys import convs_key, read_key, session_shard_checkpoint_key
from qim.stores.redis.sessions import RedisSessionStore
from qim.stores.redis.topology import topology_of
from qim.wire import dispatch as dispatch_record
from tests.fixtures import TEST_SHARD_COUNT

TENANT = 0
DEADLINE_S = 90.0
BASE_MS = 1_700_000_000_000




def users_of(shard: int, n: int) -> list[int]:
    """The first `n` user ids whose MailboxShard is `shard`."""
    out, user = [], 1
    while len(out) < n:
        if ids.mailbox_shard(TENANT, user, TEST_SHARD_COUNT) == shard:
            out.append(user)
        user += 1
    return out


def record(shard: int, conv: bytes, seq: int, sender: int, recipients: tuple[int, ...]) -> bytes:
    mid = ids.compose_message_id(BASE_MS + seq, 0, 0, 1)
    return dispatch_record.Dispatch(
        tenant=TENANT, dispatch_id=ids.dispatch_id(mid, shard),
        coord=MessageCoord(mid, conv, seq, sender, BASE_MS + seq, 1, b""),
        target_shard=shard, client_message_id=bytes(range(1, 17)), recipients=recipients, body=None).encode()


def group(shard: int, phase: int) -> bytes:
    return ids.conversation_id_group(TENANT, 100 * phase + shard + 1)


async def produce(addr: str, items: list[tuple[int, bytes]]) -> None:
    producer = AsyncProducer(addr)
    for shard, value in items:
        await producer.produce(DISPATCH_TOPIC, value, partition=shard)
    await producer.close()


async def until(what: str, cond, proj: DurableProjector, task: asyncio.Task) -> None:
    """Poll `cond()` until true; fail on the deadline or when the projection ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not cond():
        assert not proj.stopped and not task.done(), proj.stopped or "projection ended"
        assert loop.time() < deadline, (what, proj.next, sorted(getattr(proj, "held", {})))
        await asyncio.sleep(0.1)


async def test_one_instance_down_holds_back_only_its_shards(private_kafka, redis_three):
    addrs = [e.addr for e in redis_three]
    layout = layout_of(addrs, TEST_SHARD_COUNT)
    down_addr = layout.mailbox[0]
    down_engine = redis_three[addrs.index(down_addr)]
    on = {s: redis_three[addrs.index(layout.mailbox[s % 3])].client() for s in range(TEST_SHARD_COUNT)}
    down = {s for s in range(TEST_SHARD_COUNT) if layout.mailbox[s % 3] == down_addr}
    users = {s: users_of(s, 2) for s in range(TEST_SHARD_COUNT)}
    # a direct message from a user of a down shard to one of a healthy shard, dispatched
    # to the healthy one: it registers the sender on the down instance too
    needy = min(s for s in range(TEST_SHARD_COUNT) if s not in down)
    healthy = {s for s in range(TEST_SHARD_COUNT) if s not in down and s != needy}
    sender, peer = users[min(down)][0], users[needy][1]
    direct = ids.conversation_id_direct(TENANT, sender, peer)

    topology = topology_of(layout)
    proj = DurableProjector(private_kafka.addr, RedisSessionStore(topology), TEST_SHARD_COUNT, lambda regs: None,
                            shards=range(TEST_SHARD_COUNT))
    await proj.start()
    task = asyncio.get_running_loop().create_task(proj.run())

    def ckpt(shard: int) -> int:
        return int(on[shard].hget(session_shard_checkpoint_key(shard), "p") or 0)

    def listed(shard: int, conv: bytes) -> list:
        return [on[shard].zscore(convs_key(TENANT, u), conv.hex()) for u in users[shard]]

    def at(shards, offset: int) -> bool:
        return all(ckpt(s) == offset for s in shards)

    try:
        # phase 1: everything up, one group message per shard among its own users
        await produce(private_kafka.addr, [(s, record(s, group(s, 1), 10 + s, users[s][0], tuple(users[s])))
                                           for s in range(TEST_SHARD_COUNT)])
        await until("every shard at 1", lambda: at(range(TEST_SHARD_COUNT), 1), proj, task)

        await asyncio.to_thread(down_engine.stop)  # the projection runs on meanwhile
        # phase 2 while it is down: two records per shard, and the direct message
        await produce(private_kafka.addr,
                      [(s, record(s, group(s, 2), 20 + s, users[s][1], tuple(users[s]))) for s in range(8)]
                      + [(s, record(s, group(s, 3), 30 + s, users[s][0], tuple(users[s]))) for s in range(8)]
                      + [(needy, record(needy, direct, 40, sender, (peer,)))])
        # (the store's reply waits for the down instance's call to fail too)
        await until("healthy shards advance", lambda: at(healthy, 3) and all(proj.next[s] == 3 for s in healthy),
                    proj, task)
        for s in healthy:
            assert listed(s, group(s, 2)) == [BASE_MS + 20 + s] * 2
            assert listed(s, group(s, 3)) == [BASE_MS + 30 + s] * 2
        # the down instance's shards and the one whose sender registration needs it are
        # held at their checkpoint (the records read are kept, nothing skipped)
        await until("held", lambda: sorted(proj.held) == sorted(down | {needy}), proj, task)
        # the needy shard holds at 1 when its two group records and the direct one came in
        # one poll, or at 3 when the group records were written in a poll before the direct
        # one's (a loaded machine); never past the direct record (offset 3)
        assert all(proj.next[s] == 1 for s in down)
        assert proj.next[needy] in (1, 3) and ckpt(needy) == proj.next[needy]
        # (its own users' registrations may be written already: the same order-independent
        # write runs again with its checkpoint, changing nothing)
        # more records of the held shards while they are held: kept after what they hold
        await produce(private_kafka.addr, [(s, record(s, group(s, 5), 60 + s, users[s][1], tuple(users[s])))
                                           for s in sorted(down)])
        await asyncio.sleep(2.0)  # let them be read, if they are read before the restart

        await asyncio.to_thread(down_engine.start)  # its AOF brings back what it had
        # the positions with the checkpoints: a served shard's position is set after the
        # write, and after the release of a shard served before it in the same batch (an
        # await), so a poll may see every checkpoint written and nothing held while a
        # position is still being set (CI, 2026-12-07)
        await until("every shard caught up",
                    lambda: at(healthy, 3) and at(down | {needy}, 4) and not proj.held
                    and all(proj.next[s] == (3 if s in healthy else 4) for s in range(8)), proj, task)
        for s in range(TEST_SHARD_COUNT):  # nothing missing, each with its newest created_at_ms
            for phase, seq in ((1, 10), (2, 20), (3, 30)) + (((5, 60),) if s in down else ()):
                assert listed(s, group(s, phase)) == [BASE_MS + seq + s] * 2, (s, phase)
        sender_on = on[min(down)]
        assert sender_on.zscore(convs_key(TENANT, sender), direct.hex()) == BASE_MS + 40
        assert sender_on.hget(read_key(TENANT, sender), direct.hex()) == b"40"  # sending marks read
        assert on[needy].zscore(convs_key(TENANT, peer), direct.hex()) == BASE_MS + 40

        # and the partitions held resumed: a later record of a held shard is projected
        again = min(down)
        await produce(private_kafka.addr, [(again, record(again, group(again, 4), 50, users[again][0],
                                                          tuple(users[again])))])
        await until("resumed", lambda: at([again], 5) and proj.next[again] == 5, proj, task)
        assert listed(again, group(again, 4)) == [BASE_MS + 50] * 2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await proj.close()
        await topology.aclose()


async def test_project_names_the_shards_it_could_not_write(redis_three):
    """The store half: one project call over every shard with one instance stopped
    writes the shards of the other two (checkpoint and registrations) and raises
    ShardsUnavailable naming exactly the stopped instance's shards and the shard whose
    direct sender registration lives there; retried once it is back, it writes them."""
    addrs = [e.addr for e in redis_three]
    layout = layout_of(addrs, TEST_SHARD_COUNT)
    down_engine = redis_three[addrs.index(layout.mailbox[0])]
    down = {s for s in range(TEST_SHARD_COUNT) if layout.mailbox[s % 3] == layout.mailbox[0]}
    needy = min(s for s in range(TEST_SHARD_COUNT) if s not in down)
    users = {s: users_of(s, 2) for s in range(TEST_SHARD_COUNT)}
    sender, peer = users[min(down)][0], users[needy][1]
    direct = ids.conversation_id_direct(TENANT, sender, peer)
    msgs = {s: [Message(TENANT, group(s, 1), 10 + s, BASE_MS + 10 + s, users[s][0], users[s])]
            for s in range(TEST_SHARD_COUNT)}
    msgs[needy].append(Message(TENANT, direct, 40, BASE_MS + 40, sender, [peer]))
    topology = topology_of(layout)
    store = RedisSessionStore(topology)
    binding = "cluster|topic|8"
    try:
        for s in range(TEST_SHARD_COUNT):
            await store.checkpoint_bind(s, binding, 1)
        moves = {s: (1, 0, len(msgs[s])) for s in range(TEST_SHARD_COUNT)}
        await asyncio.to_thread(down_engine.stop)
        with pytest.raises(ShardsUnavailable) as held:
            await store.project(binding, moves, registrations([m for s in moves for m in msgs[s]], lambda u: True))
        assert held.value.shards == sorted(down | {needy})
        for s in range(TEST_SHARD_COUNT):
            if s in down:
                continue
            client = redis_three[addrs.index(layout.mailbox[s % 3])].client()
            assert int(client.hget(session_shard_checkpoint_key(s), "p")) == (0 if s == needy else 1)
            assert client.zscore(convs_key(TENANT, users[s][1]), group(s, 1).hex()) == BASE_MS + 10 + s
        await asyncio.to_thread(down_engine.start)
        again = {s: moves[s] for s in held.value.shards}
        await store.project(binding, again, registrations([m for s in again for m in msgs[s]], lambda u: True))
        for s in range(TEST_SHARD_COUNT):
            client = redis_three[addrs.index(layout.mailbox[s % 3])].client()
            assert int(client.hget(session_shard_checkpoint_key(s), "p")) == len(msgs[s])
        assert down_engine.client().zscore(convs_key(TENANT, sender), direct.hex()) == BASE_MS + 40
    finally:
        await topology.aclose()


class Polled:
    """A dispatch record as the consumer hands it over (partition, offset, value)."""

    def __init__(self, shard: int, offset: int, value: bytes) -> None:
        self._p, self._o, self._v = shard, offset, value

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes:
        return self._v


class Assigned:
    """The projector's consumer seam: which partitions it paused and resumed."""

    def __init__(self) -> None:
        self.paused: set[int] = set()

    async def pause(self, topic: str, partitions: list[int]) -> None:
        self.paused.update(partitions)

    async def resume(self, topic: str, partitions: list[int]) -> None:
        self.paused.difference_update(partitions)


async def test_records_read_while_held_are_written_after_the_held_ones(redis_three):
    """Records of a held shard that were already fetched (read after its hold) are kept
    after what it holds: its retry repeats its attempt exactly, then they follow; the
    partition is paused while held and resumed after. Polls are handed to `_batch`
    directly (the broker's part is the other test's), the store is three real instances."""
    addrs = [e.addr for e in redis_three]
    layout = layout_of(addrs, TEST_SHARD_COUNT)
    down_engine = redis_three[addrs.index(layout.mailbox[0])]
    down = sorted(s for s in range(TEST_SHARD_COUNT) if layout.mailbox[s % 3] == layout.mailbox[0])
    users = {s: users_of(s, 2) for s in range(TEST_SHARD_COUNT)}
    topology = topology_of(layout)
    store = RedisSessionStore(topology)
    proj = DurableProjector("127.0.0.1:1", store, TEST_SHARD_COUNT, lambda regs: None)
    real_consumer, proj._consumer = proj._consumer, Assigned()
    proj._binding = binding = "cluster|topic|8"
    for s in range(TEST_SHARD_COUNT):
        await store.checkpoint_bind(s, binding, 1, f"t{s}")
        proj.next[s], proj.fences[s], proj.tenures[s] = 0, 1, f"t{s}"

    def poll(offset: int, shards) -> list:
        return [Polled(s, offset, record(s, group(s, offset), 10 * offset + s, users[s][0], tuple(users[s])))
                for s in shards]

    def ckpt(s: int) -> int:
        return int(redis_three[addrs.index(layout.mailbox[s % 3])].client().hget(session_shard_checkpoint_key(s), "p"))

    try:
        await asyncio.to_thread(down_engine.stop)
        # (bounded: a projector that retries the whole batch in place never returns here)
        await asyncio.wait_for(proj._batch(poll(0, range(TEST_SHARD_COUNT))), 30.0)
        assert sorted(proj.held) == down and proj._consumer.paused == set(down)
        assert all(proj.next[s] == 1 == ckpt(s) for s in range(TEST_SHARD_COUNT) if s not in down)
        await asyncio.wait_for(proj._batch(poll(1, down) + poll(0, down)), 30.0)  # fetched before the pause took; a repeat is skipped
        assert all((proj.held[s].expected, proj.held[s].new, proj.held[s].later.new) == (0, 1, 2) for s in down)
        await asyncio.to_thread(down_engine.start)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while proj.held:
            assert loop.time() < deadline, {s: (h.expected, h.new, h.retry_at) for s, h in proj.held.items()}
            await asyncio.wait_for(proj._batch([]), 30.0)
            await asyncio.sleep(0.1)
        assert proj._consumer.paused == set()
        for s in down:
            assert proj.next[s] == 2 == ckpt(s)
            client = down_engine.client()
            for offset in (0, 1):
                assert client.zscore(convs_key(TENANT, users[s][1]), group(s, offset).hex()) == BASE_MS + 10 * offset + s
    finally:
        await real_consumer.close()
        await topology.aclose()
