"""The CQL MailboxStore (qim/stores/mailboxes.py Protocol; docs/decisions/0102-cql-mailbox-store.md):
the second version of the original design, no LWT on the hot path.

- shard watermark: the shard frontier (frontier.py), one row per owner_epoch, the
  highest epoch's row wins; `load_watermark(fence=e)` copies the top row into e's and
  refuses with NotOwner when a higher epoch's row exists;
- DispatchProgress: the dispatch identity row (digest, first mailbox_seq, first offset;
  the earliest observation wins by write timestamp, 31-day TTL). A dispatch is DONE
  when its first offset is at or below the shard's frontier_offset: records are
  materialized in offset order and the frontier passes an offset only after every entry
  of the records up to it was written, so no completion flag is stored;
- `gc_dispatch_progress` collects nothing and returns 0 (`collects_dispatch_progress`
  False): the identity rows expire by TTL; start refuses a dispatch log retention +
  replay window of 31 days or more (qim/config/tier.py), so a record still replayable
  always finds its identity row;
- `fused`: the frontier and every record's identity row read concurrently, every check
  (fence, W compare, digests) made before anything is written, then every entry and
  index row written concurrently (a partition's rows as one UNLOGGED batch, at most
  CONCURRENCY requests in flight), then the frontier once.
The compare-and-set of W is a read-then-write checked under the owner's lease and its
epoch row (decision 0102 says why that is safe without LWT).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Optional, Sequence

from qim.consts import MAILBOX_RETENTION_MS_DEFAULT, WM_LAYOUT_V1
from qim.errors import MailboxDirty
from qim.stores.cql.frontier import Frontier, FrontierRows, Identity
from qim.stores.cql.mailbox_buckets import Buckets
from qim.stores.cql.session import CqlSession
from qim.stores.mailboxes import DUPLICATE, FRESH, RECOVERED, RESUME, FusedRecord, Retained

HINTS_MAX = 4096  # offsets of recent begins kept for finish (the frontier offset it writes)
FUSED_RECORDS_MAX = 64  # a fused call's page of records (decision 0102: paged finish)


def _done(ident: Identity, top: Optional[Frontier]) -> bool:
    """A begun dispatch is DONE once the frontier reached its first offset (module doc)."""
    return top is not None and ident.first_offset <= top.offset


class CqlMailboxStore:
    """MailboxStore over a CqlSession (see the Protocol for shapes and errors)."""

    collects_dispatch_progress = False  # identity rows expire by TTL (module doc)

    def __init__(self, session: CqlSession, retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT) -> None:
        self.session = session
        self.retention_ms = retention_ms
        self._frontier = FrontierRows(session)
        self._buckets = Buckets(session, retention_ms)
        self._hints: OrderedDict[tuple[int, bytes], int] = OrderedDict()

    def _hint(self, shard: int, dispatch_id: bytes, offset: int) -> None:
        self._hints[(shard, dispatch_id)] = offset
        self._hints.move_to_end((shard, dispatch_id))
        while len(self._hints) > HINTS_MAX:
            self._hints.popitem(last=False)

    async def load_watermark(self, shard: int, fence: Optional[int] = None) -> tuple[Optional[bytes], int]:
        """MailboxStore.load_watermark: the top frontier row (fenced first with `fence`)."""
        top = await (self._frontier.top(shard) if fence is None else self._frontier.fence(shard, fence))
        if top is None or top.blob is None:
            return None, 1 if top is None else top.shard_epoch
        if top.layout != WM_LAYOUT_V1:
            raise MailboxDirty(f"shard {shard}: unknown watermark layout {top.layout!r}")
        return top.blob, top.shard_epoch

    async def begin(
        self, shard: int, dispatch_id: bytes, digest: bytes, offset: int, seq8: bytes, fence: int = 0
    ) -> tuple[str, bytes]:
        """MailboxStore.begin: the frontier and the identity row read concurrently; a
        first observation writes the identity row (FRESH)."""
        top, idents = await asyncio.gather(self._frontier.top(shard), self._frontier.identities(shard, [dispatch_id]))
        self._frontier.owned(shard, top, fence)
        ident = idents.get(dispatch_id)
        self._hint(shard, dispatch_id, offset)
        if ident is not None:
            if ident.digest != digest:
                raise MailboxDirty(
                    f"shard {shard}: QIM_DIGEST_CONFLICT dispatch_id seen with another payload at offset {offset}"
                )
            return (DUPLICATE if _done(ident, top) else RESUME), ident.seq
        stmt, params = await self._frontier.identity_write(shard, dispatch_id, digest, seq8, offset)
        await self.session.execute(stmt, params, "dispatch identity write")
        return FRESH, seq8

    async def append(
        self,
        tenant: int,
        offset: int,
        day: int,
        members: Sequence[tuple[int, bytes]],
        shard: Optional[int] = None,
        fence: int = 0,
    ) -> None:
        """MailboxStore.append: with a shard, its fence checked first; every recipient's
        entry and day index row written concurrently."""
        if shard is not None:
            self._frontier.owned(shard, await self._frontier.top(shard), fence)
        calls = await self._buckets.writes((tenant, user, day, [(offset, entry)]) for user, entry in members)
        await self._buckets.run(calls, "mailbox append")

    async def finish(
        self,
        shard: int,
        epoch: int,
        dispatch_id: bytes,
        expected_wm: Optional[bytes],
        new_wm: bytes,
        writer: bytes = b"",
        fence: int = 0,
    ) -> bool:
        """MailboxStore.finish: fence and W checked on the top frontier row, then the
        fence's row written at the offset of this dispatch's latest begin (this process),
        else its identity's first offset, and never below the frontier + 1."""
        top = await self._frontier.top(shard)
        self._frontier.owned(shard, top, fence)
        if not self._frontier.compare(shard, top, expected_wm, new_wm, writer):
            return False
        offset = self._hints.get((shard, dispatch_id))
        if offset is None:
            ident = (await self._frontier.identities(shard, [dispatch_id])).get(dispatch_id)
            offset = ident.first_offset if ident is not None else -1
        current = -1 if top is None else top.offset
        await self._frontier.write(shard, fence, new_wm, WM_LAYOUT_V1, epoch, writer, max(offset, current + 1))
        return True

    async def fused(
        self,
        shard: int,
        epoch: int,
        records: Sequence[FusedRecord],
        expected_wm: Optional[bytes],
        new_wm: bytes,
        writer: bytes = b"",
        fence: int = 0,
        *,
        prevs: Optional[dict] = None,
    ) -> list[tuple[str, bytes]]:
        """MailboxStore.fused (module doc: reads, checks, entries, frontier); ValueError
        for more than FUSED_RECORDS_MAX records (the materializer's batches are smaller).
        `prevs` is left empty: no inline pushes from this store (decisions/0156)."""
        if not 0 < len(records) <= FUSED_RECORDS_MAX:
            raise ValueError(f"fused takes 1..{FUSED_RECORDS_MAX} records, not {len(records)}")
        top, idents = await asyncio.gather(
            self._frontier.top(shard), self._frontier.identities(shard, [r.dispatch_id for r in records])
        )
        self._frontier.owned(shard, top, fence)
        write = self._frontier.compare(shard, top, expected_wm, new_wm, writer)
        digest_of = {d: i.digest for d, i in idents.items()}
        for r in records:  # refusals before any write
            known = digest_of.setdefault(r.dispatch_id, r.digest)
            if known != r.digest:
                raise MailboxDirty(
                    f"shard {shard}: QIM_DIGEST_CONFLICT dispatch_id seen with another payload at offset {r.offset}"
                )
        out: list[tuple[str, bytes]] = []
        calls: list = []
        buckets: dict[tuple[int, int, int], list[tuple[int, bytes]]] = {}
        begun: dict[bytes, bytes] = {}
        for r in records:
            ident = idents.get(r.dispatch_id)
            if r.dispatch_id in begun:  # begun earlier in this call: done by the time it comes
                status, seq = DUPLICATE, begun[r.dispatch_id]
            elif ident is not None:
                status, seq = (DUPLICATE if _done(ident, top) else RESUME), ident.seq
            else:
                status, seq = FRESH, r.seq8
                calls.append(await self._frontier.identity_write(shard, r.dispatch_id, r.digest, r.seq8, r.offset))
            begun[r.dispatch_id] = seq
            out.append((status if write else RECOVERED, seq))
            if status == DUPLICATE:
                continue
            for user, member in r.members:
                # a RESUME appends with the first attempt's mailbox_seq (idempotent entries)
                buckets.setdefault((r.tenant, user, r.day), []).append(
                    (r.offset, member if seq == r.seq8 else seq + member[8:])
                )
        if not write:  # this writer's own call applied before (decision 0024): nothing to write
            return out
        calls += await self._buckets.writes((t, u, d, rows) for (t, u, d), rows in buckets.items())
        await self._buckets.run(calls, "mailbox fused")
        current = -1 if top is None else top.offset
        last = max(r.offset for r in records)
        await self._frontier.write(shard, fence, new_wm, WM_LAYOUT_V1, epoch, writer, max(last, current + 1))
        return out

    async def trim_and_days(self, tenant: int, user_id: int, now_ms: Optional[int] = None) -> Retained:
        """MailboxStore.trim_and_days (mailbox_buckets.py; the cutoff on the CQL server's clock)."""
        return await self._buckets.trim_and_days(tenant, user_id, now_ms)

    async def trim_entries(self, tenant: int, user_id: int, day: int, members: Sequence[tuple[bytes, int]]) -> int:
        """MailboxStore.trim_entries (mailbox_buckets.py)."""
        return await self._buckets.trim_entries(tenant, user_id, day, members)

    async def read_range(
        self, tenant: int, user_id: int, days: Sequence[int], after_offset: int, upto_offset: int, limit: int
    ) -> list[tuple[bytes, int]]:
        """MailboxStore.read_range (mailbox_buckets.py)."""
        return await self._buckets.read_range(tenant, user_id, days, after_offset, upto_offset, limit)

    async def gc_dispatch_progress(self, shard: int, upto_offset: int, batch: int = 512) -> int:
        """MailboxStore.gc_dispatch_progress: always 0. Identity rows are never collected
        here; they expire with their 31-day TTL (decision 0102), which start-up keeps
        longer than the dispatch log's retention plus the replay window."""
        return 0

    async def check(self) -> None:
        """The mailbox schema check (EngineError naming `qimctl schema apply`)."""
        from qim.stores.cql import mailbox_schema

        await self.session.open()
        await mailbox_schema.check(self.session)
