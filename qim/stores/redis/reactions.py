"""ReactionStore on Redis (qim/stores/reactions.py; docs/decisions/0121): per message a
HASH emoji -> count and a SET of "<user>:<emoji>", in the conversation's commit bucket
(keys.py CommitKeys.reactions / reactors) so they live on the instance holding the
conversation's other keys and move with its bucket (decisions 0096, 0113); the HASH
also holds the summary's version (a field no emoji can be named: lua/reaction_lib.lua),
bumped by the change that moves the summary. A change is
one script call by cached SHA (lua/reaction_change.lua), a page of summaries one more
(lua/reaction_read.lua), and the summaries of a mailbox page, whatever its conversations,
one call of it per core instance holding some of them (`summaries_of`)."""

from __future__ import annotations

from typing import Any, Sequence

from qim.stores.errors import StoreCorrupt
from qim.stores.messages import MessageRef
from qim.stores.reactions import Change, EmojiCount, Summary
from qim.stores.redis.keys import CommitKeys
from qim.stores.redis.scripts import Scripts
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def summary_of(flat: Sequence[Any]) -> Summary:
    """A Summary from the scripts' flat {version, emoji, count, mine, ...} (lua/reaction_lib.lua;
    StoreCorrupt when not that)."""
    try:
        version = int(flat[0])
        counts = [EmojiCount(_text(flat[i]), int(flat[i + 1]), bool(int(flat[i + 2])))
                  for i in range(1, len(flat), 3)]
    except (ValueError, IndexError, UnicodeDecodeError):
        raise StoreCorrupt("corrupt reaction summary") from None
    return Summary(tuple(sorted((c for c in counts if c.count > 0), key=lambda c: (-c.count, c.emoji))), version)


class RedisReactionStore:
    """ReactionStore over a RedisTopology or one redis-py client (module doc)."""

    def __init__(self, client: Any) -> None:
        self._t = as_topology(client)
        self._scripts: dict[int, Scripts] = {}

    def _of(self, keys: CommitKeys) -> Scripts:
        return self._on(self._t.core(keys.bucket))

    def _on(self, client: Any) -> Scripts:
        scripts = self._scripts.get(id(client))
        if scripts is None:
            scripts = self._scripts[id(client)] = Scripts(client, ["reaction_change", "reaction_read"])
        return scripts

    async def change(self, tenant: int, conversation_id: bytes, message_id: bytes, user: int, emoji: str,
                     add: bool, max_distinct: int) -> Change:
        """ReactionStore.change: one call of lua/reaction_change.lua."""
        keys = CommitKeys(tenant, conversation_id)
        changed, full, flat = await self._of(keys).call(
            "reaction_change", [keys.reactions(message_id), keys.reactors(message_id)],
            [user, emoji, "add" if add else "remove", max_distinct])
        return Change(bool(changed), bool(full), summary_of(flat))

    async def summaries(self, tenant: int, conversation_id: bytes, message_ids: Sequence[bytes],
                        reader: int) -> list[Summary]:
        """ReactionStore.summaries: one call of lua/reaction_read.lua (none for no ids)."""
        if not message_ids:
            return []
        keys = CommitKeys(tenant, conversation_id)
        flat_keys = [k for mid in message_ids for k in (keys.reactions(mid), keys.reactors(mid))]
        replies = await self._of(keys).call("reaction_read", flat_keys, [reader])
        return [summary_of(flat) for flat in replies]

    async def summaries_of(self, tenant: int, refs: Sequence[MessageRef], reader: int) -> list[Summary]:
        """ReactionStore.summaries_of: one call of lua/reaction_read.lua per core instance
        holding some of the messages, the instances concurrently (none for no refs). One
        script may name keys of several commit buckets: they are all on that instance
        (decision 0096), and the script reads them in one atomic step."""
        async def read(client: Any, part: list[MessageRef]) -> list[Summary]:
            flat_keys = []
            for conv, mid in part:
                keys = CommitKeys(tenant, conv)
                flat_keys += [keys.reactions(mid), keys.reactors(mid)]
            replies = await self._on(client).call("reaction_read", flat_keys, [reader])
            return [summary_of(flat) for flat in replies]
        return await spread(self._t, refs, lambda ref: self._t.core(CommitKeys(tenant, ref[0]).bucket), read)
