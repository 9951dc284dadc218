"""The writer's hot-window trimmer (qim/services/writer/trimmer.py; seed 000
ADR-0018): it removes from Redis only what is older than min(now - hot window, archive
watermark - recovery window - slack) AND held by the archive; the retention class caps
the hot window; one writer trims at a time (lease); a stalled archiver only stops it.
Real Redis (private) and a keyspace of the shared Cassandra node."""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest

from qim.config.tier import TierConfig
from qim.consts import DAY_MS
from qim.services.archiver.plan import plan
from qim.services.writer.trimmer import HistoryTrimmer, conversation_bound
from qim.stores.open import TieredStores, open_archive_tier
from qim.stores.redis.backend import RedisBackend
from tests.e2e.archive import drop_keyspace
from tests.stores.conftest import Conv, direct

HOUR = 3_600_000


def tier_cfg(**kw) -> TierConfig:
    base = dict(backend="tiered", hot_window_ms=HOUR, default_retention_days=30, recovery_window_ms=10 * 60_000,
                trim_slack_ms=60_000, trim_period_ms=100)
    base.update(kw)
    return TierConfig(**base)


def test_the_bound_is_the_stricter_of_hot_window_and_watermark():
    cfg = tier_cfg()
    now, wm = 10 * DAY_MS, 10 * DAY_MS - 5 * 60_000
    assert conversation_bound(cfg, wm, "default", now) == now - HOUR  # archive caught up: the hot window rules
    assert conversation_bound(cfg, now - 2 * HOUR, "default", now) == now - 2 * HOUR - 11 * 60_000  # archive behind
    assert conversation_bound(tier_cfg(hot_window_ms=7 * DAY_MS), now, "ephemeral_24h", now) == now - DAY_MS
    assert conversation_bound(tier_cfg(hot_window_ms=7 * DAY_MS), now, "compliance_hold", now) == now - 7 * DAY_MS


@pytest.fixture
async def tiered(private_redis, shared_cassandra):
    keyspace = f"qim_trim_{secrets.token_hex(4)}"
    redis = RedisBackend(private_redis.addr)
    tier = open_archive_tier(private_redis.addr, shared_cassandra.scylla(keyspace))
    await tier.apply_schema()
    yield TieredStores(redis, tier, True)
    await tier.close()
    await redis.close()
    await asyncio.to_thread(drop_keyspace, shared_cassandra, keyspace)


async def sent(stores, conv: Conv, n: int, age_ms: int) -> None:
    """n messages created `age_ms` ago, archived (as the archiver does: queued for the trim)."""
    conv.clock_ms = int(time.time() * 1000) - age_ms
    recs = []
    for i in range(n):
        r = await conv.send(5, b"x%d" % i)
        recs.append((await stores.redis.messages.get(conv.tenant, conv.conversation_id, r.message_id)).record)
    for tenant, batch in plan(recs, {}, 30, int(time.time() * 1000)).items():
        await stores.archive_tier.archive.write(tenant, batch.records, batch.changes)
        await stores.archive_tier.state.mark_archived(tenant, batch.oldest)


async def test_trims_only_what_is_old_enough_and_archived_behind_the_watermark(tiered):
    state = tiered.archive_tier.state
    trimmer = HistoryTrimmer(state, tiered.archive_tier.archive, tier_cfg())
    old, young = direct(tiered, a=1, b=2), direct(tiered, a=3, b=4)
    await sent(tiered, old, 5, 2 * HOUR)
    await sent(tiered, young, 3, 60_000)
    assert await trimmer.step() == 0  # no watermark yet: nothing is known archived
    now = int(time.time() * 1000)
    await state.advance_watermark(now - 2 * HOUR)  # the archive is behind those messages
    assert await trimmer.step() == 0
    await state.advance_watermark(now)
    assert await trimmer.step() == 5
    assert await state.floors(old.tenant, [old.conversation_id, young.conversation_id]) == [5, 0]
    assert await trimmer.step() == 0  # idempotent
    # the young conversation stays queued at its oldest message's time
    assert (old.tenant, young.conversation_id) in await state.trim_candidates(now, 10)
    assert (old.tenant, old.conversation_id) not in await state.trim_candidates(now, 10)


async def test_the_retention_class_caps_the_hot_window_and_one_writer_trims_at_a_time(tiered):
    state = tiered.archive_tier.state
    cfg = tier_cfg(hot_window_ms=7 * DAY_MS)
    first = HistoryTrimmer(state, tiered.archive_tier.archive, cfg)
    c = direct(tiered)
    await sent(tiered, c, 4, 2 * DAY_MS)
    await state.advance_watermark(int(time.time() * 1000))
    assert await first.step() == 0  # 2 days old, 7-day hot window
    await state.set_retention(c.tenant, c.conversation_id, "ephemeral_24h")
    second = HistoryTrimmer(state, tiered.archive_tier.archive, cfg)
    assert await state.lease("trimmer", "first", 10_000)
    run = asyncio.create_task(second.run())
    await asyncio.sleep(0.5)
    assert await state.floors(c.tenant, [c.conversation_id]) == [0]  # the lease is held by another writer
    assert await state.lease("trimmer", "first", 1)  # released (expires at once)
    await asyncio.sleep(0.5)
    assert await state.floors(c.tenant, [c.conversation_id]) == [4]
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
