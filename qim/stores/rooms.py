"""RoomEpochStore: the one durable fact of chatrooms (docs/design.md §13 "Rooms";
docs/decisions/0045-rooms-phase-one-in-process-ring.md).

A room's ring lives in its RoomWriter's memory only; what must survive is that a ring
rebuilt after a loss never reuses an old room_epoch (a client holding a position of the
old ring would take the new one's room_seq for a continuation). Every RoomWriter process
takes a fresh epoch base at start, strictly above every base ever taken (a counter on
the commit-facts Redis: `appendfsync always`, so a crash never hands out one twice), and
numbers its rings below it: room_epoch = base << 32 | generation. With the ShardRegistry
the base becomes the room shard's owner_epoch (also strictly growing per shard).

Errors: StoreUnavailable.
"""

from __future__ import annotations

from typing import Protocol


class RoomEpochStore(Protocol):
    """The epoch bases of RoomWriter processes."""

    async def next_epoch_base(self) -> int:
        """A new base, strictly above every base returned before (1, 2, ...)."""
        ...
