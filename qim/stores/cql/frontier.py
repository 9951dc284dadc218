"""The shard frontier and the dispatch identity rows of the CQL MailboxStore
(docs/decisions/0102-cql-mailbox-store.md; tables: mailbox_schema.py).

No lightweight transaction on these paths; order comes from write timestamps:
- a frontier row per (shard, owner_epoch), written USING TIMESTAMP frontier_ts(offset)
  = offset + 1 (0 is the "nothing materialized yet" row of a fence), so a late or
  repeated lower write never overwrites a higher one; the HIGHEST EPOCH's row is the
  shard's watermark, so a stale owner's writes (to its own lower row) are never read;
- a dispatch identity row per (shard, dispatch_id), written USING TIMESTAMP
  identity_ts(offset) = 2^48-1-offset, so the EARLIEST observation of a dispatch wins
  whatever order the writes land in. Only 48-bit offsets fit: the timestamps stay below
  2^48 µs (1978), never in the server's "too far in the future" range.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple, Optional, Sequence

from qim.consts import MAILBOX_OFFSET_MASK
from qim.errors import MailboxDirty
from qim.stores.cql.mailbox_schema import IDENTITY_TTL_S
from qim.stores.cql.session import CqlSession
from qim.stores.errors import NotOwner


def frontier_ts(offset: int) -> int:
    """The write timestamp of a frontier row whose last materialized record is at
    `offset` (-1: none yet): offset + 1, so the highest offset wins."""
    return offset + 1


def identity_ts(offset: int) -> int:
    """The write timestamp of a dispatch identity observed at `offset`: 2^48-1-offset,
    so the earliest observation wins. ValueError for an offset outside 48 bits."""
    if not 0 <= offset <= MAILBOX_OFFSET_MASK:
        raise ValueError(f"log offset {offset} does not fit 48 bits")
    return MAILBOX_OFFSET_MASK - offset


class Frontier(NamedTuple):
    """The top (highest owner_epoch) frontier row of a shard."""

    epoch: int  # the owner_epoch that wrote it (0: unfenced tools and tests)
    blob: Optional[bytes]  # the packed watermark W, None before the first finish
    layout: int
    shard_epoch: int
    writer: bytes
    offset: int  # the offset of the last record materialized, -1 before the first


class Identity(NamedTuple):
    """A dispatch's identity row: digest, first mailbox_seq (8 bytes), first offset."""

    digest: bytes
    seq: bytes
    first_offset: int


class FrontierRows:
    """Reads and writes of mailbox_shard_frontier and mailbox_dispatch (prepared once)."""

    def __init__(self, session: CqlSession) -> None:
        self._s = session
        ks = session.keyspace
        self._top = (
            f"SELECT epoch, wm, layout, shard_epoch, writer, frontier_offset FROM "
            f"{ks}.mailbox_shard_frontier WHERE shard = ? LIMIT 1"
        )
        self._write = (
            f"INSERT INTO {ks}.mailbox_shard_frontier (shard, epoch, wm, layout, shard_epoch, writer, "
            "frontier_offset) VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
        )
        self._fence_empty = (
            f"INSERT INTO {ks}.mailbox_shard_frontier (shard, epoch, frontier_offset) "
            "VALUES (?, ?, -1) USING TIMESTAMP 0"
        )
        self._ident = f"SELECT digest, seq, first_offset FROM {ks}.mailbox_dispatch WHERE shard = ? AND dispatch_id = ?"
        self._ident_write = (
            f"INSERT INTO {ks}.mailbox_dispatch (shard, dispatch_id, digest, seq, first_offset) "
            "VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ? AND TTL ?"
        )

    async def top(self, shard: int) -> Optional[Frontier]:
        """The shard's frontier: its highest epoch's row, None when never fenced or written."""
        rows = await self._s.execute(await self._s.prepare(self._top), (shard,), "shard frontier read")
        if not rows:
            return None
        epoch, wm, layout, shard_epoch, writer, offset = rows[0]
        return Frontier(epoch, wm, layout or 0, shard_epoch or 1, writer or b"", -1 if offset is None else offset)

    async def fence(self, shard: int, fence: int) -> Optional[Frontier]:
        """Fence `shard` at owner_epoch `fence`: NotOwner when a higher epoch's row exists;
        else, when the top row is of a lower epoch, copy it into `fence`'s row under the
        same timestamp (the new owner continues from it; the old owner's later writes go to
        its own row, never read again). Returns the frontier as the new owner sees it."""
        top = await self.top(shard)
        held = 0 if top is None else top.epoch
        if held > fence:
            raise NotOwner(f"owner_epoch {fence} is stale: shard {shard} is fenced at {held}")
        if held == fence and top is not None:
            return top
        if top is None or top.blob is None:
            await self._s.execute(await self._s.prepare(self._fence_empty), (shard, fence), "shard fence")
            return None if top is None else top._replace(epoch=fence)
        await self.write(shard, fence, top.blob, top.layout, top.shard_epoch, top.writer, top.offset)
        return top._replace(epoch=fence)

    def owned(self, shard: int, top: Optional[Frontier], fence: int) -> None:
        """NotOwner unless the shard's top row is `fence`'s (0 for a shard nobody fenced):
        checked before a fenced call writes anything (decision 0102 says why a stale
        owner that passed this check just before a takeover is still safe)."""
        held = 0 if top is None else top.epoch
        if held != fence:
            raise NotOwner(f"owner_epoch {fence} is stale: shard {shard} is fenced at {held}")

    @staticmethod
    def compare(shard: int, top: Optional[Frontier], expected: Optional[bytes], new: bytes, writer: bytes) -> bool:
        """The watermark check before a finish or fused call writes anything: True when W
        is `expected` (write it), False when W already is `new` written by this same
        non-empty `writer` (decision 0024: the call applied before, its reply was lost),
        else MailboxDirty (another writer moved W: two owners)."""
        current = (top.blob if top is not None else None) or b""
        if current == (expected or b""):
            return True
        if writer and top is not None and current == new and top.writer == writer:
            return False
        raise MailboxDirty(f"shard {shard}: QIM_WM_CONFLICT watermark moved under us")

    async def write(
        self, shard: int, epoch: int, blob: bytes, layout: int, shard_epoch: int, writer: bytes, offset: int
    ) -> None:
        """Write `epoch`'s frontier row with timestamp frontier_ts(offset)."""
        await self._s.execute(
            await self._s.prepare(self._write),
            (shard, epoch, blob, layout, shard_epoch, writer, offset, frontier_ts(offset)),
            "shard frontier write",
        )

    async def identities(self, shard: int, dispatch_ids: Sequence[bytes]) -> dict[bytes, Identity]:
        """The identity rows of `dispatch_ids` that exist (read concurrently)."""
        ids = list(dict.fromkeys(dispatch_ids))
        stmt = await self._s.prepare(self._ident)
        rows = await asyncio.gather(*(self._s.execute(stmt, (shard, d), "dispatch identity read") for d in ids))
        return {d: Identity(*r[0]) for d, r in zip(ids, rows) if r}

    async def identity_write(self, shard: int, dispatch_id: bytes, digest: bytes, seq8: bytes, offset: int) -> tuple:
        """(prepared statement, params) of a dispatch identity row first seen at `offset`."""
        return (
            await self._s.prepare(self._ident_write),
            (shard, dispatch_id, digest, seq8, offset, identity_ts(offset), IDENTITY_TTL_S),
        )
