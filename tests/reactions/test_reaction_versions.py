"""The summary version on a Redis of its own (lua/reaction_change.lua; decision 0121,
amended: versions): many clients change one message's reactions concurrently; every change
gets its own version, assigned in the same atomic call, so the versions are 1..N with no
gap or repeat, the summary each change returned is exactly the state after the first v
changes taken in version order (the order the script calls ran), and the summary a
reader gets afterwards is the one of the highest version. A repeat or a refused add
takes no version; the version stays when the last reaction goes."""

from __future__ import annotations

import asyncio
from collections import Counter

from qim._core import ids
from qim.infra.redis.client import connect
from qim.stores.messages import MessageRef
from qim.stores.reactions import Summary
from qim.stores.redis.reactions import RedisReactionStore

CONV = ids.conversation_id_group(7, 78)
MSG, OTHER = bytes(15) + b"\x05", bytes(15) + b"\x06"
CLIENTS = 8
EMOJI = ["👍", "❤️", "😂", "🎉"]


def counts(summary) -> dict[str, int]:
    return {c.emoji: c.count for c in summary.counts}


async def test_versions_follow_the_script_order_under_concurrent_clients(private_redis):
    conns = [connect(private_redis.addr) for _ in range(CLIENTS)]
    stores = [RedisReactionStore(c) for c in conns]
    try:
        async def member(i: int) -> list[tuple[str, bool, Summary]]:  # user 100+i adds all, then removes all
            done = []
            for add in (True, False):
                for e in EMOJI:
                    change = await stores[i].change(7, CONV, MSG, 100 + i, e, add, 20)
                    assert change.changed
                    done.append((e, add, change.summary))
            return done
        changes = [c for part in await asyncio.gather(*(member(i) for i in range(CLIENTS))) for c in part]

        n = CLIENTS * len(EMOJI) * 2
        assert sorted(s.version for _, _, s in changes) == list(range(1, n + 1))  # one each, no gap
        state: Counter = Counter()
        for emoji, add, summary in sorted(changes, key=lambda c: c[2].version):
            state[emoji] += 1 if add else -1
            assert counts(summary) == {e: k for e, k in state.items() if k > 0}, summary.version
        [final] = await stores[0].summaries(7, CONV, [MSG], 100)
        assert final.counts == () and final.version == n  # emptied, and the version stayed

        repeat = await stores[0].change(7, CONV, MSG, 100, "👍", False, 20)  # removing what is absent
        assert not repeat.changed and repeat.summary.version == n
        again = await stores[0].change(7, CONV, MSG, 100, "👍", True, 20)
        assert again.summary.version == n + 1 and counts(again.summary) == {"👍": 1}
        assert (await stores[1].change(7, CONV, MSG, 100, "👍", True, 20)).summary.version == n + 1  # a repeat
        full = await stores[1].change(7, CONV, MSG, 101, "🦄", True, 1)  # past the cap of 1 distinct
        assert full.full and full.summary.version == n + 1
        other = await stores[2].change(7, CONV, OTHER, 100, "👍", True, 20)
        assert other.summary.version == 1  # per message
        pulled = await stores[3].summaries_of(7, [MessageRef(CONV, MSG), MessageRef(CONV, OTHER)], 100)
        assert [(counts(s), s.version, s.counts[0].mine) for s in pulled] == [({"👍": 1}, n + 1, True),
                                                                            ({"👍": 1}, 1, True)]
    finally:
        for c in conns:
            await c.aclose()
