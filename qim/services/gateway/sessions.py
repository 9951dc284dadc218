"""Online devices of this gateway and PUSH delivery (DESIGN.md §4, §5.5).

A second login of the same (user, device) kicks the older connection with
KICKED{REPLACED}. Pushes never move a cursor; a push to a connection whose outbound
queue is over its limit is dropped (counted) and the client recovers by pulling.
"""

from __future__ import annotations

import logging
from typing import Optional, Protocol

from prometheus_client import Counter, Gauge

from qim.proto.v1 import connection_pb2, internal_pb2, mailbox_pb2
from qim.protocol import Opcode

logger = logging.getLogger(__name__)

CONNECTIONS = Gauge("qim_gateway_online_devices", "Authenticated connections")
KICKS = Counter("qim_gateway_kicks", "Connections replaced by a newer login of the same device")
PUSH_FRAMES = Counter("qim_gateway_push_frames", "PUSH_EVENTS frames queued to devices")
PUSH_DROPPED = Counter("qim_gateway_push_dropped", "PUSH_EVENTS dropped for a slow device")
PUSH_QUEUE_LIMIT = 4 * 1024 * 1024


class DeviceConn(Protocol):
    tenant: int
    user_id: int
    device_id: int

    def send(self, opcode: int, request_id: int, body: bytes) -> None: ...
    def kick(self) -> None: ...
    @property
    def queued_bytes(self) -> int: ...


class OnlineRegistry:
    """(tenant, user) -> {device_id: connection} of this gateway."""

    def __init__(self) -> None:
        self._users: dict[tuple[int, int], dict[int, DeviceConn]] = {}

    def register(self, conn: DeviceConn) -> Optional[DeviceConn]:
        """Add conn; returns the connection it replaced (already sent KICKED) or None."""
        devices = self._users.setdefault((conn.tenant, conn.user_id), {})
        old = devices.get(conn.device_id)
        devices[conn.device_id] = conn
        if old is not None and old is not conn:
            KICKS.inc()
            body = connection_pb2.Kicked(reason=connection_pb2.Kicked.REPLACED).SerializeToString()
            try:
                old.send(Opcode.KICKED, 0, body)
            finally:
                old.kick()
        CONNECTIONS.set(sum(len(d) for d in self._users.values()))
        return old

    def unregister(self, conn: DeviceConn) -> None:
        devices = self._users.get((conn.tenant, conn.user_id))
        if devices and devices.get(conn.device_id) is conn:
            del devices[conn.device_id]
            if not devices:
                del self._users[(conn.tenant, conn.user_id)]
        CONNECTIONS.set(sum(len(d) for d in self._users.values()))

    def deliver_frames(self, frames: internal_pb2.DeviceFrames) -> None:
        """One server-initiated frame (READ_SYNC, SESSION_DELTA) to every online device of
        the user but `exclude_device_id`; dropped (counted) for a slow device."""
        if frames.opcode not in (Opcode.READ_SYNC, Opcode.SESSION_DELTA):
            PUSH_DROPPED.inc()
            return
        devices = self._users.get((int.from_bytes(frames.tenant_id, "big"), frames.user_id), {})
        for device_id, conn in list(devices.items()):
            if device_id == frames.exclude_device_id:
                continue
            if conn.queued_bytes > PUSH_QUEUE_LIMIT:
                PUSH_DROPPED.inc()
                continue
            try:
                conn.send(frames.opcode, 0, frames.body)
                PUSH_FRAMES.inc()
            except ConnectionError:
                PUSH_DROPPED.inc()

    def deliver(self, batch: internal_pb2.PushBatch) -> None:
        tenant = int.from_bytes(batch.tenant_id, "big")
        for target in batch.targets:
            devices = self._users.get((tenant, target.user_id))
            if not devices:
                continue
            body = mailbox_pb2.PushEvents(entries=target.entries).SerializeToString()
            for conn in list(devices.values()):
                if conn.queued_bytes > PUSH_QUEUE_LIMIT:
                    PUSH_DROPPED.inc()
                    continue
                try:
                    conn.send(Opcode.PUSH_EVENTS, 0, body)
                    PUSH_FRAMES.inc()
                except ConnectionError:
                    PUSH_DROPPED.inc()
