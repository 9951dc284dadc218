"""A mailbox shard worker's state (materializer.py): its cursor (record.py ShardCursor:
shard, epochs, W blob, writer token), the FIFO of dispatch records read and not yet
materialized, and what the reader and the turn gate ask of it (docs/design.md §5.4)."""

from __future__ import annotations

import asyncio
import collections
from typing import Deque, Optional

from qim._core import watermark
from qim.services.mailbox.record import ShardCursor


class ShardState(ShardCursor):
    """A shard worker's state: its cursor, FIFO of records, pause flag, dirty reason and catch-up target."""
    def __init__(self, shard: int, epoch: int, blob, writer: bytes = b"", owner_epoch: int = 0) -> None:
        super().__init__(shard, epoch, blob, writer, owner_epoch)
        self.queue: Deque = collections.deque()
        self.wakeup = asyncio.Event()
        self.paused = False
        self.dirty = ""
        self.catch_up_to = 0  # high watermark at start: ready once W reaches it - 1
        self.next_offset = watermark.start_offset(self.blob)  # the first offset not yet queued
        self.prepared: dict = {}  # offset -> Prepared of queued records an overtake read (overtake.py)
        self.directs: Deque[int] = collections.deque()  # offsets of the queued records of direct conversations
        self.bytes = 0  # of the queued records' values
        self.worker: Optional[asyncio.Task] = None


def lowest_w(state: ShardCursor) -> int:
    """Lowest materialized W over the lanes, -1 when nothing was materialized."""
    return watermark.start_offset(state.blob) - 1
