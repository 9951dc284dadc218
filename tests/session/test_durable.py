"""The durable dispatch consumer on a real broker and Redis of the test's own: one
checkpoint per session shard bound to cluster id + topic id + partition count,
compare-and-set advance (a second writer is refused), fail closed on a foreign binding,
a position past the log end and an undecodable record; resuming from the checkpoint of
the single-node layout before shard leases."""

from __future__ import annotations

import asyncio

import pytest

from qim._core import ids
from qim._core.types import MessageCoord
from qim.consts import DISPATCH_TOPIC
from qim.infra.kafka.bridge import AsyncProducer
from qim.infra.redis.client import connect
from qim.services.session.consumer import DurableProjector
from qim.stores.errors import CheckpointConflict
from qim.stores.redis.keys import convs_key, read_key, session_shard_checkpoint_key
from qim.stores.redis.sessions import RedisSessionStore
from qim.wire import dispatch as dispatch_record
from tests.fixtures import TEST_SHARD_COUNT


def dispatch(partition: int, seq: int, sender: int, recipients: tuple[int, ...]) -> bytes:
    conv = ids.conversation_id_direct(0, 5, 9)
    mid = ids.compose_message_id(1_700_000_000_000 + seq, 0, 0, 1)
    return dispatch_record.Dispatch(
        tenant=0, dispatch_id=ids.dispatch_id(mid, partition),
        coord=MessageCoord(mid, conv, seq, sender, 1_700_000_000_000 + seq, 1, b""),
        target_shard=partition, client_message_id=bytes(range(1, 17)), recipients=recipients,
        body=None).encode()


class Harness:
    def __init__(self, kafka, redis_addr: str) -> None:
        self.kafka = kafka
        self.redis = connect(redis_addr)
        self.sessions = RedisSessionStore(self.redis)
        self.marked: list = []

    def projector(self) -> DurableProjector:
        return DurableProjector(self.kafka.addr, self.sessions, TEST_SHARD_COUNT, self.marked.extend,
                                shards=range(TEST_SHARD_COUNT))

    async def produce(self, partition: int, value: bytes) -> None:
        producer = AsyncProducer(self.kafka.addr)
        await producer.produce(DISPATCH_TOPIC, value, partition=partition)
        await producer.close()


async def run_until(proj: DurableProjector, cond, timeout: float = 20.0) -> asyncio.Task:
    task = asyncio.get_running_loop().create_task(proj.run())
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, proj.not_ready()
        assert not task.done() or proj.stopped, "consumer ended"
        await asyncio.sleep(0.05)
    return task


async def stop(proj: DurableProjector, task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await proj.close()


@pytest.fixture
def harness(private_kafka, private_redis):
    return Harness(private_kafka, private_redis.addr)


async def test_checkpoint_binds_resumes_and_fails_closed(harness):
    h = harness
    conv_hex = ids.conversation_id_direct(0, 5, 9).hex()
    await h.produce(0, dispatch(0, 1, 9, (5,)))  # 9 -> 5, dispatch to 5's shard
    await h.produce(3, dispatch(3, 2, 5, (5, 9)))  # 5 -> 9, both on one shard
    proj = h.projector()
    await proj.start()
    assert proj.not_ready() == "durable projection not running"
    task = await run_until(proj, lambda: proj.not_ready() is None)
    assert await h.redis.zscore(convs_key(0, 5), conv_hex) == 1_700_000_000_002
    assert await h.redis.hget(read_key(0, 5), conv_hex) == b"2"  # sending marks read
    assert ((0, 5), bytes.fromhex(conv_hex)) in [((r.tenant, r.user), r.conversation_id) for r in h.marked]
    ckpt = {p: await h.redis.hgetall(session_shard_checkpoint_key(p)) for p in range(TEST_SHARD_COUNT)}
    assert ckpt[0][b"p"] == b"1" and ckpt[3][b"p"] == b"1" and ckpt[1][b"p"] == b"0"
    cluster, topic_id, parts = ckpt[0][b"bind"].decode().split("|")
    assert cluster and topic_id and int(parts) == TEST_SHARD_COUNT
    await stop(proj, task)

    # compare-and-set: an advance from a position that is not the stored one (a second
    # owner of the same checkpoint) is refused and changes nothing
    with pytest.raises(CheckpointConflict) as conflict:
        await h.sessions.checkpoint_advance(4, ckpt[4][b"bind"].decode(), 0, 7, 9)
    assert conflict.value.reason == "QIM_CKPT_CONFLICT"
    assert await h.redis.hget(session_shard_checkpoint_key(4), "p") == b"0"

    # resumes from its checkpoint: a later record is projected, the old ones not re-read
    await h.produce(0, dispatch(0, 3, 9, (5,)))
    proj = h.projector()
    await proj.start()
    assert proj.next[0] == 1
    task = await run_until(proj, lambda: proj.not_ready() is None)
    assert await h.redis.hget(session_shard_checkpoint_key(0), "p") == b"2"
    await stop(proj, task)

    # bound to another topic id (same-name topic re-created, or another cluster): closed
    await h.redis.hset(session_shard_checkpoint_key(2), "bind", f"{cluster}|AAAAAAAAAAAAAAAAAAAAAA|{parts}")
    proj = h.projector()
    await proj.start()
    assert "checkpoint bound to" in proj.not_ready() and "failed closed" in proj.not_ready()
    await proj.run()  # returns at once: nothing is consumed
    await proj.close()

    # a position past the log end (e.g. a re-created topic behind the same id): closed
    await h.redis.hset(session_shard_checkpoint_key(2), mapping={"bind": ckpt[2][b"bind"], "p": "0"})
    await h.redis.hset(session_shard_checkpoint_key(5), mapping={"bind": ckpt[5][b"bind"], "p": "999"})
    proj = h.projector()
    await proj.start()
    assert "past the log end" in proj.not_ready()
    await proj.close()


async def test_an_undecodable_record_stops_the_consumer_without_skipping_it(harness):
    h = harness
    await h.produce(2, dispatch(2, 1, 9, (5,)))
    await h.produce(2, b"\x01garbage")
    await h.produce(2, dispatch(2, 3, 9, (5,)))
    proj = h.projector()
    await proj.start()
    task = await run_until(proj, lambda: bool(proj.stopped))
    await asyncio.wait_for(task, 5)
    assert "partition 2 offset 1" in proj.not_ready()
    # the good record before it may be projected; the position never passes the bad one
    assert int(await h.redis.hget(session_shard_checkpoint_key(2), "p")) <= 1
    await proj.close()


async def test_a_shard_resumes_from_the_single_node_checkpoint_of_before_shard_leases(harness):
    h = harness
    for seq in (1, 2, 3):
        await h.produce(6, dispatch(6, seq, 9, (5,)))
    proj = h.projector()
    await proj.start()  # learns the binding, creates every shard's checkpoint; forget them again
    binding = (await h.redis.hgetall(session_shard_checkpoint_key(0)))[b"bind"]
    await proj.close()
    for p in range(TEST_SHARD_COUNT):
        await h.redis.delete(session_shard_checkpoint_key(p))
    # the layout before: one HASH for the single node, one field per partition
    await h.redis.hset("qim:session:ckpt:0of1", mapping={"bind": binding, "p6": "2"})
    proj = h.projector()
    await proj.start()
    assert proj.next[6] == 2 and proj.next[0] == 0  # resumed, not replayed from 0
    task = await run_until(proj, lambda: proj.not_ready() is None)
    await stop(proj, task)
    assert await h.redis.hget(session_shard_checkpoint_key(6), "p") == b"3"

