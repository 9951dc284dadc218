"""After REBUILD every locally stored message agrees with the server, against the real
stack (docs/design.md §9): a recall that happened while the device was
away clears the local text and keeps the state, and a message outside every member
interval is no longer shown — not only messages newer than the newest local one."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys

import redis

from qim.proto.v1 import message_pb2
from qim.sdk import direct_conversation
from qim.sdk import events as ev
from qim.sdk.requests import create_group, recall
from qim.stores.redis.keys import CommitKeys, days_key, mailbox_key
from tests.sdk.realstack import eventually, runtime, shutdown, users


def expire_mailbox(r: redis.Redis, user: int) -> int:
    """Retention took every entry of the user's mailbox: drop them and raise the trim
    boundary past the last one, so any non-zero cursor gets CURSOR_EXPIRED."""
    top = 0
    for key in r.scan_iter(mailbox_key(0, user, 0)[:-2] + "d*"):
        rows = r.zrange(key, 0, -1, withscores=True)
        top = max([top] + [int(score) for _, score in rows])
        r.delete(key)
    assert top > 0, "the mailbox held nothing"
    r.zadd(days_key(0, user), {"trim": top})
    return top


async def mailbox_count(r: redis.Redis, user: int, count: int) -> None:
    for _ in range(300):
        if sum(r.zcard(k) for k in r.scan_iter(mailbox_key(0, user, 0)[:-2] + "d*")) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"mailbox of {user} never reached {count} entries")


async def receive(rt, conv: bytes, count: int) -> None:
    await rt.connect()
    st = rt.store

    async def done() -> bool:  # sent while offline: no push, so pull until materialized
        await rt.pull_mailbox()
        return len(await st.run(st.messages, conv)) >= count and bool((await st.run(st.cursor) or (0, 0, 0))[2])

    await eventually(done, what=f"{count} messages applied")


def qimctl(stack, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **stack.client_env()}  # the writer, the CA and qimctl's certificate (stack.env)
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", *args], env=env, capture_output=True,
                          text=True, timeout=60)


async def test_recall_while_away_clears_the_text_after_rebuild(stack, engines, tmp_path):
    a, b = users(2)
    conv = direct_conversation(0, a, b)
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect()
    ack1 = await ra.send_message(conv, b, b"something I regret")
    await receive(rb, conv, 1)
    await rb.close()
    await recall(ra, conv, ack1.message_id, peer_user_id=b)
    ack2 = await ra.send_message(conv, b, b"never mind")
    r = redis.Redis(*engines.redis_addr.split(":"))
    await mailbox_count(r, b, 3)  # M1, the recall notice, M2
    expire_mailbox(r, b)
    rb = runtime(stack, tmp_path, b)  # same store: it still holds M1 with its text
    await rb.connect()
    assert rb.stats.get("rebuilds") == 1
    rows = {m.message_id: m for m in await rb.store.run(rb.store.messages, conv)}
    assert set(rows) == {ack1.message_id, ack2.message_id}
    assert rows[ack1.message_id].body == b"" and rows[ack1.message_id].state == message_pb2.MESSAGE_STATE_RECALLED
    assert rows[ack2.message_id].body == b"never mind"
    assert rows[ack2.message_id].state == message_pb2.MESSAGE_STATE_NORMAL
    updated = [m for e in rb.told.of(ev.MessagesUpdated) for m in e.messages]
    assert [(m.message_id, m.state, m.body) for m in updated] == [
        (ack1.message_id, message_pb2.MESSAGE_STATE_RECALLED, b"")]  # the app hears of the recall
    await shutdown(ra, rb)


async def test_message_outside_every_member_interval_is_gone_after_rebuild(stack, engines, tmp_path):
    a, b = users(2)
    gid = random.getrandbits(62) + 1
    ra, rb = runtime(stack, tmp_path, a), runtime(stack, tmp_path, b)
    await ra.connect()
    ok = await create_group(ra, gid, [b])
    conv = ok.conversation_id
    g1 = await ra.send_message(conv, 0, b"before b left")
    await receive(rb, conv, 1)
    await rb.close()
    removed = qimctl(stack, "membership", "remove", "--group", str(gid), "--user", str(b))
    assert removed.returncode == 0, removed.stdout + removed.stderr
    added = qimctl(stack, "membership", "add", "--group", str(gid), "--user", str(b))
    assert added.returncode == 0, added.stdout + added.stderr  # a second interval
    g2 = await ra.send_message(conv, 0, b"after b re-joined")
    r = redis.Redis(*engines.redis_addr.split(":"))
    # after MEMBER_INTERVALS_MAX memberships the oldest interval is dropped, and G1 with it:
    # keep only b's newest interval (as 16 more leave/join cycles would)
    members = CommitKeys(0, conv).group_members()
    intervals = r.hget(members, b).split(b",")
    assert len(intervals) == 2, intervals
    r.hset(members, b, intervals[-1])
    await mailbox_count(r, b, 5)  # CREATED, G1, REMOVED, JOINED, G2
    expire_mailbox(r, b)
    rb = runtime(stack, tmp_path, b)
    await rb.connect()
    assert rb.stats.get("rebuilds") == 1
    rows = await rb.store.run(rb.store.messages, conv)
    assert [(m.message_id, m.body) for m in rows] == [(g2.message_id, b"after b re-joined")]
    removed_ids = [mid for e in rb.told.of(ev.MessagesRemoved) for mid in e.message_ids]
    assert removed_ids == [g1.message_id]
    await shutdown(ra, rb)
