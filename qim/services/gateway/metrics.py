"""Metrics of a ConnectionNode (qim-gateway), created per node (qim/obs/metrics.py)."""

from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import LATENCY_BUCKETS, MetricSet
from qim.protocol import Opcode


def opcode_name(opcode: int) -> str:
    """The label of a client opcode: its name, "UNKNOWN" for any other value (bounded)."""
    try:
        return Opcode(opcode).name
    except ValueError:
        return "UNKNOWN"


class GatewayMetrics(MetricSet):
    """Every qim_gateway_* metric. Built by the node on its registry and passed to the
    online registry, the push listener and the client connections."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        # online devices and PUSH delivery (online.py)
        self.online_devices = self.gauge("qim_gateway_online_devices", "Authenticated connections")
        self.kicks = self.counter("qim_gateway_kicks", "Connections replaced by a newer login of the same device")
        self.remote_kicks = self.counter("qim_gateway_remote_kicks",
                                         "Connections replaced by a newer session of the device on another gateway")
        self.push_frames = self.counter("qim_gateway_push_frames", "PUSH_EVENTS frames queued to devices")
        self.push_inline = self.counter("qim_gateway_push_inline",
                                        "PUSH_EVENTS frames carrying the user's entries inline (decisions/0156)")
        self.push_dropped = self.counter("qim_gateway_push_dropped", "PUSH_EVENTS dropped for a slow device")
        self.push_no_device = self.counter(
            "qim_gateway_push_no_device",
            "Recipients of a pushed position with no device online here (logged out meanwhile, "
            "or a stale presence entry sent the push here)")
        self.wakeups = self.counter("qim_gateway_push_wakeups", "Empty PUSH_EVENTS sent to repair dropped pushes",
                                    ["reason"])
        # the push listener (pushlink.py)
        self.bad_push = self.counter("qim_gateway_bad_push_batches",
                                     "Undecodable or unknown frames on the push listener")
        self.push_links = self.gauge("qim_gateway_push_links", "Mailbox nodes with a live push link to this gateway")
        self.link_losses = self.counter("qim_gateway_push_link_losses", "Mailbox push links that dropped")
        # client connections (conn.py)
        self.frame_faults = self.counter("qim_gateway_frame_faults", "Connections closed for a frame-level fault",
                                         ["kind"])
        self.request_errors = self.counter("qim_gateway_request_errors", "ERROR frames sent", ["code"])
        self.requests = self.counter("qim_gateway_requests", "Client requests received", ["opcode"])
        # by opcode NAME (opcode_name): SEND_MESSAGE is the ACK latency a client sees, less the network
        self.request_seconds = self.histogram("qim_gateway_request_seconds",
                                              "Client request, frame read to reply queued", ["opcode"], LATENCY_BUCKETS)
        self.stage = self.send_stages()
        # end to end on the server: the message's commit time (its id's HLC ms) to the push queued here
        self.commit_to_push = self.histogram("qim_gateway_commit_to_push_seconds",
                                             "Commit (message id time) to PUSH_EVENTS queued to the device",
                                             buckets=LATENCY_BUCKETS)
        self.auth_timeouts = self.counter("qim_gateway_auth_timeouts",
                                          "Connections closed for not authenticating in time")
        # liveness and login admission (keepalive.py, login.py)
        self.silent_closed = self.counter("qim_gateway_silent_closed",
                                          "Authenticated connections closed for silence, by reason (silent: the "
                                          "keepalive deadline; evicted: for a new login of the user at the cap; lease_lapsed: "
                                          "reconnected to resync after the node lease lapsed, decision 0154)",
                                          ["reason"])
        self.login_refused = self.counter("qim_gateway_login_refused",
                                          "AUTHs refused with UNAVAILABLE and a retry hint: the login queue was full")
        self.logins_waiting = self.gauge("qim_gateway_logins_waiting", "AUTHs waiting for a login slot")
        # WebSocket (ws.py)
        self.ws_connections = self.counter("qim_gateway_ws_connections", "WebSocket upgrades accepted")
        self.ws_refused = self.counter("qim_gateway_ws_refused",
                                       "WebSocket upgrades refused, by reason (path, origin, request, timeout, closed)",
                                       ["reason"])
        # auth and limits (auth.py, ratelimit.py, online.py)
        self.auth_refused = self.counter("qim_gateway_auth_refused", "AUTH refused with UNAUTHENTICATED, by reason",
                                         ["reason"])
        self.token_keys = self.gauge("qim_gateway_token_keys", "Token verification keys in use (files + JWKS)")
        self.jwks_failures = self.counter("qim_gateway_jwks_refresh_failures",
                                          "JWKS reads or documents refused (the keys in use are kept)")
        self.revoked_kicks = self.counter("qim_gateway_revoked_kicks",
                                          "Connections closed with KICKED{REVOKED} after qimctl token revoke")
        self.revocation_feed = self.gauge("qim_gateway_revocation_feed_up",
                                          "1 while the gateway is subscribed to revocations")
        self.revocation_unchecked = self.counter("qim_gateway_revocation_unchecked",
                                                 "AUTHs let in while the revocation list could not be read")
        self.token_refreshes = self.counter("qim_gateway_token_refreshes",
                                            "AUTH with a fresh token on a live connection (same device)")
        self.token_expired = self.counter("qim_gateway_token_expired_kicks",
                                          "Connections closed with KICKED{TOKEN_EXPIRED} when their token expired")
        self.rate_limited = self.counter("qim_gateway_rate_limited",
                                         "Requests or AUTHs refused with RATE_LIMITED, by scope "
                                         "(user, connection, connection_cap)", ["scope"])
        # chatrooms: local fan-out (backends/room.py)
        self.rooms = self.gauge("qim_gateway_rooms", "Rooms with a member connection on this gateway")
        self.room_members = self.gauge("qim_gateway_room_members", "Room member connections on this gateway")
        self.room_frames = self.counter("qim_gateway_room_frames", "ROOM_EVENTS frames queued to members")
        self.room_dropped = self.counter("qim_gateway_room_dropped",
                                         "ROOM_EVENTS dropped for a member that reads too slowly (it gets a rejoin)")
        self.room_rejoins = self.counter("qim_gateway_room_rejoins", "Rejoin notices sent to members, by reason "
                                         "(slow, link_lost, room)", ["reason"])
        self.room_stale = self.counter("qim_gateway_room_stale",
                                       "ROOM_PUSH frames for a room without members here, or not from its node")
        self.room_leaves_failed = self.counter("qim_gateway_room_leaves_failed",
                                               "LEAVE_ROOM of a closed connection the RoomWriter did not answer")
        # Always zero: the gateway never drops a client request on its way to a backend
        # (the per-connection in-flight limit pushes back on the socket instead).
        self.backend_dropped = self.counter("qim_gateway_backend_queue_dropped",
                                            "Client requests dropped before a backend (must stay 0)")
        # writer failover (failover.py, docs/decisions/0079-writer-failover.md)
        self.failovers = self.counter("qim_gateway_failovers",
                                      "Writer attempts that failed; the next writer is tried when there is one "
                                      "(reason: timeout, unreachable, unfit)", ["backend", "reason"])
