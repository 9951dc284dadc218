"""TieredMessageStore: one MessageStore over the hot tier (Redis) and the archive (CQL)
(docs/decisions/0023-archive-tier.md; seed 000 ADR-0018: "seq <= floor reads Scylla, above it Redis; with floor 0
exactly as Redis alone"; seed 004 §3; docs/decisions/0023-archive-tier.md).

Each conversation has a hot floor: the highest conversation_seq the trimmer removed
from Redis. Every read starts with the hot tier, which returns the floor it read at
together with the rows above it (one consistent snapshot: qim/stores/redis/hot.py);
whatever the call still needs at or below that floor comes from the archive, whose rows
up to the floor were checked against Redis before the trim. So a page across the seam
has no gap and no duplicate, and limit and byte budget count both halves.

State of archived messages: a recall or delete of a message already trimmed sets its
Redis state key at once (qim/stores/redis/lua/state_change.lua) and reaches the archive
when the archiver applies the CONTROL message; until then a read of the archived row
takes the state from Redis (overlay), so a recall is visible everywhere immediately.
Records read from the archive have version "" (no Redis copy to compare).
"""

from __future__ import annotations

from typing import Optional, Sequence

from qim.proto.v1 import message_pb2
from qim.stores.archive import HotHistory
from qim.stores.intervals import Interval, clip
from qim.stores.messages import (
    NEWER,
    OLDER,
    HistoryPage,
    MessageRef,
    MessageStore,
    Tail,
    TailQuery,
    VersionedRecord,
    budget_page,
)


def overlay(rec: message_pb2.MessageRecord, state: int) -> message_pb2.MessageRecord:
    """`rec` with a recall/delete the archive has not applied yet (no body)."""
    if state and rec.state != state:
        rec.state = state  # type: ignore[assignment]
        rec.body = b""
    return rec


