"""RoomNode: the qim-room process, the RoomWriter (docs/design.md §2, §7, §13 "Rooms";
docs/decisions/0045-rooms-phase-one-in-process-ring.md).

Serves ROOM_CALL from gateways on QIM_ROOM_LISTEN (mutual TLS, gateways only: the
service table), one GatewayLink per gateway connection (qim/services/room/links.py),
the rooms of its room shards in memory (qim/services/room/book.py: rings, epochs,
idle sweep). Redis holds one counter, the epoch base (qim/stores/rooms.py), taken at
start: it is the instance of the commit facts, checked like the writer's (AOF with
`appendfsync always`), so a base is never handed out twice. Ready once the base is
taken; nothing else is read from or written to Redis: rooms never touch mailboxes,
session lists or unread (docs/design.md §7).
"""

from __future__ import annotations

import itertools
import logging
import time

from qim.config import RoomConfig
from qim.consts import INTERNAL_RPC_INFLIGHT
from qim.errors import ErrorCode, RequestError
from qim.net.framed import FramedStream
from qim.obs.node import ServiceNode
from qim.policy import PolicySeam, load_policy
from qim.protocol import Opcode
from qim.services.room.book import EpochSource, RoomBook
from qim.services.room.links import GatewayLink
from qim.services.room.metrics import RoomMetrics
from qim.services.room.service import RoomService
from qim.stores.open import open_stores

logger = logging.getLogger(__name__)


class _LinkHandler:
    """qim.net.rpc LinkHandler of one gateway connection."""

    def __init__(self, node: "RoomNode", link: GatewayLink) -> None:
        self.node, self.link = node, link

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode != Opcode.ROOM_CALL:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"room does not serve opcode 0x{opcode:04x}")
        return await self.node.rooms.handle(self.link, body)

    def closed(self) -> None:
        self.node.rooms.link_closed(self.link)
        self.node.link_count -= 1
        self.node.metrics.links.set(self.node.link_count)


class RoomNode(ServiceNode):
    """The qim-room process."""

    service = "room"

    def __init__(self, config: RoomConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = RoomMetrics(self.registry)
        self.internal_tls = self.tls_contexts(config.internal_tls, "internal", "QIM_INTERNAL_CA/TLS_CERT/TLS_KEY")
        self.stores = open_stores(config.redis_addr)
        self.epochs = EpochSource(self.stores.rooms.next_epoch_base)
        self.book = RoomBook(self.epochs, config.ring_events, config.ring_bytes, config.idle_s, self.metrics)
        # the send policy loads at start: one that does not load stops the start (ConfigError)
        self.rooms = RoomService(self.book, config.node_index, config.node_count, config.max_body, self.metrics,
                                 PolicySeam(load_policy(config.send_policy), self.registry))
        self._link_ids = itertools.count(1)
        self.link_count = 0
        self.closing(self.stores.close, "stores")

    def _link(self, stream: FramedStream) -> _LinkHandler:
        self.link_count += 1
        self.metrics.links.set(self.link_count)
        return _LinkHandler(self, GatewayLink(next(self._link_ids), stream, self.metrics))

    async def setup(self) -> None:
        """Check Redis (the commit-facts instance), take this process's epoch base, then
        serve (EngineError when Redis is unreachable or unsafe)."""
        await self.stores.check(commit_facts=True, allow_unsafe_dev=self.config.allow_unsafe_dev)
        await self.epochs.start()
        self.spawn(self.book.run_sweeps(time.monotonic), "idle sweep")
        await self.serve_rpc(self.config.listen, None, INTERNAL_RPC_INFLIGHT, tls=self.internal_tls, links=self._link)
        logger.info("room node %d/%d listening on %s (epoch base %d)", self.config.node_index,
                    self.config.node_count, self.config.listen, self.epochs.base)
