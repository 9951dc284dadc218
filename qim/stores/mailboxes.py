"""MailboxStore: user mailboxes, DispatchProgress and shard watermarks (docs/design.md §3
packed watermark, §5.4–5.5, §8; seed 001 §2.6, seed 004 §5).

A user's mailbox holds one entry per (user, mailbox_seq): the 8-byte mailbox_seq ‖ the
event group, ordered by the 48-bit log offset of its dispatch record (offset 0 is a real
position: a range from a zero cursor includes it). Entries live in per-day buckets of
created_at so retention (QIM_MAILBOX_RETENTION_MS, docs/decisions/0013) is exact without
a per-entry cost; the highest offset ever removed is the persisted trim boundary.
Materialization of one dispatch record: `begin` (DispatchProgress: digest, first
mailbox_seq), `append` every recipient's entry, `finish` (completion + packed watermark
compare-and-set), or the three `fused` in one operation for one or more consecutive
records of a shard (docs/decisions/0003, 0067).
Every call is safe to repeat after a failure whose outcome is unknown: `finish`
recognises its own earlier write by the writer token stored beside W
(docs/decisions/0024-mailbox-finish-recognises-its-own-write.md).

Fencing (docs/decisions/0040-scale-leases-and-fencing.md): the owner of a shard fences
it with its owner_epoch (`load_watermark(shard, fence=e)`) before its first write and
passes `fence=e` to every write; a write whose fence is not the shard's is refused with
NotOwner before anything is written. `fence=0` only works on a shard nobody ever fenced
(tools, unit tests).

Errors: MailboxDirty (qim.errors) for a digest conflict or a watermark moved by someone
else (the shard must stop); NotOwner (qim.stores.errors) for a stale fence (stop
serving the shard); StoreUnavailable when the backend fails (the call may or may not
have applied: repeat it).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Protocol, Sequence

from qim.consts import DAY_MS

FRESH, RESUME, DUPLICATE = "FRESH", "RESUME", "DUPLICATE"
RECOVERED = "RECOVERED"  # this writer had already finished the call; only its reply was lost


def day_of(created_at_ms: int) -> int:
    """UTC day (days since the epoch) of a created_at: the entry's bucket."""
    return created_at_ms // DAY_MS


class Retained(NamedTuple):
    """What retention leaves of one user's mailbox at `now`: the retained days
    (ascending), the persisted trim boundary (-1: nothing removed yet), whether the user
    has any mailbox metadata, and the cutoff: entries created before it are not served."""

    days: list[int]
    trim: int
    known: bool
    cutoff_ms: int

    def straddles(self) -> bool:
        """True when the oldest retained bucket holds entries older than the cutoff."""
        return bool(self.days) and self.days[0] * DAY_MS < self.cutoff_ms


class FusedRecord(NamedTuple):
    """One dispatch record of a fused call: its tenant, dispatch_id, payload digest, log
    offset, mailbox_seq (8 bytes), UTC day of created_at and (user, entry) per
    recipient, each entry starting with `seq8`. `inline`: a record whose members'
    previous entry offsets the call returns (`prevs`: inline pushes, decisions/0156)."""

    tenant: int
    dispatch_id: bytes
    digest: bytes
    offset: int
    seq8: bytes
    day: int
    members: Sequence[tuple[int, bytes]]
    inline: bool = False


class MailboxStore(Protocol):
    """Mailboxes of the users whose shards a node owns. Offsets are 48-bit log offsets,
    `seq8` the 8-byte big-endian mailbox_seq, blobs packed watermarks."""

    retention_ms: int

    async def load_watermark(self, shard: int, fence: Optional[int] = None) -> tuple[Optional[bytes], int]:
        """(watermark blob or None when never written, shard_epoch). With `fence`, first
        fence the shard at that owner_epoch in the same operation (NotOwner when a higher
        one is there). MailboxDirty for an unknown layout."""
        ...

    async def begin(self, shard: int, dispatch_id: bytes, digest: bytes, offset: int, seq8: bytes,
                    fence: int = 0) -> tuple[str, bytes]:
        """begin_dispatch -> (FRESH | RESUME | DUPLICATE, mailbox_seq bytes to use)."""
        ...

    async def append(self, tenant: int, offset: int, day: int, members: Sequence[tuple[int, bytes]],
                     shard: Optional[int] = None, fence: int = 0) -> None:
        """Append each (user, entry) into its `day` bucket at `offset` (idempotent),
        fenced by `shard`'s owner_epoch (no shard: unfenced, for tools and unit tests)."""
        ...

    async def finish(self, shard: int, epoch: int, dispatch_id: bytes, expected_wm: Optional[bytes],
                     new_wm: bytes, writer: bytes = b"", fence: int = 0) -> bool:
        """finish_dispatch: completion and W compare-and-set from `expected_wm`, recording
        `writer`. True when W was written now; False when W already was `new_wm` written by
        this same non-empty `writer` (this finish applied before and its reply was lost).
        MailboxDirty when W is anything else (another writer)."""
        ...

    async def fused(self, shard: int, epoch: int, records: Sequence["FusedRecord"], expected_wm: Optional[bytes],
                    new_wm: bytes, writer: bytes = b"", fence: int = 0, *,
                    prevs: Optional[dict] = None) -> list[tuple[str, bytes]]:
        """begin + append + finish of one or more consecutive records of `shard` (offset
        order) in one operation, every recipient of every record: the same outcome as
        the step-wise calls one record after the other, with W written once, as
        `new_wm` (the last record's). Each record's entries start with its `seq8`; a
        RESUME appends them with the first attempt's mailbox_seq instead, and a later
        record of a dispatch begun earlier in the same call is a DUPLICATE. Returns
        (status, mailbox_seq) per record; every status is RECOVERED when W already was
        `new_wm` written by this same `writer` (the call applied before, its reply was
        lost). W is checked before anything is written: MailboxDirty (QIM_WM_CONFLICT)
        when it is anything else, with nothing written. `prevs` (a dict, filled when
        the store can: decisions/0156): (record index, user) -> the offset of that
        user's entry just below the record's, read after every entry of the call is
        written (-1: none), for each member of a record marked `inline`; a pair left
        out is unknown (the push carries the position only)."""
        ...

    async def trim_and_days(self, tenant: int, user_id: int, now_ms: Optional[int] = None) -> Retained:
        """Remove the day buckets whose whole day is past the retention (raising the trim
        boundary) and return what is retained at `now_ms` (default: the store's own
        clock, the one that expires the buckets)."""
        ...

    async def trim_entries(self, tenant: int, user_id: int, day: int, members: Sequence[tuple[bytes, int]]) -> int:
        """Remove (entry, offset) pairs of `day` a read found past the retention and raise
        the trim boundary to their highest offset; returns the boundary."""
        ...

    async def read_range(self, tenant: int, user_id: int, days: Sequence[int], after_offset: int, upto_offset: int,
                         limit: int) -> list[tuple[bytes, int]]:
        """Entries with after_offset < offset <= upto_offset (after_offset -1 includes 0)
        across `days`, merged by offset, at most `limit`, as (entry, offset)."""
        ...

    async def gc_dispatch_progress(self, shard: int, upto_offset: int, batch: int = 512) -> int:
        """Delete DispatchProgress whose highest observed offset <= upto_offset (the
        caller guarantees W passed it and the replay window elapsed); how many."""
        ...
