"""Metrics of a RoomNode (qim-room), created per node (qim/obs/metrics.py). No room, user
or message ids as labels."""

from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import MetricSet


class RoomMetrics(MetricSet):
    """Every qim_room_* metric."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.rooms = self.gauge("qim_room_rooms", "Rooms held in memory")
        self.members = self.gauge("qim_room_members", "Member connections over every room")
        self.links = self.gauge("qim_room_links", "Gateway links (connections) served")
        self.events = self.counter("qim_room_events", "Room events issued a room_seq", ["kind"])
        self.retries = self.counter("qim_room_retries", "ROOM_SEND retries answered with the original ROOM_ACK")
        self.joins = self.counter("qim_room_joins", "JOIN_ROOM answered", ["replay"])
        self.epochs = self.counter("qim_room_epochs", "Rings started (each a new room_epoch)")
        self.ring_evicted = self.counter("qim_room_ring_evicted", "Events pushed out of a ring by its bounds")
        self.idle_dropped = self.counter("qim_room_idle_dropped", "Rooms dropped after QIM_ROOM_IDLE_S without members")
        self.push_frames = self.counter("qim_room_push_frames", "ROOM_PUSH frames queued to gateways")
        self.push_dropped = self.counter("qim_room_push_dropped",
                                         "ROOM_PUSH frames dropped for a gateway that does not read (it gets a rejoin)")
        self.rejoins = self.counter("qim_room_rejoin_notices", "Rejoin notices sent to gateways after drops")
        self.refused = self.counter("qim_room_refused", "Room requests refused", ["code"])
