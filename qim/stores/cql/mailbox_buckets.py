"""The users' side of the CQL MailboxStore (docs/decisions/0102-cql-mailbox-store.md):
the per-day entry partitions, the day index with the trim boundary, range reads and
retention trims. Tables: mailbox_schema.py.

Retention (docs/decisions/0013, 0032): an entry row's TTL ends a retention after its
day's end plus CLOCK_GRACE_S; the cutoff a read applies is the CQL server's clock
(`toUnixTimestamp(now())`, read with the index), and whole days past it are deleted by
`trim`, so the TTL only reclaims space and a host clock behind the server's never makes
a bucket vanish while the index still lists it (0032's CURSOR_EXPIRED hole).
Monotone columns: the day's `hi` (USING TIMESTAMP hi+1) and the `trim` boundary
(USING TIMESTAMP trim+1); a day row is deleted USING TIMESTAMP hi+1, so only a write of
a higher offset can bring that day back.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from typing import Iterable, Optional, Sequence

from qim.consts import DAY_MS, MAILBOX_INDEX_GRACE_MS
from qim.stores.cql.session import CqlSession, partition_batch
from qim.stores.mailboxes import Retained

CLOCK_GRACE_S = 3600  # host vs server clock allowance on the entry TTL (module doc)
CONCURRENCY = 64  # requests in flight per call (bounded: docs/decisions/0102)


class Buckets:
    """Entries, day index and trim boundary of users' mailboxes (statements prepared once)."""

    def __init__(self, session: CqlSession, retention_ms: int) -> None:
        self._s = session
        self.retention_ms = retention_ms
        self.index_ttl_s = -(-(retention_ms + DAY_MS + MAILBOX_INDEX_GRACE_MS) // 1000)
        ks = session.keyspace
        self._entry = (
            f"INSERT INTO {ks}.mailbox_entry (tenant, user_id, day, log_offset, entry) "
            "VALUES (?, ?, ?, ?, ?) USING TTL ?"
        )
        self._day = (
            f"INSERT INTO {ks}.mailbox_days (tenant, user_id, day, hi) VALUES (?, ?, ?, ?) USING TIMESTAMP ? AND TTL ?"
        )
        self._trim = (
            f"UPDATE {ks}.mailbox_days USING TIMESTAMP ? AND TTL ? SET trim = ? WHERE tenant = ? AND user_id = ?"
        )
        self._index = f"SELECT day, hi, trim FROM {ks}.mailbox_days WHERE tenant = ? AND user_id = ?"
        self._drop_day = f"DELETE FROM {ks}.mailbox_days USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND day = ?"
        self._drop_bucket = f"DELETE FROM {ks}.mailbox_entry WHERE tenant = ? AND user_id = ? AND day = ?"
        self._drop_entry = (
            f"DELETE FROM {ks}.mailbox_entry WHERE tenant = ? AND user_id = ? AND day = ? AND log_offset = ?"
        )
        self._range = (
            f"SELECT log_offset, entry FROM {ks}.mailbox_entry WHERE tenant = ? AND user_id = ? AND day = ? "
            "AND log_offset > ? AND log_offset <= ? LIMIT ?"
        )

    def entry_ttl_s(self, day: int, now_ms: Optional[int] = None) -> int:
        """Seconds an entry of `day` lives from now: to the day's end + retention, plus
        CLOCK_GRACE_S (1 for a day already wholly past: gone almost at once, as in Redis)."""
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        left = -(-((day + 1) * DAY_MS + self.retention_ms - now) // 1000)
        return left + CLOCK_GRACE_S if left > 0 else 1

    async def writes(self, tenant_rows: Iterable[tuple[int, int, int, Sequence[tuple[int, bytes]]]]) -> list:
        """(statement, params) writing each (tenant, user, day, [(offset, entry), ...]):
        one partition's entries as one UNLOGGED batch (a single mutation per replica),
        then the day index row with the bucket's highest offset."""
        entry, day_stmt = await self._s.prepare(self._entry), await self._s.prepare(self._day)
        now = time.time_ns() // 1_000_000
        calls: list = []
        for tenant, user, day, rows in tenant_rows:
            ttl = self.entry_ttl_s(day, now)
            stmts = [(entry, (tenant, user, day, offset, blob, ttl)) for offset, blob in rows]
            calls.append(stmts[0] if len(stmts) == 1 else (partition_batch(stmts), None))
            hi = max(offset for offset, _ in rows)
            calls.append((day_stmt, (tenant, user, day, hi, hi + 1, self.index_ttl_s)))
        return calls

    async def run(self, calls: list, what: str) -> None:
        """Every call concurrently (at most CONCURRENCY in flight); the first error after all ended."""
        await self._s.execute_many(calls, CONCURRENCY, what)

    async def server_now_ms(self) -> int:
        """The CQL coordinator's clock (ms): the clock a read's retention cutoff uses."""
        rows = await self._s.execute("SELECT toUnixTimestamp(now()) FROM system.local", None, "server clock")
        return int(rows[0][0])

    async def trim_and_days(self, tenant: int, user_id: int, now_ms: Optional[int]) -> Retained:
        """MailboxStore.trim_and_days: the index and the server clock read concurrently,
        then the whole days past the cutoff deleted (buckets, index rows) and the trim
        boundary raised to their highest offset."""
        index_stmt = await self._s.prepare(self._index)
        rows, clock = await asyncio.gather(
            self._s.execute(index_stmt, (tenant, user_id), "mailbox index read"),
            self.server_now_ms() if now_ms is None else asyncio.sleep(0, now_ms),
        )
        cutoff = int(clock) - self.retention_ms
        if not rows:
            return Retained([], -1, False, cutoff)
        trim = rows[0][2] if rows[0][2] is not None else -1
        index = sorted((day, hi) for day, hi, _ in rows if day is not None)
        expired = [(d, hi) for d, hi in index if (d + 1) * DAY_MS <= cutoff]
        if expired:
            trim = max([trim] + [hi for _, hi in expired])
            drop_day, drop_bucket = await self._s.prepare(self._drop_day), await self._s.prepare(self._drop_bucket)
            calls: list = [(await self._s.prepare(self._trim), (trim + 1, self.index_ttl_s, trim, tenant, user_id))]
            for d, hi in expired:
                calls += [(drop_bucket, (tenant, user_id, d)), (drop_day, (hi + 1, tenant, user_id, d))]
            await self.run(calls, "mailbox trim")
        return Retained([d for d, _ in index[len(expired) :]], trim, True, cutoff)

    async def trim_entries(self, tenant: int, user_id: int, day: int, members: Sequence[tuple[bytes, int]]) -> int:
        """MailboxStore.trim_entries: the entries at those offsets deleted and the trim
        boundary raised to their highest offset; returns the boundary."""
        hi = max(offset for _, offset in members)
        rows = await self._s.execute(await self._s.prepare(self._index), (tenant, user_id), "mailbox index read")
        stored = rows[0][2] if rows and rows[0][2] is not None else -1
        drop = await self._s.prepare(self._drop_entry)
        calls: list = [(drop, (tenant, user_id, day, offset)) for _, offset in members]
        calls.append((await self._s.prepare(self._trim), (hi + 1, self.index_ttl_s, hi, tenant, user_id)))
        await self.run(calls, "mailbox trim entries")
        return max(stored, hi)

    async def read_range(
        self, tenant: int, user_id: int, days: Sequence[int], after_offset: int, upto_offset: int, limit: int
    ) -> list[tuple[bytes, int]]:
        """MailboxStore.read_range: one bounded query per day partition (concurrently),
        merged by offset."""
        if upto_offset <= after_offset or not days:
            return []
        stmt = await self._s.prepare(self._range)
        per_day = await self._s.execute_all(
            stmt, [(tenant, user_id, d, after_offset, upto_offset, limit) for d in days], CONCURRENCY, "mailbox read"
        )
        out = []
        for offset, entry in heapq.merge(*([(o, e) for o, e in rows] for rows in per_day)):
            out.append((entry, offset))
            if len(out) == limit:
                break
        return out
