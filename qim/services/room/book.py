"""The rooms a RoomWriter holds, their epochs, the one flush per event-loop turn and the
idle sweep (docs/decisions/0045-rooms-phase-one-in-process-ring.md).

room_epoch = epoch base << 32 | generation: the base is taken once per process from the
RoomEpochStore (strictly above every earlier one, so no restart reuses an epoch) and
every ring this process starts takes the next generation; a room dropped as idle and
joined again starts a new ring, so a new epoch. `EpochSource` is the seam for the
ShardRegistry: there the base of a room shard is that shard's owner_epoch, which grows
on every takeover, so a takeover starts a new room_epoch by the same rule.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Optional

from qim.consts import ROOM_EPOCH_GENERATION_BITS
from qim.proto.v1 import room_pb2
from qim.services.room.metrics import RoomMetrics
from qim.services.room.room import Room

logger = logging.getLogger(__name__)

GENERATION_MAX = (1 << ROOM_EPOCH_GENERATION_BITS) - 1
SWEEP_EVERY_S = 5.0
KIND_NAMES = {v.number: v.name.lower() for v in room_pb2.RoomEvent.Kind.DESCRIPTOR.values}


class EpochSource:
    """room_epochs for new rings: `base` from `next_base()` (an awaitable factory, the
    RoomEpochStore's next_epoch_base), a fresh one when the generations run out."""

    def __init__(self, next_base: Callable[[], Awaitable[int]]) -> None:
        self._next_base = next_base
        self.base = 0
        self._generation = GENERATION_MAX  # no base yet: the first epoch() takes one

    async def start(self) -> None:
        """Take this process's first base (StoreUnavailable when the store does not answer)."""
        self.base, self._generation = await self._next_base(), 0

    async def epoch(self, shard: int) -> int:
        """A room_epoch never issued before (for a ring of room shard `shard`; the same
        base for every shard until the ShardRegistry owns rooms). Awaits only when this
        base's generations are used up."""
        if self._generation >= GENERATION_MAX:
            await self.start()
        self._generation += 1
        return self.base << ROOM_EPOCH_GENERATION_BITS | self._generation


class RoomBook:
    """Rooms by (tenant, room_id), each with a ring bounded by `ring_events`/`ring_bytes`;
    dropped after `idle_s` seconds without members."""

    def __init__(self, epochs: EpochSource, ring_events: int, ring_bytes: int, idle_s: float,
                 metrics: Optional[RoomMetrics] = None) -> None:
        self.epochs = epochs
        self.ring_events, self.ring_bytes, self.idle_s = ring_events, ring_bytes, idle_s
        self._m = metrics if metrics is not None else RoomMetrics()
        self.rooms: dict[tuple[int, int], Room] = {}
        self._dirty: list[Room] = []
        self._flush_scheduled = False

    def get(self, tenant: int, room_id: int) -> Optional[Room]:
        """The room if this node holds it."""
        return self.rooms.get((tenant, room_id))

    async def open(self, tenant: int, room_id: int, shard: int) -> Room:
        """The room, started now (a new ring, a new epoch) when not held."""
        room = self.rooms.get((tenant, room_id))
        if room is None:
            epoch = await self.epochs.epoch(shard)
            room = self.rooms.get((tenant, room_id))  # another join may have started it meanwhile
            if room is None:
                room = self.rooms[(tenant, room_id)] = Room(tenant, room_id, epoch, self.ring_events,
                                                            self.ring_bytes, self._mark_dirty, counted=self._counted)
                self._m.epochs.inc()
                self._m.rooms.set(len(self.rooms))
        return room

    def _counted(self, kind: int, evicted: int) -> None:
        self._m.events.labels(kind=KIND_NAMES.get(kind, "other")).inc()
        if evicted:
            self._m.ring_evicted.inc(evicted)

    def _mark_dirty(self, room: Room) -> None:
        self._dirty.append(room)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        """Push the events every dirty room collected this turn (one frame per link)."""
        self._flush_scheduled = False
        dirty, self._dirty = self._dirty, []
        for room in dirty:
            room.flush()

    def sweep(self, now: float) -> int:
        """Drop the rooms without members for idle_s (monotonic `now`); how many."""
        gone = [k for k, r in self.rooms.items() if r.idle_since is not None and now - r.idle_since >= self.idle_s]
        for key in gone:
            del self.rooms[key]
        if gone:
            self._m.idle_dropped.inc(len(gone))
            self._m.rooms.set(len(self.rooms))
        return len(gone)

    async def run_sweeps(self, monotonic: Callable[[], float]) -> None:
        """Sweep every SWEEP_EVERY_S (at most idle_s) until cancelled."""
        while True:
            await asyncio.sleep(min(SWEEP_EVERY_S, self.idle_s))
            self.sweep(monotonic())
