"""The durable projection's Redis work is one round trip per consumer poll (issue 12:
registrations and the checkpoint advance were two), and the checkpoint still never
moves past a registration that failed. Real broker and Redis of the test's own."""

from __future__ import annotations

import pytest

from qim.stores.errors import StorageError
from qim.stores.redis.keys import convs_key, session_shard_checkpoint_key
from qim.stores.redis.scripts import load_source
from qim.stores.sessions import Registration
from tests.session.test_durable import Harness, dispatch, run_until, stop
from tests.writer.test_send_round_trips import RoundTrips


@pytest.fixture
def harness(private_kafka, private_redis):
    return Harness(private_kafka, private_redis.addr)


async def test_one_round_trip_per_poll(harness, monkeypatch):
    h = harness
    for seq in range(1, 41):  # 40 records on 4 partitions, each to 3 recipients
        part = seq % 4
        await h.produce(part, dispatch(part, seq, 9, (5, 9, 11)))
    proj = h.projector()
    await proj.start()
    for name in ("session_register", "session_checkpoint", "session_project"):
        await h.redis.script_load(load_source(name))  # no NOSCRIPT reload in the count
    trips = RoundTrips(h.redis, monkeypatch)
    batches = 0
    project = proj._batch

    async def counted(msgs):
        nonlocal batches
        batches += 1
        await project(msgs)

    monkeypatch.setattr(proj, "_batch", counted)
    task = await run_until(proj, lambda: proj.not_ready() is None)
    await stop(proj, task)
    round_trips = trips.count
    assert [int(await h.redis.hget(session_shard_checkpoint_key(p), "p")) for p in range(4)] == [10, 10, 10, 10]
    assert batches >= 1
    assert round_trips == batches, (round_trips, batches)


async def test_a_failed_registration_keeps_the_checkpoint(harness):
    h = harness
    proj = h.projector()
    await proj.start()
    binding = (await h.redis.hget(session_shard_checkpoint_key(1), "bind")).decode()
    conv = bytes(range(16))
    await h.redis.set(convs_key(0, 7), "not a zset")  # a corrupt key: the script errors
    good = Registration(0, 5, conv, 1_700_000_000_000, 0, 0)
    bad = Registration(0, 7, conv, 1_700_000_000_000, 0, 0)
    with pytest.raises(StorageError):
        await h.sessions.project(binding, {1: (0, 0, 4)}, [good, bad])
    assert await h.redis.hget(session_shard_checkpoint_key(1), "p") == b"0"
    # the retry after repair writes both and moves; the same batch again (a lost reply) passes
    await h.redis.delete(convs_key(0, 7))
    assert await h.sessions.project(binding, {1: (0, 0, 4)}, [good, bad]) == 1
    assert await h.sessions.project(binding, {1: (0, 0, 4)}, [good, bad]) == 0
    assert await h.redis.hget(session_shard_checkpoint_key(1), "p") == b"4"
    await proj.close()
