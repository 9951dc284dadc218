"""SDK against the real stack: CURSOR_EXPIRED drives REBUILD (session list → history →
new cursor) without loss or duplicates, and a recall clears the local copy (docs/design.md §9)."""

from __future__ import annotations

import asyncio
import random

import redis

from qim._core import ids
from qim._core import mailbox_seq as mseq
from qim.sdk import ClientRuntime, LocalStore, direct_conversation
from qim.sdk.requests import recall
from qim.stores.redis.keys import days_key, mailbox_key
from qim.wire.devtoken import issue_dev_token
from tests.e2e.rawclient import sdk_transport


def runtime(stack, tmp_path, user: int) -> ClientRuntime:
    store = LocalStore.open(str(tmp_path / f"{user}.sqlite3"), 0, user)
    token = issue_dev_token(stack.token_key, 0, user, store.device_id)
    return ClientRuntime(stack.gateway_addr, token, store, event_queue=False, send_timeout=20, **sdk_transport(stack))


async def bodies(rt: ClientRuntime, conv: bytes) -> list[bytes]:
    return [m.body for m in await rt.store.run(rt.store.messages, conv)]


async def wait_mailbox(r: redis.Redis, user: int, count: int) -> list[tuple[bytes, float]]:
    for _ in range(200):
        rows = [row for key in r.scan_iter(mailbox_key(0, user, 0)[:-2] + "d*")
                for row in r.zrange(key, 0, -1, withscores=True)]
        if len(rows) >= count:
            return sorted(rows, key=lambda x: x[1])
        await asyncio.sleep(0.05)
    raise AssertionError(f"mailbox of {user} never reached {count} entries")


async def test_cursor_expired_rebuilds_from_history_then_recall_clears_the_copy(stack, engines, tmp_path):
    a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect()
    await ra.send_message(conv, b, b"m0")
    await rb.connect()
    for _ in range(100):  # applied through MAILBOX_BATCH (a push alone moves no cursor)
        await rb.pull_mailbox()
        cursor = await rb.store.run(rb.store.cursor)
        if await bodies(rb, conv) == [b"m0"] and cursor and cursor[2]:
            break
        await asyncio.sleep(0.05)
    await rb.close()
    ack1 = await ra.send_message(conv, b, b"m1")
    await ra.send_message(conv, b, b"m2")
    r = redis.Redis(*engines.redis_addr.split(":"))
    rows = await wait_mailbox(r, b, 3)
    # retention removed m1 from b's mailbox: drop its entry, raise the trim boundary past it
    m1_member, m1_offset = next((m, s) for m, s in rows if ack1.message_id in m)
    day = next(k for k in r.scan_iter(mailbox_key(0, b, 0)[:-2] + "d*") if r.zscore(k, m1_member) is not None)
    r.zrem(day, m1_member)
    r.zadd(days_key(0, b), {"trim": int(m1_offset)})
    rb = runtime(stack, tmp_path, b)  # reopen the same store: its cursor is still at m0
    assert mseq.split((await rb.store.run(rb.store.cursor))[2])[1] < m1_offset
    await rb.connect()
    for _ in range(100):
        if await bodies(rb, conv) == [b"m0", b"m1", b"m2"]:
            break
        await rb.pull_mailbox()
        await asyncio.sleep(0.05)
    assert await bodies(rb, conv) == [b"m0", b"m1", b"m2"]  # m1 came from history, nothing twice
    assert rb.stats.get("rebuilds") == 1
    ok = await recall(ra, conv, ack1.message_id, peer_user_id=b)
    assert ok.control_conversation_seq > ack1.conversation_seq
    for _ in range(100):
        await rb.pull_mailbox()
        if await bodies(rb, conv) == [b"m0", b"", b"m2"]:
            break
        await asyncio.sleep(0.05)
    assert await bodies(rb, conv) == [b"m0", b"", b"m2"]
    await ra.close(), await rb.close()
    ra.store.close(), rb.store.close()
    assert ids.conversation_kind(conv) == 1
