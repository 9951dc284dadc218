"""DispatchProgress garbage collection of a mailbox node's shards (docs/design.md §5.4).

A DispatchProgress lets a replayed dispatch record be recognised (DUPLICATE) and a
begun one resumed; once the watermark of every lane has passed its highest observed
offset and the replay window (QIM_DISPATCH_PROGRESS_GC_SAFETY_MS) has elapsed since,
nothing can ask for it again.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Deque, Mapping

from qim._core import watermark
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.record import ShardCursor
from qim.stores.mailboxes import MailboxStore

logger = logging.getLogger(__name__)

DP_GC_BATCH = 512  # DispatchProgress keys deleted per sweep call
DP_GC_RESWEEP_S = 60.0  # a shard whose W stood still is swept again this often


async def gc_loop(store: MailboxStore, shards: Mapping[int, ShardCursor], safety_ms: int,
                  metrics: MailboxMetrics) -> None:
    """Until cancelled: delete the DispatchProgress of each shard in `shards` (read anew
    every round: shards come and go) whose highest observed offset is at or below the W
    every lane had `safety_ms` ago (so W passed it and the replay window elapsed). A
    shard is swept again only when that W moved, a sweep was cut at its batch, or
    DP_GC_RESWEEP_S passed: an idle node made 64 reads a second for nothing. A failed
    sweep is logged and tried again next round."""
    history: dict[int, Deque] = {}
    swept: dict[int, tuple[int, float]] = {}  # shard -> (W swept up to, when)
    while True:
        now = time.monotonic()
        for shard, state in list(shards.items()):
            history.setdefault(shard, collections.deque()).append((now, watermark.start_offset(state.blob) - 1))
            old = None
            while history[shard] and now - history[shard][0][0] >= safety_ms / 1000:
                old = history[shard].popleft()[1]
            if old is not None and old >= 0:
                history[shard].appendleft((now - safety_ms / 1000, old))
                upto, at = swept.get(shard, (-1, 0.0))
                if old == upto and now - at < DP_GC_RESWEEP_S:
                    continue
                try:
                    deleted = await store.gc_dispatch_progress(shard, old, DP_GC_BATCH)
                    metrics.dp_gc.inc(deleted)
                    swept[shard] = (old if deleted < DP_GC_BATCH else -1, now)
                except Exception as exc:  # noqa: BLE001 — logged, swept again next round
                    logger.warning("DispatchProgress GC of shard %d failed: %s", shard, exc)
        await asyncio.sleep(min(1.0, safety_ms / 1000))
