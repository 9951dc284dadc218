"""ReactionStore on a Redis of its own (qim/stores/reactions.py; docs/decisions/0121): adding
and removing are idempotent per (user, message, emoji), counts never go below one (an
emoji at zero leaves the summary), a new emoji past the distinct cap is refused as full
while an emoji already there is still counted, and a page of summaries says which
emoji are the reader's."""

from __future__ import annotations

from qim._core import ids
from qim.infra.redis.client import connect
from qim.stores.redis.reactions import RedisReactionStore

CONV = ids.conversation_id_group(7, 77)
M1, M2, M3 = bytes(15) + b"\x01", bytes(15) + b"\x02", bytes(15) + b"\x03"


def shown(summary) -> list[tuple[str, int, bool]]:
    return [(c.emoji, c.count, c.mine) for c in summary.counts]


async def test_idempotent_counts_cap_and_readers(private_redis):
    client = connect(private_redis.addr)
    store = RedisReactionStore(client)
    try:
        first = await store.change(7, CONV, M1, 5, "👍", True, 3)
        assert first.changed and not first.full and shown(first.summary) == [("👍", 1, True)]
        again = await store.change(7, CONV, M1, 5, "👍", True, 3)  # the same (user, message, emoji)
        assert not again.changed and shown(again.summary) == [("👍", 1, True)]
        assert (await store.change(7, CONV, M1, 6, "👍", True, 3)).summary.counts[0].count == 2
        await store.change(7, CONV, M1, 6, "❤️", True, 3)
        await store.change(7, CONV, M1, 6, "🎉", True, 3)
        full = await store.change(7, CONV, M1, 6, "🦄", True, 3)  # a 4th distinct emoji
        assert full.full and not full.changed and "🦄" not in {c.emoji for c in full.summary.counts}
        assert (await store.change(7, CONV, M1, 5, "🎉", True, 3)).changed  # present already: counted
        gone = await store.change(7, CONV, M1, 6, "❤️", False, 3)
        assert gone.changed and "❤️" not in {c.emoji for c in gone.summary.counts}
        assert not (await store.change(7, CONV, M1, 6, "❤️", False, 3)).changed  # removing what is absent
        assert shown(gone.summary) == [("🎉", 2, True), ("👍", 2, True)]  # most first, ties by emoji; 6 has both

        await store.change(7, CONV, M3, 6, "😂", True, 3)
        pages = await store.summaries(7, CONV, [M1, M2, M3], 5)
        assert [shown(s) for s in pages] == [[("🎉", 2, True), ("👍", 2, True)], [], [("😂", 1, False)]]
        assert await store.summaries(7, CONV, [], 5) == []
    finally:
        await client.aclose()
