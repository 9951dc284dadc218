"""A device on a slow link catches up, against the real stack behind a throttling
proxy (docs/design.md §9): the liveness probe never fires while page
bytes are still arriving, and the SDK asks for smaller pages once it sees it is slow."""

from __future__ import annotations

import asyncio
import os

import pytest
import redis

from qim.consts import MAILBOX_PAGE_MAX_BYTES
from qim.sdk import direct_conversation
from qim.sdk import events as ev
from qim.stores.redis.keys import mailbox_key
from tests.sdk.faultproxy import FaultProxy
from tests.sdk.realstack import runtime, shutdown, users


async def mailbox_count(r: redis.Redis, user: int, count: int) -> None:
    for _ in range(600):
        if sum(r.zcard(k) for k in r.scan_iter(mailbox_key(0, user, 0)[:-2] + "d*")) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"mailbox of {user} never reached {count} entries")


@pytest.mark.parametrize("count,size,bps", [
    (200, 1024, 20 * 1024),        # many small entries: one 256-entry page is ~11 s of link
    (3, 200 * 1024, 40 * 1024),    # referenced bodies: one 512 KiB page (2 entries) is ~10 s of link
])
async def test_device_on_a_slow_link_connects_and_catches_up(stack, engines, tmp_path, count, size, bps):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra = runtime(stack, tmp_path, a)
    await ra.connect()
    sent = [os.urandom(size) for _ in range(count)]
    for body in sent:  # one at a time: stored order is send order whatever the writer does with bursts
        await ra.send_message(conv, b, body)
    await mailbox_count(redis.Redis(*engines.redis_addr.split(":")), b, count)
    proxy = FaultProxy(stack.gateway_addr, down_bps=bps)
    rb = runtime(stack, tmp_path, b, endpoint=await proxy.start(), auto_reconnect=False)
    try:
        await asyncio.wait_for(rb.connect(), 120)  # before: PING unanswered behind page bytes -> abort
        assert rb.connected and rb.stats["reconnects"] == 0 and not rb.told.of(ev.Disconnected)
        rows = await rb.store.run(rb.store.messages, conv)
        assert [m.body for m in rows] == sent
        assert rb.mailbox_page_bytes < MAILBOX_PAGE_MAX_BYTES // 4  # it asks for smaller pages now
    finally:
        await shutdown(ra, rb)
        await proxy.stop()
