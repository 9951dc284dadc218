"""PresenceFollower (qim/cluster/presence.py) on a broker of the test's own, fresh as a
new deployment's: an entry published after the shard was added reaches `gateways_of` and
wakes the device (`on_online`), and an entry already in the partition is read back as
the past (no wake-up). The follower starts its partitions at EARLIEST, so it never waits
for the group coordinator (docs/decisions/0060-offsets-off-the-fetch-connection.md)."""

from __future__ import annotations

import asyncio
import time

from qim.cluster.presence import PresenceFollower, now_ms
from qim.consts import PRESENCE_TOPIC
from qim.infra.kafka.bridge import AsyncProducer
from qim.wire.presence import PresenceKey, encode_entry, encode_key

GW, SINCE, SHARD = "gateway@127.0.0.1:1", 1_000, 3


async def until(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"{what} not within {timeout} s"
        await asyncio.sleep(0.05)


async def test_a_follower_on_a_fresh_broker_reads_its_partition_at_once(private_kafka):
    bootstrap = private_kafka.bootstrap
    producer = AsyncProducer(bootstrap)
    woken: list[PresenceKey] = []
    old, new = PresenceKey(0, 41, 1, GW), PresenceKey(0, 42, 7, GW)

    def publish(key: PresenceKey):
        entry = encode_entry("inc-1", SINCE, 1, now_ms() + 60_000)
        return producer.produce(PRESENCE_TOPIC, entry, key=encode_key(key), partition=SHARD)

    follower = PresenceFollower(bootstrap, "qim-test-presence", lambda: {GW: SINCE}, on_online=woken.append)
    task = asyncio.get_running_loop().create_task(follower.run())
    try:
        await publish(old)  # already there when the shard is added: the past
        await follower.add_shard(SHARD)
        await until(lambda: follower.gateways_of(SHARD, 0, old.user) == {GW}, 20, "the entry written before")
        await publish(new)
        await until(lambda: follower.gateways_of(SHARD, 0, new.user) == {GW}, 20, "the entry written after")
        assert woken == [new]  # the device that logged in now is woken, the one from before is not
        assert follower.gateways_of(SHARD, 0, 99) == set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await follower.close()
        await producer.close()
