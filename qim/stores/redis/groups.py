"""GroupStore on Redis (qim/stores/groups.py): meta and member HASHes and snapshot
STRINGs in the group conversation's commit bucket (keys.py), written by the commit
store's group_change.lua; a group's keys live on the core instance of its commit
bucket, and a read over several groups is split per instance (docs/decisions/0096)."""

from __future__ import annotations

from typing import Optional, Sequence

from pyroaring import BitMap64

from qim.stores.errors import StoreCorrupt
from qim.stores.groups import GroupSendView, GroupView, MemberView, SnapshotKey, decode_members
from qim.stores.intervals import Interval, parse_intervals
from qim.stores.redis.keys import CommitKeys
from qim.stores.redis.scripts import boundary
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology


def intervals_or_corrupt(raw: bytes, conversation_id: bytes) -> tuple[Interval, ...]:
    """Parsed member intervals; StoreCorrupt naming the group otherwise."""
    try:
        return parse_intervals(raw)
    except ValueError:
        raise StoreCorrupt(f"corrupt member interval for group {conversation_id.hex()}") from None


class RedisGroupStore:
    """GroupStore over the core instances of a RedisTopology (or one redis-py client;
    see the Protocol for shapes and errors)."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)

    async def read(self, tenant: int, conversation_id: bytes) -> GroupView:
        """GroupStore.read: HGETALL of meta and members, one pipeline."""
        keys = CommitKeys(tenant, conversation_id)
        with boundary("group read"):
            async with self._t.core(keys.bucket).pipeline(transaction=False) as pipe:
                pipe.hgetall(keys.group_meta())
                pipe.hgetall(keys.group_members())
                meta, members = await pipe.execute()
        try:
            view = GroupView(int(meta[b"ver"]) if b"ver" in meta else None, int(meta.get(b"owner", b"0")),
                             int(meta.get(b"gid", b"0")))
            for user, raw in members.items():
                view.members[int(user)] = intervals_or_corrupt(raw, conversation_id)
        except ValueError:
            raise StoreCorrupt(f"corrupt group meta for {conversation_id.hex()}") from None
        return view

    async def send_view(self, tenant: int, conversation_id: bytes, user: int) -> GroupSendView:
        """GroupStore.send_view: the meta's version and member count (written by every
        group change), the sender's mute field and member field, one pipeline; StoreCorrupt when
        the meta has a version without a count."""
        keys = CommitKeys(tenant, conversation_id)
        with boundary("group read"):
            async with self._t.core(keys.bucket).pipeline(transaction=False) as pipe:
                pipe.hmget(keys.group_meta(), "ver", "count", f"mute:{user}")  # mutes.py mute_field (0127)
                pipe.hget(keys.group_members(), user)
                (ver, count, mute), raw = await pipe.execute()
        if ver is None:
            return GroupSendView(None, 0, None)
        try:
            version, member_count = int(ver), int(count)
        except (TypeError, ValueError):
            raise StoreCorrupt(f"corrupt group meta for {conversation_id.hex()}") from None
        return GroupSendView(version, member_count,
                             None if raw is None else intervals_or_corrupt(raw, conversation_id),
                             None if mute is None else mute.decode("utf-8", errors="replace"))

    async def intervals_of(self, tenant: int, conversation_id: bytes, user: int) -> Optional[tuple[Interval, ...]]:
        """GroupStore.intervals_of: one HGET of the members HASH."""
        keys = CommitKeys(tenant, conversation_id)
        with boundary("member read"):
            raw = await self._t.core(keys.bucket).hget(keys.group_members(), user)
        return None if raw is None else intervals_or_corrupt(raw, conversation_id)

    async def member_views(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[MemberView]:
        """GroupStore.member_views: an HGET and an HMGET (gid, title) per group, one pipeline."""
        async def views(client, convs: list[bytes]) -> list[tuple]:
            with boundary("member read"):
                async with client.pipeline(transaction=False) as pipe:
                    for conv in convs:
                        keys = CommitKeys(tenant, conv)
                        pipe.hget(keys.group_members(), user)
                        pipe.hmget(keys.group_meta(), "gid", "title")
                    res = await pipe.execute()
            return [(res[2 * i], res[2 * i + 1]) for i in range(len(convs))]
        got = await spread(self._t, conversation_ids,
                           lambda conv: self._t.core(CommitKeys(tenant, conv).bucket), views)
        out = []
        for conv, (raw, (gid, title)) in zip(conversation_ids, got):
            out.append(MemberView(None if raw is None else intervals_or_corrupt(raw, conv),
                                  None if gid is None else int(gid),
                                  (title or b"").decode("utf-8", errors="replace")))
        return out

    async def snapshots(self, keys: Sequence[SnapshotKey]) -> list[Optional[BitMap64]]:
        """GroupStore.snapshots: one GET per version, one pipeline."""
        async def gets(client, part: list[SnapshotKey]) -> list:
            with boundary("member snapshot read"):
                async with client.pipeline(transaction=False) as pipe:
                    for tenant, conv, version in part:
                        pipe.get(CommitKeys(tenant, conv).group_snapshot(version))
                    return await pipe.execute()
        raws = await spread(self._t, keys, lambda k: self._t.core(CommitKeys(k[0], k[1]).bucket), gets)
        return [None if raw is None else decode_members(raw) for raw in raws]
