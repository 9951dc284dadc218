"""`qim_mailbox_direct_read_lag_seconds`: the broker's append (LogAppendTime) of a direct
conversation's dispatch record to the mailbox's read of it into its shard's FIFO, where
a direct record waits when its partition is paused behind a group's backlog (issue
41; docs/operations.md). Group records are not observed. Real Redis, the dispatch log
a stand-in that hands out records appended at a chosen time."""

from __future__ import annotations

import asyncio
import time

from tests.mailbox.test_lost_reply import SHARD, DispatchLog, redis  # noqa: F401 - the fixture
from tests.mailbox.test_overtake import Gated, direct_record, group_record, materializer


async def test_a_direct_record_read_late_shows_its_wait_and_a_group_record_shows_none(redis):  # noqa: F811
    log = DispatchLog()
    appended = int(time.time() * 1000) - 1500  # appended 1.5 s before the mailbox reads it
    log.add(SHARD, 0, group_record(0), appended_ms=appended)
    log.add(SHARD, 1, direct_record(1), appended_ms=appended)
    store = Gated(redis)
    store.gate.set()
    m = materializer(store, log, [])
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    try:
        lag = m._m.direct_read_lag
        for _ in range(250):
            if lag._sum.get() > 0:
                break
            await asyncio.sleep(0.02)
        observed = [b.get() for b in lag._buckets]
        assert sum(observed) == 1  # the direct record only
        assert 1.5 <= lag._sum.get() < 10.0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
