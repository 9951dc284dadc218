"""ClockLeaseStore: writer_id leases and HLC clock windows (docs/design.md §3 message_id,
§5.2; docs/decisions/0017-writer-order-and-time.md).

A writer leases a writer_id (a token with a TTL, renewed), then a window of
milliseconds strictly above the cluster-wide high-water: the highest issue ceiling any
writer ever published. A writer issues ids only up to its own published ceiling, so a
fresh window lies above every id ever issued, by any writer_id.

Errors: StoreUnavailable; LeaseLost when another process took the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol


@dataclass
class Window:
    """A leased window [start, end) in unix ms. On a fresh lease `start` and the first
    published `ceiling` are set; an extension changes only `end` (both None)."""

    start: Optional[int]
    end: int
    ceiling: Optional[int]


class ClockLeaseStore(Protocol):
    """Leases of one region's writers."""

    async def take_writer_id(self, region_id: int, token: str, ttl_ms: int, writer_id: int = 0) -> int:
        """Lease the first free writer_id in 1..65535 (writer_id 0), or take the fixed
        `writer_id` (configured: overwrites). Returns the id, 0 when none is free."""
        ...

    async def lease_window(self, region_id: int, writer_id: int, now_ms: int, window_ms: int,
                           expected_end: int, slack_ms: int) -> Window:
        """Fresh lease (`expected_end` 0): start = max(now, cluster high-water + 1), end =
        start + window, ceiling max(now + slack, start + 1) published. Extension: end =
        max(now, end) + window while the stored end is still `expected_end`, else
        LeaseLost."""
        ...

    async def renew(self, region_id: int, writer_id: int, token: str, ttl_ms: int, ceiling_ms: int) -> bool:
        """Extend the writer_id lease and raise the cluster high-water to `ceiling_ms`
        (one operation); False when the lease is no longer ours."""
        ...
