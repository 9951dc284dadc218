"""MessageStore: canonical MessageRecords, the history index and message state
(docs/design.md §2 MessageStore, §5 steps 5 and 7, §6, §8).

Records are written only by the commit store's reserving calls (atomically with the
commit: qim/stores/commits.py) and by its state change (recall/delete); this interface
is the read side every service uses. A record is a `message_pb2.MessageRecord`; the
history index orders a conversation's existing messages by conversation_seq (gaps are
legal and cost nothing).

Tiering seam: `history_page` and `tails` are each ONE call over a conversation's visible
intervals, so a TieredMessageStore can split them at a per-conversation hot floor (Redis
above it, CQL below) without any caller changing (docs/decisions/0019-storage-layer.md).

Errors: StoreUnavailable (retry), StoreCorrupt (an index entry without its record, a
record that does not decode or disagrees with its index entry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Optional, Protocol, Sequence

from qim.proto.v1 import message_pb2
from qim.stores.intervals import Interval

# Fixed fields of a HistoryItem on the wire, counted with body and custom_type against a
# page's byte budget (docs/design.md §11 history page byte limit).
HISTORY_ITEM_OVERHEAD = 96
NEWER = 1  # history_pb2.NEWER: conversation_seq > anchor (anchor 0: from the beginning)
OLDER = 0  # history_pb2.OLDER: conversation_seq < anchor (anchor 0: from the latest)


def item_size(rec: message_pb2.MessageRecord) -> int:
    """Bytes a record costs in a history page: its body (none once recalled or deleted),
    custom_type and HISTORY_ITEM_OVERHEAD."""
    body = len(rec.body) if rec.state == message_pb2.MESSAGE_STATE_NORMAL else 0
    return body + len(rec.custom_type) + HISTORY_ITEM_OVERHEAD


class MessageRef(NamedTuple):
    """A message of a tenant's conversation (the tenant is passed beside a batch)."""

    conversation_id: bytes
    message_id: bytes


@dataclass
class VersionedRecord:
    """A record as stored and an opaque `version` of exactly those bytes: a conditional
    rewrite (recall/delete) names it and fails with RecordChanged when it moved."""

    record: message_pb2.MessageRecord
    version: str


@dataclass
class HistoryPage:
    """One page: records in page order (ascending for NEWER, descending for OLDER) and
    whether more visible messages follow in that direction."""

    records: list[message_pb2.MessageRecord] = field(default_factory=list)
    has_more: bool = False


def budget_page(records: Iterable[message_pb2.MessageRecord], more: bool, max_bytes: int) -> HistoryPage:
    """The history page rule (docs/design.md §5, §11), defined once for every backend: records
    in page order until the next would pass `max_bytes` by item_size, the first one
    always; `more` is whether rows beyond `records` exist (has_more also when the budget
    cut the page). `records` may be lazy: nothing past the cut is decoded."""
    out = HistoryPage(has_more=more)
    used = 0
    for rec in records:
        size = item_size(rec)
        if out.records and used + size > max_bytes:
            out.has_more = True
            break
        out.records.append(rec)
        used += size
    return out


class TailQuery(NamedTuple):
    """The newest part of a conversation for a session entry: its visible `intervals` and
    the `base` seq above which unread is counted."""

    conversation_id: bytes
    intervals: tuple[Interval, ...]
    base: int


@dataclass
class Tail:
    """`head`: the newest visible record (None: nothing visible). `window`: every visible
    record with seq > base when head.seq - base <= the window size, else None (the count
    is not exact: docs/design.md §6 exact window)."""

    head: Optional[message_pb2.MessageRecord]
    window: Optional[list[message_pb2.MessageRecord]]


class MessageStore(Protocol):
    """Read side of MessageStore. Tenants are u128 ints, ids 16-byte strings."""

    async def get(self, tenant: int, conversation_id: bytes, message_id: bytes) -> Optional[VersionedRecord]:
        """The record and its version; None when absent. StoreCorrupt when it does not decode."""
        ...

    async def record_sizes(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """Stored size in bytes of each record (0 when absent), one round trip."""
        ...

    async def resolve(self, tenant: int, records: Sequence[MessageRef],
                      states: Sequence[MessageRef]) -> tuple[list[Optional[message_pb2.MessageRecord]], list[int]]:
        """One round trip for a mailbox page: the records of `records` (None when absent)
        and the MessageState of `states` (MESSAGE_STATE_NORMAL unless recalled/deleted).
        StoreCorrupt when a record does not decode."""
        ...

    async def history_page(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval], anchor: int,
                           direction: int, limit: int, max_bytes: int) -> HistoryPage:
        """Visible records after (NEWER) or before (OLDER) `anchor` (0: from the start /
        the latest), at most `limit`, and at most `max_bytes` by `item_size` except that
        the first record is always returned; the gaps between intervals are never read.
        ValueError for an unknown direction; StoreCorrupt for a broken index entry."""
        ...

    async def latest_seq(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval]) -> Optional[int]:
        """conversation_seq of the newest visible message, None when there is none."""
        ...

    async def tails(self, tenant: int, queries: Sequence[TailQuery], window: int) -> list[Tail]:
        """Head and unread window of every query (a page of the session list), a fixed
        number of round trips whatever the page size. StoreCorrupt for a missing or
        disagreeing record."""
        ...
