"""Which dispatch records the low-latency path has registered, so the durable path
skips them (docs/decisions/0167-the-durable-path-skips-what-the-fast-path-wrote.md).

Both projection paths write the same order-independent registrations (register.py).
A record whose registrations the low-latency path wrote successfully changes nothing
when the durable consumer writes them again, so the durable consumer only moves its
checkpoint past it: no decode, no registration, no script arguments for it. A record
is remembered by (dispatch partition, log offset), the offset taken from the
mailbox_seq its PROJECTION message carries: the mailbox assigns a dispatch's
mailbox_seq at the offset where it was first begun, and the record there has the same
dispatch_id and payload digest (the mailbox's digest check), so its registrations are
the ones written.

Best effort and bounded: what is not remembered (a frame dropped, a write that failed,
a record the durable consumer reached first, an entry pushed out by newer ones past
`limit`, a node restarted) is written by the durable consumer as before.
"""

from __future__ import annotations

import collections
from typing import Deque

from qim._core import mailbox_seq as mseq
from qim.consts import SESSION_PROJECTED_REMEMBERED


class Projected:
    """Bounded memory of the (shard, offset) pairs whose registrations the low-latency
    path wrote. `add` after a successful write, `take` by the durable consumer (True
    once per pair remembered: skip the record). At most `limit` pairs (the oldest
    forgotten first). ValueError on a limit below 1."""

    def __init__(self, limit: int = SESSION_PROJECTED_REMEMBERED) -> None:
        if limit < 1:
            raise ValueError(f"Projected: limit must be at least 1, not {limit}")
        self._limit = limit
        self._by_shard: dict[int, set[int]] = collections.defaultdict(set)
        self._order: Deque[tuple[int, int]] = collections.deque()  # insertion order, for the bound
        self.forgotten = 0  # pairs pushed out by the bound before the durable consumer took them

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_shard.values())

    def add(self, shard: int, mailbox_seq: int) -> bool:
        """Remember the record at `mailbox_seq`'s offset in partition `shard`; False (not
        remembered) for a mailbox_seq of 0 (an older mailbox node sent none) or invalid."""
        if not mseq.is_valid(mailbox_seq):
            return False
        offset = mseq.split(mailbox_seq)[1]
        offsets = self._by_shard[shard]
        if offset in offsets:
            return True
        offsets.add(offset)
        self._order.append((shard, offset))
        while len(self._order) > self._limit:
            old_shard, old_offset = self._order.popleft()
            held = self._by_shard.get(old_shard)
            if held is not None and old_offset in held:
                held.discard(old_offset)
                self.forgotten += 1
        return True

    def take(self, shard: int, offset: int) -> bool:
        """True (and forgotten) when the record at `offset` of partition `shard` was
        registered by the low-latency path."""
        held = self._by_shard.get(shard)
        if not held or offset not in held:
            return False
        held.discard(offset)
        return True
