"""Session nodes heal their own shards (issue 33 item 1: after a Redis restart a session
node's projection stopped with `QIM_CKPT_CONFLICT checkpoint moved under us` and the
node stayed at /healthz 503, its users' PULL_SESSION_LIST refused, until a person
restarted it). Two session nodes on a stack of the test's own.

- A checkpoint moved under a running projection (what the race of the issue produced;
  here written by hand so it happens every run) makes that node project the shard again
  from a fresh read: healthy again and serving the shard's list pages without a person
  (before: failed closed for good).
- Redis SIGKILLed under traffic and restarted on its AOF after longer than the 6 s
  lease: every session node is healthy again and serves PULL_SESSION_LIST for users of
  every shard.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from qim._core import ids
from qim.protocol import Opcode
from qim.stores.redis.keys import session_shard_checkpoint_key
from tests.e2e.rawclient import RawClient
from tests.e2e.sessionclient import pull_page
from tests.e2e.test_push_repair import metric
from tests.e2e.test_sessions import redis_of
from tests.fixtures import TEST_SHARD_COUNT, running_stack

SESSIONS = ("session", "session2")
HEAL_S = 120.0
OUTAGE_S = 9.0  # past the development stack's 6 s lease


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("sessredis"), nodes={"session": 2}) as st:
        yield st


def shard_of(user: int) -> int:
    return ids.user_placement(0, user, TEST_SHARD_COUNT)[2]


def users_of_every_shard() -> dict[int, int]:
    """One fresh user per session shard."""
    out: dict[int, int] = {}
    while len(out) < TEST_SHARD_COUNT:
        user = random.getrandbits(40) + 1000
        out.setdefault(shard_of(user), user)
    return out


async def send_once(st, sender: int, peer: int, body: bytes) -> bool:
    """One message on a connection of its own; False when the stack refused or was away."""
    try:
        client = await RawClient.login(st, sender)
    except (OSError, asyncio.TimeoutError, AssertionError):
        return False
    try:
        op, _ = await client.send_text(peer, body)
        return op == Opcode.SEND_ACK
    except (OSError, asyncio.TimeoutError, AssertionError):
        return False
    finally:
        await client.close()


async def listed(st, user: int, peer: int) -> str:
    """"" once the user's list page is served and names the conversation with `peer`, else why not."""
    try:
        client = await RawClient.login(st, user)
    except (OSError, asyncio.TimeoutError, AssertionError) as exc:
        return f"login: {exc!r}"
    try:
        op, page = await pull_page(client)
        if op != Opcode.SESSION_LIST_BATCH:
            return f"ERROR {page.code} {page.message}"
        conv = ids.conversation_id_direct(0, user, peer)
        return "" if any(e.conversation_id == conv for e in page.sessions) else "conversation not listed yet"
    except (OSError, asyncio.TimeoutError, AssertionError) as exc:
        return f"pull: {exc!r}"
    finally:
        await client.close()


async def every_session_node_serves(st, users: dict[int, int], peer: int) -> None:
    """Wait until both session nodes are healthy and every user's page lists its
    conversation with `peer`; fail naming what is still wrong."""
    deadline = time.monotonic() + HEAL_S
    while True:
        health = {n: st.healthz(n) for n in SESSIONS}
        sick = {n: h for n, h in health.items() if h[0] != 200}
        pages = {} if sick else {s: await listed(st, u, peer) for s, u in users.items()}
        bad = {s: why for s, why in pages.items() if why}
        if not sick and not bad:
            return
        assert time.monotonic() < deadline, f"not healed within {HEAL_S} s: health {sick}, pages {bad}"
        await asyncio.sleep(1.0)


async def test_a_checkpoint_moved_under_a_session_node_heals_that_shard(two_sessions):
    st = two_sessions
    st.wait_ready()
    users, peer = users_of_every_shard(), random.getrandbits(40) + 1000
    for user in users.values():
        assert await send_once(st, peer, user, b"first")
    await every_session_node_serves(st, users, peer)
    def heals() -> float:
        # the moved shard projected again from a fresh read: its node restarted that shard,
        # or (a busy machine) its lease lapsed and a re-acquire read the checkpoint afresh
        return sum(metric(st, n, "qim_session_shard_restarts_total") + metric(st, n, "qim_shard_acquired_total")
                   for n in SESSIONS)

    # counted before the move: a durable batch still catching up may meet it first
    before = heals()
    shard = random.choice(sorted(users))
    redis = redis_of(st)
    key = session_shard_checkpoint_key(shard)
    # the list pages above come from the low-latency projection; the durable one may still
    # be at offset 0 of this shard, and a rewind to 0 is then no move at all (CI, a busy
    # machine: its batch from 0 went through and nothing ever conflicted). Wait until the
    # durable projection wrote past it: every later batch then expects an offset above 0.
    deadline = time.monotonic() + HEAL_S
    while int(await redis.hget(key, "p") or 0) == 0:
        assert time.monotonic() < deadline, f"shard {shard}'s durable projection never wrote its first record"
        await asyncio.sleep(0.2)
    # shard s's checkpoint moves under its owner (a rewind: what is behind it is projected again)
    await redis.hset(key, "p", "0")
    await redis.aclose()
    other = random.getrandbits(40) + 1000
    assert await send_once(st, other, users[shard], b"after the move")
    # the durable projection meets the moved checkpoint at its next batch, which may come
    # after the low-latency projection already listed the message: wait for the restart
    deadline = time.monotonic() + HEAL_S
    while heals() < before + 1:
        assert time.monotonic() < deadline, f"shard {shard} never projected again from a fresh read"
        await asyncio.sleep(0.5)
    # and the checkpoint of that shard moved on from the rewind
    redis = redis_of(st)
    try:
        while int(await redis.hget(session_shard_checkpoint_key(shard), "p") or 0) == 0:
            assert time.monotonic() < deadline, f"shard {shard}'s checkpoint stayed at the rewind"
            await asyncio.sleep(0.5)
    finally:
        await redis.aclose()
    await every_session_node_serves(st, {shard: users[shard]}, other)
    await every_session_node_serves(st, users, peer)


async def test_a_redis_restart_under_traffic_leaves_every_session_node_serving(two_sessions):
    st = two_sessions
    st.wait_ready()
    users, peer = users_of_every_shard(), random.getrandbits(40) + 1000
    stop = asyncio.Event()
    sent = [0]

    async def traffic() -> None:
        while not stop.is_set():
            for user in users.values():
                sent[0] += await send_once(st, peer, user, b"t")
            await asyncio.sleep(0.1)

    task = asyncio.get_running_loop().create_task(traffic())
    try:
        while sent[0] < 2 * TEST_SHARD_COUNT:
            assert not task.done()
            await asyncio.sleep(0.2)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, st.engines.redis.kill)
        await asyncio.sleep(OUTAGE_S)
        await loop.run_in_executor(None, st.engines.redis.start, 60)
        before = sent[0]
        deadline = time.monotonic() + HEAL_S
        while sent[0] < before + 2 * TEST_SHARD_COUNT:  # traffic flows again
            assert not task.done() and time.monotonic() < deadline, "no message accepted after the restart"
            await asyncio.sleep(0.5)
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
    await every_session_node_serves(st, users, peer)
    st.wait_ready()