class TieredMessageStore:
    """MessageStore: `hot` (HotHistory over Redis) above each hot floor, `cold` (the CQL
    MessageStore) at or below it. Errors: those of both (StoreUnavailable, StoreCorrupt)."""

    def __init__(self, hot: HotHistory, cold: MessageStore) -> None:
        self.hot = hot
        self.cold = cold

    async def history_page(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval], anchor: int,
                           direction: int, limit: int, max_bytes: int) -> HistoryPage:
        """MessageStore.history_page across the seam (see the module docstring)."""
        if direction == NEWER:
            records, more = await self._newer(tenant, conversation_id, intervals, anchor, limit)
            return budget_page(records, more, max_bytes)
        hot = await self.hot.page(tenant, conversation_id, intervals, anchor, direction, limit)
        records, more = hot.records, hot.found > limit
        below = clip(intervals, hot.floor)
        if not more and below:
            want = limit - len(records)
            cold = await self.cold.history_page(tenant, conversation_id, below, anchor, OLDER, want, 1 << 62)
            records = records + _overlaid(cold.records[:want], hot.pending)
            more = cold.has_more
        return budget_page(records, more, max_bytes)

    async def _newer(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval], anchor: int,
                     limit: int) -> tuple[list[message_pb2.MessageRecord], bool]:
        """A NEWER page: the archive up to the floor first (Redis is not read at all when
        that fills the page), then Redis; a floor raised between the two reads is covered
        by reading the archive up to the new floor too."""
        floor, pending = await self.hot.floor(tenant, conversation_id)
        records: list[message_pb2.MessageRecord] = []
        if anchor < floor and clip(intervals, floor):
            cold = await self.cold.history_page(tenant, conversation_id, clip(intervals, floor), anchor, NEWER, limit,
                                                1 << 62)
            records = _overlaid(cold.records, pending)
            if cold.has_more:
                return records, True
        hot = await self.hot.page(tenant, conversation_id, intervals, anchor, NEWER, limit)
        if hot.floor > floor and anchor < hot.floor:  # trimmed meanwhile: (old floor, new floor] is archived
            start = max(anchor, floor)
            gap = [(max(lo, start), hi) for lo, hi in clip(intervals, hot.floor) if (hi or hot.floor) > start]
            extra = await self.cold.history_page(tenant, conversation_id, gap, start, NEWER, limit, 1 << 62)
            records += _overlaid(extra.records, hot.pending)
            if len(records) > limit or extra.has_more:
                return records[:limit], True
        return (records + hot.records)[:limit], len(records) + hot.found > limit

    async def latest_seq(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval]) -> Optional[int]:
        """MessageStore.latest_seq: the hot tier's, else the archive's at or below the floor."""
        floor, seq = await self.hot.latest(tenant, conversation_id, intervals)
        if seq is not None or not floor:
            return seq
        below = clip(intervals, floor)
        return await self.cold.latest_seq(tenant, conversation_id, below) if below else None

    async def tails(self, tenant: int, queries: Sequence[TailQuery], window: int) -> list[Tail]:
        """MessageStore.tails: hot tails; the archive only for a conversation whose head is
        at or below its floor, or whose exact window reaches below it (seed 000: unread
        touches the archive only when the read position is below the floor)."""
        hot = await self.hot.tails(tenant, queries, window)
        need: list[tuple[int, TailQuery]] = []
        for i, (q, h) in enumerate(zip(queries, hot)):
            below = clip(q.intervals, h.floor)
            if not below:
                continue
            if h.head is None or (h.head.conversation_seq - q.base <= window and q.base < h.floor):
                need.append((i, TailQuery(q.conversation_id, below, q.base)))
        cold = await self.cold.tails(tenant, [q for _, q in need], window) if need else []
        by_index = dict(zip((i for i, _ in need), cold))
        out = []
        for i, (q, h) in enumerate(zip(queries, hot)):
            c = by_index.get(i)
            head = h.head if h.head is not None else (c.head if c else None)
            if head is None:
                out.append(Tail(None, None))
                continue
            if head.conversation_seq - q.base > window:
                out.append(Tail(head, None))
                continue
            rows = list(h.window) + _overlaid(list(c.window or []) if c else [], h.pending)
            out.append(Tail(_overlaid([head], h.pending)[0], rows))
        return out

    async def get(self, tenant: int, conversation_id: bytes, message_id: bytes) -> Optional[VersionedRecord]:
        """MessageStore.get: Redis, else the archive with the Redis state overlaid."""
        stored = await self.hot.get(tenant, conversation_id, message_id)
        if stored is not None:
            return stored
        stored = await self.cold.get(tenant, conversation_id, message_id)
        if stored is not None:
            state = (await self.hot.states(tenant, [MessageRef(conversation_id, message_id)]))[0]
            overlay(stored.record, state)
        return stored

    async def record_sizes(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """MessageStore.record_sizes: Redis sizes; absent ones from the archive."""
        sizes = await self.hot.record_sizes(tenant, refs)
        missing = [i for i, n in enumerate(sizes) if n == 0]
        if missing:
            for i, n in zip(missing, await self.cold.record_sizes(tenant, [refs[i] for i in missing])):
                sizes[i] = n
        return sizes

    async def resolve(self, tenant: int, records: Sequence[MessageRef],
                      states: Sequence[MessageRef]) -> tuple[list[Optional[message_pb2.MessageRecord]], list[int]]:
        """MessageStore.resolve: one Redis round trip; the archive only for what Redis no
        longer holds (records trimmed, and the state of trimmed inline entries)."""
        recs, rec_states, out_states, present = await self.hot.resolve(tenant, records, states)
        gone = [i for i, r in enumerate(recs) if r is None]
        cold_states = [i for i, (s, p) in enumerate(zip(out_states, present)) if not p and not s]
        if gone or cold_states:
            got, st = await self.cold.resolve(tenant, [records[i] for i in gone], [states[i] for i in cold_states])
            for i, rec in zip(gone, got):
                recs[i] = None if rec is None else overlay(rec, rec_states[i])
            for i, s in zip(cold_states, st):
                out_states[i] = s
        return recs, out_states


def _overlaid(recs: list[message_pb2.MessageRecord], pending: dict[bytes, int]) -> list[message_pb2.MessageRecord]:
    """`recs` with the pending states of trimmed messages applied (in place)."""
    if pending:
        for r in recs:
            overlay(r, pending.get(r.message_id, 0))
    return recs
