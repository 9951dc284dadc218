"""The gateway's push listener (QIM_GATEWAY_PUSH_ADDR): PUSH_BATCH from mailbox nodes,
DEVICE_FRAMES from session nodes, and the readiness of the push path
(docs/decisions/0012-push-link-repair.md).

Every mailbox link opens with a hello (a PushBatch with `hello`, the node's registry id
and the shards it serves). The gateway is ready only while every live mailbox node of
the ShardRegistry (`expected()`) has a live link: a gateway that takes devices before
its push path exists loses their pushes. When a node's link comes back after this
gateway saw it drop (the frames in flight are lost), or the node says pushes may have
been lost (`wake_all`: it dropped some, or it just took shards over), every online
device of the named shards gets an empty PUSH_EVENTS and pulls.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable, Iterator, Optional

from google.protobuf.message import DecodeError

from qim.errors import ErrorCode, FrameError
from qim.net.allow import OPEN, RpcGuard
from qim.net.framed import FramedStream
from qim.net.transport import ByteReader, ByteWriter
from qim.proto.v1 import internal_pb2, reaction_pb2
from qim.protocol import Opcode
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.online import OnlineRegistry
from qim.wire.errors import error_body

logger = logging.getLogger(__name__)


class PushListener:
    """Serves the push listener for `online`; `expected()` names the mailbox nodes that
    must have linked (the live mailbox nodes of the registry). `on_connection` is the
    listener's per-connection coroutine (ServiceNode.listen). `guard` refuses (drops,
    counted) a frame whose sender's certificate may not send it (PUSH_BATCH: mailbox,
    DEVICE_FRAMES: session; qim/net/allow.py)."""

    def __init__(self, online: OnlineRegistry, expected: Callable[[], Iterable[str]],
                 metrics: Optional[GatewayMetrics] = None, guard: RpcGuard = OPEN) -> None:
        self.online = online
        self._guard = guard
        self._m = metrics if metrics is not None else GatewayMetrics()
        self._expected = expected
        self.ephemeral: Any = None  # EphemeralFanout (backends/ephemeral.py): EPHEMERAL_FRAMES of other gateways
        self._links: dict[str, FramedStream] = {}  # node id -> its live link
        self._shards: dict[str, set[int]] = {}  # node id -> the shards its last hello named
        self._lost: set[str] = set()  # nodes whose link dropped since their last hello

    def not_ready(self) -> Iterator[str]:
        """Readiness reason: a live mailbox node without a push link."""
        missing = sorted(n for n in self._expected() if n not in self._links)
        if missing:
            yield f"no push link from mailbox node(s) {', '.join(missing)}"

    def linked(self, node_id: str) -> bool:
        """True while mailbox node `node_id` has a live, greeted link."""
        return node_id in self._links

    async def start(self, host: str, port: int) -> asyncio.AbstractServer:
        """A listener of its own (tests; the gateway node listens through ServiceNode)."""
        return await asyncio.start_server(self.on_connection, host, port)

    async def on_connection(self, reader: ByteReader, writer: ByteWriter) -> None:
        """Serve one mailbox or session link until it closes."""
        stream = FramedStream(reader, writer)
        peer = stream.peer_service
        node: Optional[str] = None
        try:
            while True:
                item = await stream.read_frame()
                if item is None:
                    break
                opcode, request_id, body = item
                if not self._guard.allows(opcode, peer):
                    if request_id:
                        stream.send(Opcode.ERROR, request_id, error_body(
                            ErrorCode.FORBIDDEN, f"service {peer} may not send this frame", opcode))
                    continue
                if request_id:  # every frame here is one-way; a request still gets its ERROR
                    stream.send(Opcode.ERROR, request_id, error_body(
                        ErrorCode.INVALID_ARGUMENT, "push listener takes only PUSH_BATCH and DEVICE_FRAMES", opcode))
                    continue
                node = self.on_frame(stream, node, opcode, body)
        except (FrameError, ConnectionError, OSError) as exc:
            logger.warning("push peer %s dropped: %s", stream.peer, exc.__class__.__name__)
        finally:
            self.on_closed(stream, node)
            stream.close()

    def on_frame(self, stream, node: Optional[str], opcode: int, body: bytes) -> Optional[str]:
        """Handle one frame of a link; returns the link's node id once it said hello."""
        try:
            if opcode == Opcode.DEVICE_FRAMES:
                self.online.deliver_frames(internal_pb2.DeviceFrames.FromString(body))
                return node
            if opcode == Opcode.EPHEMERAL_FRAMES and self.ephemeral is not None:  # decision 0121
                self.ephemeral.deliver(reaction_pb2.EphemeralFrames.FromString(body))
                return node
            if opcode != Opcode.PUSH_BATCH:
                self._m.bad_push.inc()
                return node
            batch = internal_pb2.PushBatch.FromString(body)
        except DecodeError:
            self._m.bad_push.inc()
            return node
        if (batch.hello or batch.wake_all) and not batch.node_id:
            self._m.bad_push.inc()  # a hello or wake request must name its node
            return node
        if batch.hello:
            node = self._hello(stream, batch)
        elif batch.wake_all:
            self.online.wake_shards(set(batch.shards))
        if batch.kicks:
            self.online.kick_sessions(int.from_bytes(batch.tenant_id, "big"), batch.kicks)
        self.online.deliver(batch)
        return node

    def _hello(self, stream, batch: internal_pb2.PushBatch) -> str:
        n = batch.node_id
        old = self._links.get(n)
        # The frames in flight on a dropped (or superseded) link are lost: wake the
        # node's devices even when the node itself knows of no drop.
        wake = batch.wake_all or n in self._lost or (old is not None and old is not stream)
        self._lost.discard(n)
        self._links[n] = stream
        self._shards[n] = set(batch.shards)
        self._m.push_links.set(len(self._links))
        if wake:
            woken = self.online.wake_shards(self._shards[n])
            logger.info("push link from mailbox node %s: woke %d devices", n, woken)
        return n

    def on_closed(self, stream, node: Optional[str]) -> None:
        """Forget a closed link; its node's next hello wakes that node's devices."""
        if node is not None and self._links.get(node) is stream:
            del self._links[node]
            self._lost.add(node)
            self._m.link_losses.inc()
            self._m.push_links.set(len(self._links))
