"""The core stores over three standalone Redis instances (docs/decisions/0096): every key
of a conversation lands on the core instance of its commit bucket (`b * 3 // 256`), the
reads over several conversations (tails, resolve, sizes, load, member views, snapshots,
the stale scan, the in-flight count, the hot history) gather their answer from every
instance, and the answers equal those of the same writes on one instance.

Real engines: three Redis of this module's own plus one more for the one-instance run.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from qim._core import ids
from qim.config.redislayout import RedisLayout
from qim.consts import COMMIT_BUCKET_COUNT
from qim.stores.commits import CommitRef
from qim.stores.messages import NEWER, MessageRef, TailQuery
from qim.stores.redis.backend import RedisBackend
from qim.stores.redis.hot import RedisHotHistory
from tests.fixtures import redis_instances
from tests.stores.conftest import Conv

TENANT = 7
CLOCK_MS = 1_780_000_000_000  # a fixed clock: the same message ids on both layouts
TAG = re.compile(rb"\{b(\d{3})\}")


@pytest.fixture(scope="module")
def core_engines(tmp_path_factory):
    """Three Redis for the layout (a, b, c) and a fourth holding everything."""
    with redis_instances(tmp_path_factory.mktemp(n) for n in ("core-a", "core-b", "core-c", "core-one")) as engs:
        yield engs


@pytest.fixture
def wiped(core_engines):
    """The engines, every instance emptied (a stopped one started again)."""
    for eng in core_engines:
        if not eng.alive():
            eng.start()
        eng.client().flushall()
    return core_engines


def layout_of(engines, shard_count: int = 8) -> RedisLayout:
    """core = (a, b, c), mailbox = (c, a, b), as the brief of issue 35 lays them out."""
    a, b, c = (e.addr for e in engines[:3])
    return RedisLayout(core=(a, b, c), mailbox=(c, a, b), shard_count=shard_count)


def groups_per_instance(layout: RedisLayout, per: int) -> list[int]:
    """`per` group ids of each core instance (by their conversation's commit bucket)."""
    found: dict[int, list[int]] = {i: [] for i in range(len(layout.core))}
    gid = 0
    while any(len(v) < per for v in found.values()):
        gid += 1
        i = layout.core_index(ids.commit_bucket(TENANT, ids.conversation_id_group(TENANT, gid)))
        if len(found[i]) < per:
            found[i].append(gid)
    return [g for i in sorted(found) for g in found[i]]


def cmid_of(n: int, gid: int) -> bytes:
    """A 16-byte client_message_id of send `n` in group `gid`."""
    return b"s%02d%013d" % (n, gid)


async def scenario(stores, gids: list[int]) -> dict:
    """Write groups (a create, three sends, one send left reserved) concurrently across
    conversations, then read everything back through every multi-conversation read."""
    convs = [Conv(stores, TENANT, ids.conversation_id_group(TENANT, gid), clock_ms=CLOCK_MS + 1000 * gid)
             for gid in gids]
    await asyncio.gather(*(c.change(5, "create", [5, 6], joins=[5, 6], group_id=gid) for c, gid in zip(convs, gids)))
    sent: dict[bytes, list] = {c.conversation_id: [] for c in convs}
    for n in range(3):  # each round's sends of every conversation in one event-loop iteration
        got = await asyncio.gather(*(c.send(6, b"body %d of %d" % (n, gid), cmid=cmid_of(n, gid))
                                     for c, gid in zip(convs, gids)))
        for c, r in zip(convs, got):
            sent[c.conversation_id].append(r.message_id)
    pending = await asyncio.gather(*(c.send(5, b"pending", cmid=cmid_of(9, gid), commit=False)
                                     for c, gid in zip(convs, gids)))
    all_refs = [MessageRef(conv, mid) for conv, mids in sent.items() for mid in mids]
    queries = [TailQuery(c.conversation_id, ((0, None),), 1) for c in convs]
    tails = await stores.messages.tails(TENANT, queries, 8)
    hot = RedisHotHistory(stores.topology)
    hot_tails = await hot.tails(TENANT, queries, 8)
    scan = await stores.commits.stale(0, 64)
    loaded = await stores.commits.load([CommitRef(TENANT, c.conversation_id, sender, cmid_of(n, gid))
                                        for c, gid in zip(convs, gids) for sender, n in ((6, 1), (5, 9), (6, 7))])
    return {
        "tails": [(t.head.body, [r.conversation_seq for r in t.window or []]) for t in tails],
        "hot_tails": [(t.floor, t.head.body if t.head else None, [r.body for r in t.window]) for t in hot_tails],
        "resolve": await stores.messages.resolve(TENANT, all_refs, all_refs[::2]),
        "hot_resolve": await hot.resolve(TENANT, all_refs[1::2], all_refs[::3]),
        "hot_states": await hot.states(TENANT, all_refs),
        "sizes": await stores.messages.record_sizes(TENANT, all_refs),
        "pages": [[r.body for r in (await stores.messages.history_page(TENANT, c.conversation_id, ((0, None),), 0,
                                                                        NEWER, 10, 1 << 20)).records]
                  for c in convs],
        "hot_pages": [[(p.floor, p.found, [r.body for r in p.records])
                       for p in [await hot.page(TENANT, c.conversation_id, ((0, None),), 0, NEWER, 3)]]
                      + [await hot.floor(TENANT, c.conversation_id),
                         await hot.latest(TENANT, c.conversation_id, ((0, None),))] for c in convs],
        "views": await stores.groups.member_views(TENANT, 6, [c.conversation_id for c in convs]),
        "snapshots": [sorted(s) for s in await stores.groups.snapshots([(TENANT, c.conversation_id, 1)
                                                                         for c in convs])],
        "stale": sorted((ref.conversation_id, seq) for ref, seq in scan.commits),
        "pending": sorted((c.conversation_id, p.conversation_seq) for c, p in zip(convs, pending)),
        "inflight": await stores.commits.inflight_count(),
        "loaded": [(x.state, x.conversation_seq) if x else None for x in loaded],
    }


def bucket_tags(client) -> dict[int, int]:
    """commit bucket -> how many keys of that bucket one instance holds."""
    out: dict[int, int] = {}
    for key in client.scan_iter(count=1000):
        m = TAG.search(key)
        if m:
            out[int(m.group(1))] = out.get(int(m.group(1)), 0) + 1
    return out


async def test_conversation_keys_on_their_bucket_instance_and_reads_equal_one_instance(wiped):
    layout = layout_of(wiped)
    gids = groups_per_instance(layout, 2)
    three, one = RedisBackend(layout), RedisBackend(wiped[3].addr)
    try:
        got3, got1 = await scenario(three, gids), await scenario(one, gids)
    finally:
        await three.close()
        await one.close()
    # every key of a bucket on the instance holding it, and each instance holds some
    for i, eng in enumerate(wiped[:3]):
        tags = bucket_tags(eng.client())
        misplaced = sorted(b for b in tags if layout.core_index(b) != i)
        assert not misplaced, f"instance {i} holds keys of buckets {misplaced[:8]} placed elsewhere"
        mine = {ids.commit_bucket(TENANT, ids.conversation_id_group(TENANT, g)) for g in gids} & set(
            b for b in range(COMMIT_BUCKET_COUNT) if layout.core_index(b) == i)
        assert mine and mine <= set(tags), f"instance {i} lacks its conversations' keys"
    # the same writes on one instance read back the same
    assert got3["pending"] == got3["stale"] and got3["inflight"] == len(gids)
    assert [w for _, w in got3["tails"]] == [[5, 4, 3, 2]] * len(gids)  # above base 1: 3 sends, 1 reserved
    assert all(p[0][:2] == (0, 4) and p[2] == (0, 5) for p in got3["hot_pages"])  # floor 0, 3 of 5, latest 5
    assert got3 == got1


async def test_the_group_commit_coalesces_per_instance(wiped):
    """Reserves and commits of conversations on three instances in one event-loop
    iteration: each goes to its own instance (a coalesced batch is one per instance,
    never one instance's pipeline carrying another's keys)."""
    layout = layout_of(wiped)
    gids = groups_per_instance(layout, 4)
    stores = RedisBackend(layout)
    try:
        convs = [Conv(stores, TENANT, ids.conversation_id_group(TENANT, g), clock_ms=CLOCK_MS) for g in gids]
        replies = await asyncio.gather(*(c.send(9, b"x") for c in convs for _ in range(3)))
        assert sorted(r.conversation_seq for r in replies) == sorted([1, 2, 3] * len(gids))
        assert await stores.commits.inflight_count() == 0
    finally:
        await stores.close()
    for i, eng in enumerate(wiped[:3]):
        seqs = {k: int(v) for k in eng.client().keys("qim:cseq:*") for v in [eng.client().get(k)]}
        buckets = {int(m.group(1)) for k in seqs for m in [TAG.search(k)] if m}
        assert len(buckets) == len(seqs)
        assert len(seqs) == 4 and set(seqs.values()) == {3}, f"instance {i}: {seqs}"
        assert all(layout.core_index(b) == i for b in buckets)
