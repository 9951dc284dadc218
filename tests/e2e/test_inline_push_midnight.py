"""Inline pushes (docs/decisions/0156) across midnight: the mailbox's day buckets follow
created_at, and the fused script's previous position reads the record's own day's
bucket and every other day by its highest offset (`qim_prev_offset`; "unknown" when
another day holds a higher offset). On a private stack of two writers whose clocks
(QIM_CLOCK_SKEW_MS) reach the next UTC midnight seconds apart, a user in five direct
conversations (spread over both writers) with both sides sending fast across midnight,
the overtake path on (decisions/0142): the user's entries go back a day in offset order
(counted), and every device ends with every message exactly once, in order, equal to a
fresh device's full sync. Prints the day reversals, overtakes and inline pushes.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_inline_push_attack import store_view, told_once
from tests.e2e.test_shard_takeover import metric
from tests.fixtures import running_stack
from tests.sdk.realstack import eventually, users

DAY_MS = 86_400_000
MIDNIGHT_IN_S = 12.0  # the first writer's clock reaches midnight this long after its restart begins
AFTER_S = 4.0  # traffic runs until this long past it
PEERS = 5


@pytest.fixture(scope="module")
def two_writers(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("inline-midnight"), writers=2,
                       extra_env={"QIM_MAILBOX_OVERTAKE": "1"}) as st:
        yield st


def _count(c, conv: bytes, n: int):
    async def check() -> bool:
        return len(await c.store.run(c.store.messages, conv)) == n
    return check


async def test_sends_across_midnight_reach_every_device_once_in_order(two_writers, tmp_path):
    st = two_writers
    now, began = time.time_ns() // 1_000_000, time.monotonic()
    skew = (now // DAY_MS + 1) * DAY_MS - now - int(MIDNIGHT_IN_S * 1000)
    # the second writer's clock 2 s behind the first's: its window starts above the
    # first's published ceiling (hlc.py), so the two cross midnight at different times and
    # a user's entries alternate between the two days in offset order for a while
    for name, lag in (("writer", 0), ("writer2", 2_000)):
        st.stop_service(name)
        st.start_service(name, {"QIM_CLOCK_SKEW_MS": str(skew - lag)})
    st.wait_ready(["writer", "writer2"])
    me, *peers = users(1 + PEERS)
    mine = [await client(st, tmp_path, me, d) for d in (1, 2)]
    others = [await client(st, tmp_path, p, 1) for p in peers]
    for c in (*mine, *others):
        await c.connect()
    convs = [(await mine[0].open_direct(p)).conversation_id for p in peers]
    for p in peers:
        await mine[1].open_direct(p)
    for o in others:
        await o.open_direct(me)
    sent = {conv: 0 for conv in convs}
    end = began + MIDNIGHT_IN_S + AFTER_S
    assert time.monotonic() < began + MIDNIGHT_IN_S - 1, "the stack took too long to be ready before midnight"

    async def talk(i: int, conv: bytes) -> None:
        while time.monotonic() < end:
            sender = (mine[i % 2], others[i])[sent[conv] % 2]
            await sender.send_text(conv, f"{i}-{sent[conv]}", wait=False)
            sent[conv] += 1
            await asyncio.sleep(0.02)

    try:
        await asyncio.gather(*(talk(i, conv) for i, conv in enumerate(convs)))
        days, every = set(), []
        fresh = await client(st, tmp_path, me, 3)
        await fresh.connect()
        try:
            for conv in convs:
                await eventually(_count(fresh, conv, sent[conv]), timeout=60, what="the fresh device's sync")
                want = await store_view(fresh, conv)
                assert sorted(r[2] for r in want) == sorted(f"{convs.index(conv)}-{k}".encode()
                                                           for k in range(sent[conv]))
                rows = await fresh.store.run(fresh.store.messages, conv)
                days |= {m.created_at_ms // DAY_MS for m in rows}
                every += rows
                for c in mine:
                    await eventually(_count(c, conv, sent[conv]), timeout=60, what=f"device {c.device_id}")
                    assert await store_view(c, conv) == want
                    assert told_once(c, conv)
        finally:
            await fresh.close()
        assert len(days) == 2, days  # the traffic crossed midnight
        by_seq = sorted(every, key=lambda m: m.mailbox_seq)  # the user's mailbox order
        crossings = sum(1 for x, y in zip(by_seq, by_seq[1:]) if x.created_at_ms // DAY_MS > y.created_at_ms // DAY_MS)
        print(f"midnight: {sum(sent.values())} messages over days {sorted(days)}, {crossings} back a day in",
              "the user's mailbox order;",
              f"{metric(st, 'mailbox', 'qim_mailbox_overtakes_total'):.0f} overtakes,",
              f"{metric(st, 'mailbox', 'qim_mailbox_inline_pushes_total'):.0f} users pushed inline;",
              [(c.stats.get("pushes_applied", 0), c.stats["pages"]) for c in mine])
    finally:
        await close_all(*mine, *others)
