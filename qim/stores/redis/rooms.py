"""RoomEpochStore over Redis: one counter (qim/stores/rooms.py)."""

from __future__ import annotations

from qim.stores.errors import StoreCorrupt
from qim.stores.redis.keys import room_epoch_key
from qim.stores.redis.scripts import boundary
from qim.stores.redis.topology import as_topology


class RedisRoomEpochs:
    """RoomEpochStore over a RedisTopology or one redis-py client: the counter is of no
    commit bucket, so it is on the home instance (decision 0096)."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)
        self._redis = client = self._t.home

    async def next_epoch_base(self) -> int:
        """RoomEpochStore.next_epoch_base: INCR of the counter (atomic; persisted before the
        reply on an instance with appendfsync always, which the RoomWriter checks at start)."""
        with boundary("room epoch"):
            base = int(await self._redis.incr(room_epoch_key()))
        if not 0 < base < 1 << 31:  # room_epoch = base << 32 | generation keeps bit 63 clear
            raise StoreCorrupt(f"room epoch base {base} is outside 1..2^31-1")
        return base
