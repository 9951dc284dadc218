"""The archive tier over three standalone Redis instances (docs/decisions/0096, 0101) and
the shared Cassandra node: conversations on each core instance are archived and trimmed
with the writer's own check; pages across every hot floor have no gap and no duplicate,
each floor is on its conversation's instance, the trim queue on the home, and the
trimmer's whole pass (lease, candidates, retention, trim) empties the queue."""

from __future__ import annotations

import pytest

from qim.config.tier import TierConfig
from qim.services.writer.trimmer import HistoryTrimmer
from qim.stores.messages import NEWER, OLDER
from qim.stores.open import ArchiveTier, TieredStores
from qim.stores.redis.backend import RedisBackend
from qim.stores.redis.keys import CommitKeys, trim_queue_key
from tests.stores.archived import truncate
from tests.stores.conftest import group, now_ms, redis3_layout
from tests.stores.test_archive import archive_all, trim_to, walk


@pytest.fixture
async def tiered3(store_engines):
    """TieredStores over the three emptied instances of the "redis3" layout and an emptied archive."""
    layout = redis3_layout(store_engines["redis3"])
    redis = RedisBackend(layout)
    for client in redis.topology.clients.values():
        await client.flushall()
    tier = ArchiveTier(redis.topology, store_engines["cql"])
    stores = TieredStores(redis, tier, tiered_reads=True)
    await tier.apply_schema()
    await truncate(tier)
    yield stores
    await stores.close()


def groups_on_each_instance(stores) -> list:
    """One group conversation per core instance."""
    layout, gid = stores.redis.topology.layout, 1
    found: dict = {}
    while len(found) < len(layout.core):
        c = group(stores, group_id=gid)
        found.setdefault(layout.core_index(CommitKeys(c.tenant, c.conversation_id).bucket), c)
        gid += 1
    return [found[i] for i in range(len(layout.core))]


async def test_pages_across_the_floor_on_every_instance(tiered3):
    convs = groups_on_each_instance(tiered3)
    topology = tiered3.redis.topology
    for c in convs:
        for n in range(20):
            await c.send(5, bytes([n]) * (10 + n * 37))
        await archive_all(tiered3, c)
        await tiered3.archive_tier.state.mark_archived(c.tenant, {c.conversation_id: now_ms() - 1})
    for i, c in enumerate(convs):
        assert await trim_to(tiered3, c, 7 + i) == 7 + i
    for i, c in enumerate(convs):
        for limit in (1, 7, 50):
            assert await walk(tiered3.messages, c, ((0, None),), NEWER, limit) == list(range(1, 21))
            assert await walk(tiered3.messages, c, ((0, None),), OLDER, limit) == list(range(20, 0, -1))
        keys = CommitKeys(c.tenant, c.conversation_id)
        assert [await cl.get(keys.floor()) for cl in topology.core_clients] == [
            str(7 + i).encode() if j == i else None for j in range(3)]
    queued = await topology.home.zrange(trim_queue_key(), 0, -1)
    assert len(queued) == 3  # every conversation still has hot archived messages, queued on the home
    assert all([await cl.exists(trim_queue_key()) for cl in topology.core_clients[1:]]) is False


async def test_the_trimmers_pass_trims_every_instance_and_empties_the_queue(tiered3):
    convs = groups_on_each_instance(tiered3)
    tier = tiered3.archive_tier
    for c in convs:
        for n in range(5):
            await c.send(5, b"m%d" % n)
        await archive_all(tiered3, c)
        await tier.state.mark_archived(c.tenant, {c.conversation_id: now_ms() - 1})
    await tier.state.advance_watermark(now_ms() + 3_600_000)  # the archive is past everything
    cfg = TierConfig(hot_window_ms=0, recovery_window_ms=0, trim_slack_ms=0)
    trimmer = HistoryTrimmer(tier.state, tier.archive, cfg)
    assert await trimmer.step(now=now_ms() + 3_600_000) == 15
    assert await tier.state.floors(convs[0].tenant, [c.conversation_id for c in convs]) == [5, 5, 5]
    assert await tiered3.redis.topology.home.zcard(trim_queue_key()) == 0
    for c in convs:  # every message read back from the archive
        assert await walk(tiered3.messages, c, ((0, None),), NEWER, 2) == [1, 2, 3, 4, 5]
