"""UserBadgeState across a session node's SIGKILL and takeover (issue 39; docs/decisions/0129),
on a private stack of 2 session nodes: three peers send to a user whose shard the killed
node owns, before, during and after the kill; afterwards the stored badge equals the
exact total (every acknowledged message, nothing counted twice by the replay) and the
list's sum, and its version, sampled all along, never went backwards."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from qim.sdk import ServerError
from tests.badge.audit import badge_store, listed_badge, sampled, stored, versions_only_grow
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_shard_takeover import LEASE_MS, RENEW_MS, node_id, until_split, user_on
from tests.fixtures import running_stack
from tests.sdk.realstack import eventually


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory):
    env = {"QIM_SHARD_LEASE_MS": str(LEASE_MS), "QIM_SHARD_RENEW_MS": str(RENEW_MS)}
    with running_stack(tmp_path_factory.mktemp("badgetakeover"), sessions=2, extra_env=env) as st:
        yield st


async def test_badge_is_exact_after_a_session_node_is_killed_mid_traffic(two_sessions, tmp_path):
    st = two_sessions
    table = await until_split(st, "session", ("session", "session2"))
    me = user_on(node_id(st, "session2"), table)
    peers = [random.getrandbits(40) + 1 for _ in range(3)]
    senders = [await client(st, tmp_path, p) for p in peers]
    mine = await client(st, tmp_path, me, 1)
    for c in (*senders, mine):
        await c.connect()
    convs = [(await s.open_direct(me)).conversation_id for s in senders]
    store = badge_store(st.engines)
    acked = [0]
    stop = asyncio.Event()

    async def send(i: int) -> None:
        n = 0
        while not stop.is_set():
            await senders[i].send_text(convs[i], f"m{n}")  # waits for the SEND_ACK
            acked[0] += 1
            n += 1
            await asyncio.sleep(0.05)

    async with sampled(store, me) as seen:
        tasks = [asyncio.get_running_loop().create_task(send(i)) for i in range(3)]
        await eventually(lambda: acked[0] >= 30, timeout=60, what="traffic before the kill")
        st.kill_service("session2")
        killed_at = acked[0]
        await eventually(lambda: acked[0] >= killed_at + 30, timeout=90, what="traffic after the kill")
        stop.set()
        # bounded: a send never acknowledged fails the test instead of hanging CI (a
        # clean-clone run of 2026-12-06 hung here for 20 min; not yet diagnosed)
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        total = acked[0]

        async def exact() -> bool:
            try:
                return (await stored(store, me))[0] == total and await listed_badge(mine) == total
            except ServerError:  # UNAVAILABLE until the survivor took the shard over
                return False

        started = time.monotonic()
        await eventually(exact, timeout=120, what=f"badge {total} after the takeover")
        print(f"badge exact {time.monotonic() - started:.1f} s after the traffic stopped")
        # the sampler's own view reaches the end too (two samples taken after `exact`:
        # the one in flight when it passed may predate the last settle)
        after = len(seen)
        await eventually(lambda: len(seen) >= after + 2, timeout=30, what="the sampler's next samples")
    assert len(seen) > 10 and seen[-1][0] == total, (total, seen[-5:])
    assert versions_only_grow(seen), f"a version went backwards or a change kept its version: {seen}"
    assert all(b <= total for b, _ in seen), "a badge above the total: a record counted twice"
    st.start_service("session2")
    await close_all(*senders, mine)
