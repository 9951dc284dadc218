"""A node lease that lapsed is told once renewed (qim/cluster/keeper.py `on_lapsed`;
docs/decisions/0154): the registry stops answering past the lease (its Redis
SIGSTOPped), then answers again; the keeper of a node lease only (a gateway's: no
shards) calls `on_lapsed(seconds)` once, after the first renewal that follows, and never
while renewals keep succeeding; `qim_node_lease_lapses_total` counts it. On a real Redis
(the registry of tests/cluster)."""

from __future__ import annotations

import asyncio
import os
import signal

from qim.cluster.keeper import ShardKeeper
from qim.cluster.metrics import ShardMetrics
from qim.infra.redis.client import connect
from qim.stores.redis.registry import RedisShardRegistry
from tests.cluster.test_keeper import until

TTL_MS, RENEW_MS = 1200, 300


async def test_a_lapse_is_told_once_after_the_renewal_that_ends_it(private_redis):
    client = connect(private_redis.addr)
    metrics = ShardMetrics()
    keeper = ShardKeeper(RedisShardRegistry(client), "gateway", "gateway@lapse", 0, TTL_MS, RENEW_MS, addr="x:1",
                         metrics=metrics)
    lapses = metrics.lapses.labels(kind="gateway")
    told: list[float] = []
    keeper.on_lapsed = told.append
    await keeper.join()
    task = asyncio.get_running_loop().create_task(keeper.run())
    try:
        await asyncio.sleep(TTL_MS / 1000 * 2)  # renewals go on: no lapse
        assert told == [] and lapses._value.get() == 0
        os.kill(private_redis.pid, signal.SIGSTOP)  # the registry away past the lease
        try:
            await asyncio.sleep(TTL_MS / 1000 * 2.5)
            assert told == []  # not before a renewal succeeds
        finally:
            os.kill(private_redis.pid, signal.SIGCONT)
        await until(lambda: bool(told), 10)
        assert len(told) == 1 and told[0] > 0.5, told  # seconds since the registry's expiry, about
        assert lapses._value.get() == 1
        await asyncio.sleep(TTL_MS / 1000 * 2)
        assert len(told) == 1 and lapses._value.get() == 1  # once per lapse
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.aclose()
