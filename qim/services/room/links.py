"""One gateway's connection to this RoomWriter (docs/decisions/0045-rooms-phase-one-in-process-ring.md):
the connection is the gateway's subscription. Requests of its client connections arrive
on it (ROOM_CALL), and the live events of every room one of them joined leave on it
(ROOM_PUSH, request_id 0), one frame per room flush whatever the number of members on
that gateway. When it closes, every member it carried leaves.

Back-pressure: a gateway that leaves more than ROOM_LINK_QUEUE_BYTES unread gets no more
frames (each drop counted, the room remembered); once its queue drained to half, it gets
one ROOM_PUSH with `rejoin` per such room, which it hands to its members there: they
join again with their last position and replay what they missed from the ring. The room
never waits for one slow gateway.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional

from qim.consts import ROOM_LINK_QUEUE_BYTES
from qim.net.framed import StreamClosed
from qim.protocol import Opcode
from qim.services.room.metrics import RoomMetrics
from qim.services.room.room import Room

logger = logging.getLogger(__name__)


class GatewayLink:
    """The link `link_id` over `stream` (a FramedStream). `rooms`: the rooms one of its
    connections joined (the node drops them from each when the link closes)."""

    def __init__(self, link_id: int, stream, metrics: RoomMetrics, queue_limit: int = ROOM_LINK_QUEUE_BYTES,
                 on_drained: Optional[Callable[["GatewayLink"], None]] = None) -> None:
        self.link_id = link_id
        self.stream = stream
        self.rooms: dict[tuple[int, int], Room] = {}
        self._m = metrics
        self._limit = queue_limit
        self._gapped: dict[tuple[int, int], Room] = {}
        self._drain: Optional[asyncio.Task] = None

    @property
    def closed(self) -> bool:
        """True once the connection closed."""
        return self.stream.closed

    def push(self, room: Room, frame: bytes) -> None:
        """Queue one ROOM_PUSH (dropped, counted and remembered for a rejoin when the
        gateway is behind or the link closed)."""
        key = (room.tenant, room.room_id)
        if key in self._gapped or self.stream.queued_bytes > self._limit:
            self._m.push_dropped.inc()
            self._gapped[key] = room
            if self._drain is None and not self.stream.closed:
                self._drain = asyncio.get_running_loop().create_task(self._after_drain())
            return
        try:
            self.stream.send(Opcode.ROOM_PUSH, 0, frame)
            self._m.push_frames.inc()
        except (StreamClosed, ConnectionError):
            self._m.push_dropped.inc()  # closing: its members leave with it

    async def _after_drain(self) -> None:
        try:
            await self.stream.wait_writable(self._limit // 2)
        except (StreamClosed, ConnectionError):
            return
        finally:
            self._drain = None
        gapped, self._gapped = self._gapped, {}
        for key, room in gapped.items():
            if self.rooms.get(key) is room and not self.stream.closed:
                self.stream.send(Opcode.ROOM_PUSH, 0, room.push_frame(b"", rejoin=True))
                self._m.rejoins.inc()

    def close(self) -> None:
        """Stop the drain watcher (the connection is gone)."""
        if self._drain is not None:
            self._drain.cancel()
