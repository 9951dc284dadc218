"""HLC message ids from leased windows on a real Redis (docs/design.md §3, §5.2): strictly
increasing across a clock stepped back and across a restart, and no ids without a
provable window."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.consts import HLC_CEILING_SLACK_MS
from qim.errors import ErrorCode, RequestError
from qim.infra.redis.client import connect
from qim.services.writer import hlc
from qim.services.writer.hlc import HlcClock
from qim.stores.redis.leases import RedisClockLeases
from qim.wire.errors import UNFIT_MARK


def key(mid: bytes) -> tuple[int, int]:
    ms, logical, _region, _writer = ids.split_message_id(mid)
    return ms, logical


async def new_clock(redis, writer_id: int) -> HlcClock:
    clock = HlcClock(RedisClockLeases(redis), region_id=7, writer_id=writer_id)
    await clock.start()
    return clock


async def test_ids_increase_across_a_clock_step_back_and_a_restart(engines, monkeypatch):
    redis = connect(engines.redis_addr)
    writer_id = 40000 + (id(redis) % 1000)
    clock = await new_clock(redis, writer_id)
    first = [clock.next_id()[0] for _ in range(1000)]
    real = hlc.now_ms()
    monkeypatch.setattr(hlc, "now_ms", lambda: real - 600_000)  # the wall clock jumps 10 min back
    stepped = [clock.next_id()[0] for _ in range(100)]
    restarted = await new_clock(redis, writer_id)  # a new process of the same writer_id, clock still back
    after_restart = [restarted.next_id()[0] for _ in range(100)]
    seq = [key(m) for m in first + stepped]
    assert seq == sorted(seq) and len(set(seq)) == len(seq)
    assert min(key(m) for m in after_restart) > max(seq)  # the new window lies above the old high-water
    assert all(ids.split_message_id(m)[3] == writer_id for m in after_restart)
    await redis.aclose()


async def test_no_ids_without_a_provable_window(engines):
    redis = connect(engines.redis_addr)
    clock = await new_clock(redis, 0)  # leases a free writer_id
    assert clock.ready and clock.writer_id > 0
    clock.next_id()
    other = await new_clock(redis, clock.writer_id)  # another process takes the same writer_id
    await clock.maintain()  # renewal finds the lease lost and gives the window up
    assert not clock.ready
    with pytest.raises(RequestError):
        clock.next_id()
    assert other.ready
    await redis.aclose()


async def test_a_restart_continues_above_every_issued_id_without_jumping_a_window_ahead(engines):
    redis = connect(engines.redis_addr)
    writer_id = 41000 + (id(redis) % 1000)
    first = await new_clock(redis, writer_id)
    before = [first.next_id()[0] for _ in range(10)]
    other = await new_clock(redis, 0)  # another writer_id: starts above every published ceiling too
    restarted = await new_clock(redis, writer_id)  # the same writer_id again (its old window still runs)
    for clock in (other, restarted):
        mid, ms = clock.next_id()
        assert key(mid) > max(key(m) for m in before)
        # above the cluster ceiling (now + HLC_CEILING_SLACK_MS at most), not above the old
        # window's end (now + 60 s): ids stay near wall time after a restart
        assert ms - hlc.now_ms() <= 3 * HLC_CEILING_SLACK_MS
    await redis.aclose()


async def test_a_clock_that_woke_past_its_ceiling_publishes_it_instead_of_refusing(engines, monkeypatch):
    """A writer paused longer than the ceiling's slack (SIGSTOP, a held VM) wakes above the
    ceiling it published: `next_id` says so (CeilingPassed, a NodeUnfit) and
    `raise_ceiling` publishes a new one, after which ids flow, never above it
    (docs/decisions/0079-writer-failover.md; before, every queued send was refused)."""
    redis = connect(engines.redis_addr)
    clock = await new_clock(redis, 0)
    clock.next_id()
    real = hlc.now_ms()
    monkeypatch.setattr(hlc, "now_ms", lambda: real + 3 * HLC_CEILING_SLACK_MS)  # 15 s passed unseen
    with pytest.raises(hlc.CeilingPassed) as refused:
        clock.next_id()
    assert refused.value.code == ErrorCode.UNAVAILABLE and refused.value.message.startswith(UNFIT_MARK)
    await clock.raise_ceiling()
    mid, ms = clock.next_id()
    assert ms >= real + 3 * HLC_CEILING_SLACK_MS and ms <= clock._ceiling
    assert ids.split_message_id(mid)[3] == clock.writer_id
    await redis.aclose()


async def test_two_extensions_at_once_keep_the_window(engines):
    """The background loop and a request's catch_up (after a newer id from a writer whose
    clock is ahead) extend the window at the same moment: before, the second one's
    compare-and-set met the first one's end, read it as QIM_HLC_LOST and the writer gave
    its window up (test_hlc_restart failed so under CI's load)."""
    import asyncio

    redis = connect(engines.redis_addr)
    clock = await new_clock(redis, 0)
    ahead = ids.compose_message_id(hlc.now_ms() + 60_000, 0, 7, 1)  # a writer a minute ahead
    clock.observe(ahead)
    await asyncio.gather(clock.catch_up(), clock._lease_window(), clock.catch_up())
    assert clock.ready
    mid, _ = clock.next_id()
    assert key(mid) > key(ahead)
    await redis.aclose()
