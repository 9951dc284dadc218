"""MessageStore over the archived history in CQL (docs/decisions/0023; qim/stores/messages.py is the
contract; the same vectors run against it in tests/stores).

A page reads the history index partition by partition ((tenant, conversation, bucket),
seq order), one query per bucket it needs, LIMIT the rows still wanted; the rows carry
the whole record, so there is no second round trip. Reads by message_id (get, resolve,
record_sizes) are point reads of message_record, all of one call concurrently. An
unbounded range (the newest interval of a member, a direct conversation) ends at the
conversation's archived max_seq. Versions of records read here are "" (a record below
the hot floor has no Redis copy to compare: qim/stores/redis/lua/state_change.lua).
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional, Sequence

from qim.consts import CQL_READ_CONCURRENCY
from qim.proto.v1 import message_pb2
from qim.stores.cql.codec import RECORD_COLUMNS, buckets_between, record_of, tenant_blob
from qim.stores.cql.session import CqlSession
from qim.stores.intervals import Interval, ascending_ranges, descending_ranges
from qim.stores.messages import NEWER, OLDER, HistoryPage, MessageRef, Tail, TailQuery, VersionedRecord, budget_page

ARCHIVED_VERSION = ""  # the version of a record read from the archive (no Redis copy)


class CqlMessageStore:
    """MessageStore (read side) over CqlSession `session` (see the Protocol)."""

    def __init__(self, session: CqlSession) -> None:
        self._s = session
        ks = session.keyspace
        where = "WHERE tenant = ? AND conversation_id = ? AND bucket = ? AND conversation_seq > ? AND conversation_seq <= ?"
        self._cql = {
            "asc": f"SELECT {RECORD_COLUMNS} FROM {ks}.conversation_history {where} ORDER BY conversation_seq ASC LIMIT ?",
            "desc": f"SELECT {RECORD_COLUMNS} FROM {ks}.conversation_history {where} ORDER BY conversation_seq DESC "
                    "LIMIT ?",
            "max": f"SELECT max_seq FROM {ks}.conversation_archive WHERE tenant = ? AND conversation_id = ?",
            "record": f"SELECT {RECORD_COLUMNS} FROM {ks}.message_record WHERE tenant = ? AND message_id = ?",
        }

    async def _run(self, name: str, params: Sequence[Any], what: str) -> list:
        return await self._s.execute(await self._s.prepare(self._cql[name]), params, what)

    async def max_seq(self, tenant: int, conversation_id: bytes) -> int:
        """The highest conversation_seq archived for the conversation (0: none)."""
        rows = await self._run("max", (tenant_blob(tenant), conversation_id), "archive bound")
        return rows[0][0] if rows and rows[0][0] is not None else 0

    async def _bounded(self, tenant: int, conversation_id: bytes, ranges: list[Interval]) -> list[tuple[int, int]]:
        if any(hi is None for _, hi in ranges):
            top = await self.max_seq(tenant, conversation_id)
            return [(lo, top if hi is None else hi) for lo, hi in ranges if (top if hi is None else hi) > lo]
        return [(lo, hi) for lo, hi in ranges if hi is not None and hi > lo]

    async def scan(self, tenant: int, conversation_id: bytes, ranges: list[Interval], direction: int,
                   want: int) -> list:
        """Up to `want` RECORD_COLUMNS rows over `ranges` ((lo, hi]: in the order given,
        each ascending for NEWER, descending for OLDER), bucket by bucket."""
        t = tenant_blob(tenant)
        rows: list = []
        for lo, hi in await self._bounded(tenant, conversation_id, ranges):
            buckets = list(buckets_between(lo, hi))
            if direction == OLDER:
                buckets.reverse()
            for b in buckets:
                if len(rows) >= want:
                    return rows
                rows += await self._run("asc" if direction == NEWER else "desc",
                                        (t, conversation_id, b, lo, hi, want - len(rows)), "history page")
        return rows

    async def history_page(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval], anchor: int,
                           direction: int, limit: int, max_bytes: int) -> HistoryPage:
        """MessageStore.history_page over the history index (one query per bucket read)."""
        if direction == NEWER:
            ranges = ascending_ranges(intervals, anchor)
        elif direction == OLDER:
            ranges = descending_ranges(intervals, anchor - 1 if anchor else None)
        else:
            raise ValueError(f"unknown history direction {direction}")
        rows = await self.scan(tenant, conversation_id, ranges, direction, limit + 1)
        t = tenant_blob(tenant)
        return budget_page((record_of(row, t, f"at conversation_seq {row[0]} of {conversation_id.hex()}")
                            for row in rows[:limit]), len(rows) > limit, max_bytes)

    async def latest_seq(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval]) -> Optional[int]:
        """MessageStore.latest_seq: the first row of the newest non-empty interval."""
        rows = await self.scan(tenant, conversation_id, descending_ranges(intervals, None), OLDER, 1)
        return rows[0][0] if rows else None

    async def tails(self, tenant: int, queries: Sequence[TailQuery], window: int) -> list[Tail]:
        """MessageStore.tails: every query concurrently (head, then the window when exact)."""
        return list(await asyncio.gather(*(self._tail(tenant, q, window) for q in queries)))

    async def _tail(self, tenant: int, q: TailQuery, window: int) -> Tail:
        t = tenant_blob(tenant)
        ranges = descending_ranges(q.intervals, None)
        head_rows = await self.scan(tenant, q.conversation_id, ranges, OLDER, 1)
        if not head_rows:
            return Tail(None, None)
        head = record_of(head_rows[0], t, f"at the head of {q.conversation_id.hex()}")
        if head.conversation_seq - q.base > window:
            return Tail(head, None)
        above = [(max(lo, q.base), hi) for lo, hi in ranges if hi is None or hi > max(lo, q.base)]
        rows = await self.scan(tenant, q.conversation_id, above, OLDER, window + 1)
        return Tail(head, [record_of(r, t, f"in the tail of {q.conversation_id.hex()}") for r in rows])

    async def _by_id(self, tenant: int, refs: Sequence[MessageRef]) -> list[Optional[message_pb2.MessageRecord]]:
        t = tenant_blob(tenant)
        stmt = await self._s.prepare(self._cql["record"])
        found = await self._s.execute_all(stmt, [(t, mid) for _, mid in refs], CQL_READ_CONCURRENCY, "record read")
        out: list[Optional[message_pb2.MessageRecord]] = []
        for (conv, mid), rows in zip(refs, found):
            rec = record_of(rows[0], t, f"{mid.hex()}") if rows else None
            out.append(rec if rec is not None and rec.conversation_id == conv else None)
        return out

    async def get(self, tenant: int, conversation_id: bytes, message_id: bytes) -> Optional[VersionedRecord]:
        """MessageStore.get: one point read; the version is ARCHIVED_VERSION."""
        rec = (await self._by_id(tenant, [MessageRef(conversation_id, message_id)]))[0]
        return None if rec is None else VersionedRecord(rec, ARCHIVED_VERSION)

    async def record_sizes(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """MessageStore.record_sizes: the serialized size of each record (0 when absent)."""
        return [0 if r is None else r.ByteSize() for r in await self._by_id(tenant, refs)]

    async def resolve(self, tenant: int, records: Sequence[MessageRef],
                      states: Sequence[MessageRef]) -> tuple[list[Optional[message_pb2.MessageRecord]], list[int]]:
        """MessageStore.resolve: point reads of both lists, concurrently."""
        recs = await self._by_id(tenant, list(records) + list(states))
        return recs[:len(records)], [0 if r is None else r.state for r in recs[len(records):]]

