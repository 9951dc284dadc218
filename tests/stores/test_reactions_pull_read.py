"""ReactionStore.summaries_of, the read a mailbox pull makes (decision 0121 §4): the
summaries of messages of many conversations spread over two core Redis instances
(decision 0096) come back in order, `mine` as the reader sees them, equal to the
per-conversation read, in ONE script call per instance whatever the number of
messages (counted by each instance's INFO commandstats), none for an empty page."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.config.redislayout import RedisLayout
from qim.stores.messages import MessageRef
from qim.stores.redis.reactions import RedisReactionStore
from qim.stores.redis.topology import topology_of
from tests.fixtures import redis_instances

TENANT = 7


@pytest.fixture(scope="module")
def two_cores(tmp_path_factory):
    """Two standalone Redis of this module's own: the core instances of the layout."""
    with redis_instances(tmp_path_factory.mktemp(n) for n in ("react-a", "react-b")) as engs:
        yield engs


def evalsha_calls(engine) -> int:
    """How many EVALSHA the instance has run (INFO commandstats; 0 before the first)."""
    stats = engine.client().info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def convs_per_instance(layout: RedisLayout, per: int) -> list[bytes]:
    """`per` group conversations of each core instance (by their commit bucket)."""
    found: dict[int, list[bytes]] = {i: [] for i in range(len(layout.core))}
    gid = 0
    while any(len(v) < per for v in found.values()):
        gid += 1
        conv = ids.conversation_id_group(TENANT, gid)
        at = found[layout.core_index(ids.commit_bucket(TENANT, conv))]
        if len(at) < per:
            at.append(conv)
    return [c for v in found.values() for c in v]


async def test_one_script_call_per_instance_for_a_page_of_many_conversations(two_cores):
    a, b = (e.addr for e in two_cores)
    layout = RedisLayout(core=(a, b), mailbox=(a, b), shard_count=8)
    topology = topology_of(layout)
    store = RedisReactionStore(topology)
    try:
        convs = convs_per_instance(layout, 3)
        refs = [MessageRef(conv, bytes(15) + bytes([k])) for conv in convs for k in (1, 2)]
        expected = []
        for n, (conv, mid) in enumerate(refs):  # every other message reacted to: 👍 by n users, ❤️ by reader 5 once
            if n % 2:
                expected.append([])
                continue
            for user in range(10, 10 + n // 2 + 1):
                await store.change(TENANT, conv, mid, user, "👍", True, 20)
            await store.change(TENANT, conv, mid, 5, "❤️", True, 20)
            expected.append(sorted([("👍", n // 2 + 1, False), ("❤️", 1, True)], key=lambda c: (-c[1], c[0])))
        assert {layout.core_index(ids.commit_bucket(TENANT, c)) for c, _ in refs} == {0, 1}  # both instances

        await store.summaries_of(TENANT, refs[:1] + refs[-1:], 5)  # the script loaded on both (a NOSCRIPT retry)
        before = [evalsha_calls(e) for e in two_cores]
        got = await store.summaries_of(TENANT, refs, 5)
        after = [evalsha_calls(e) for e in two_cores]
        assert [[(c.emoji, c.count, c.mine) for c in s.counts] for s in got] == expected
        assert [y - x for x, y in zip(before, after)] == [1, 1]  # one call per instance, not one per message
        for conv in convs:  # the same as the per-conversation read (history pages)
            mids = [mid for c, mid in refs if c == conv]
            assert await store.summaries(TENANT, conv, mids, 5) == [s for (c, _), s in zip(refs, got) if c == conv]
        before = [evalsha_calls(e) for e in two_cores]
        assert await store.summaries_of(TENANT, [], 5) == []
        assert [evalsha_calls(e) for e in two_cores] == before  # nothing to read: no call at all
    finally:
        await topology.aclose()
