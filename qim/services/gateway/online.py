"""Online devices of this gateway and PUSH delivery (docs/design.md §4, §5.5).

A second login of the same (user, device) kicks the older connection with
KICKED{REPLACED}. A user holds at most `max_per_user` connections here
(QIM_MAX_CONNECTIONS_PER_USER): the login of one more device is refused with
ERROR(RATE_LIMITED) and a retry-after hint (docs/decisions/0021-tokens-and-limits.md),
unless one of its connections has been silent for longer than `evict_after_s` (a dead
path the keepalive has not reaped yet: keepalive.py, docs/decisions/0077): that one is
closed and the login admitted, so dead connections never lock out live devices; the
hint of a refusal is then the time until its most silent connection becomes evictable.
A push is a position (docs/decisions/0033): PUSH_EVENTS with the device's lane, the
record's mailbox_seq and its message id, serialized once per lane and position. A
position carrying a user's entries inline (a small direct record: docs/decisions/0156)
gives that user's devices PUSH_EVENTS with the user's prev_mailbox_seq and the entries
appended, copied as the mailbox serialized them (never decoded here); the device
applies them only when its cursor is at prev_mailbox_seq, and pulls otherwise. A push to a connection whose outbound
queue is over PUSH_QUEUE_LIMIT is dropped (counted) and that device gets a wake-up (a
PUSH_EVENTS without a position: the client pulls) once its queue has drained to half the limit;
`wake_shards` wakes every device of some mailbox shards when pushes for them may have
been lost (docs/decisions/0012-push-link-repair.md). No lost push leaves an online
device behind.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from typing import Callable, Optional, Protocol, Sequence

from qim._core.ids import split_message_id
from qim.consts import CONNECTION_CAP_RETRY_AFTER_MS, LANE_COUNT
from qim.errors import IdError
from qim.obs.logcontext import bind, tracer
from qim.obs.otel_gateway import push_span
from qim.proto.v1 import connection_pb2, internal_pb2, mailbox_pb2
from qim.protocol import Opcode
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.ratelimit import RateLimited
from qim.stores.bans import Ban
from qim.wire.outbox import varint

logger = logging.getLogger(__name__)
# Outbound bytes above which a device's pushes are dropped (it is still reading an
# earlier page; the wake-up after the drain makes it pull everything at once).
PUSH_QUEUE_LIMIT = 1024 * 1024
WAKE_BODY = mailbox_pb2.PushEvents().SerializeToString()  # no position: pull
INLINE_ENTRY_TAG = bytes([6 << 3 | 2])  # PushEvents.inline_entries: field 6, length-delimited
DEVICE_FRAMES_QUEUE_LIMIT = 4 * 1024 * 1024  # READ_SYNC / SESSION_DELTA (absolute values)
# what a session node may push to a user's devices (READ_RECEIPT, CONVERSATION_STATE_SYNC: decision 0122)
DEVICE_FRAME_OPCODES = frozenset({Opcode.READ_SYNC, Opcode.SESSION_DELTA, Opcode.CONVERSATION_STATE_SYNC,
                                  Opcode.READ_RECEIPT})


@functools.lru_cache(maxsize=LANE_COUNT)
def _lane_field(lane: int) -> bytes:
    """PushEvents.lane alone, serialized (a lane is one of LANE_COUNT)."""
    return mailbox_pb2.PushEvents(lane=lane).SerializeToString()


def _inline_fields(one: internal_pb2.PushBatch.Inline) -> bytes:
    """PushEvents.prev_mailbox_seq and inline_entries of one user (decisions/0156),
    serialized: the mailbox's MailboxEntry bytes copied as fields 6, not decoded."""
    out = [mailbox_pb2.PushEvents(prev_mailbox_seq=one.prev_mailbox_seq).SerializeToString()]
    for entry in one.entries:
        out += (INLINE_ENTRY_TAG, varint(len(entry)), entry)
    return b"".join(out)


class DeviceConn(Protocol):
    """What the registry needs of a device session (device_session.py DeviceSession)."""

    tenant: int
    user_id: int
    device_id: int

    shard: int
    lane: int
    session_epoch: int
    replaced: bool
    token_iat: int  # revocation.py: revoked when at or before a cutoff

    def send(self, opcode: int, request_id: int, body: bytes) -> None:
        """Queue one frame (ConnectionError when the connection is closing)."""

    def kick(self) -> None:
        """Close the connection after what is queued."""

    def wake_when_drained(self, limit: int, wake: Callable[["DeviceConn"], None]) -> None:
        """Call `wake(conn)` once its outbound queue is at or below `limit` bytes."""

    @property
    def queued_bytes(self) -> int:
        """Outbound bytes not yet handed to the socket."""

    def reap(self, reason: str) -> None:
        """Close a silent connection at once and unregister it (keepalive.py, decision 0077)."""

    def silent_s(self, now: float) -> float:
        """Seconds (time.monotonic `now`) since the device last showed it is alive (0077)."""

    def revoked(self, ban: Optional[Ban] = None) -> None:
        """Its token was revoked: KICKED{REVOKED} (KICKED{BANNED} for `ban`), then close (revocation.py)."""


class OnlineRegistry:
    """(tenant, user) -> {device_id: connection} of this gateway; counts into `metrics`
    (a private GatewayMetrics when None). `max_per_user`: connections one user may hold
    (0: no cap); `evict_after_s`: at the cap, a connection silent for longer is closed for
    the new login (0: never)."""

    def __init__(self, metrics: Optional[GatewayMetrics] = None, max_per_user: int = 0,
                 evict_after_s: float = 0.0) -> None:
        self._users: dict[tuple[int, int], dict[int, DeviceConn]] = {}
        # kept as a count, not summed over _users at each login: that walk made a login
        # cost O(online devices) (a third of a login's CPU at 3,000 online; a reconnect
        # storm of N devices O(N²))
        self._online = 0
        self._m = metrics if metrics is not None else GatewayMetrics()
        self.max_per_user = max_per_user
        self.evict_after_s = evict_after_s

    def register(self, conn: DeviceConn) -> Optional[DeviceConn]:
        """Add conn; returns the connection it replaced (already sent KICKED) or None.
        RateLimited (nothing registered) when the user already holds `max_per_user`
        connections of other devices, none of them silent for longer than `evict_after_s`
        (the most silent one is closed instead); a device replacing itself is always allowed."""
        devices = self._users.get((conn.tenant, conn.user_id), {})
        if self.max_per_user and conn.device_id not in devices and len(devices) >= self.max_per_user:
            self._make_room(devices)  # may unregister one: the user's dict may be gone
        devices = self._users.setdefault((conn.tenant, conn.user_id), {})
        old = devices.get(conn.device_id)
        devices[conn.device_id] = conn
        self._online += old is None
        if old is not None and old is not conn:
            self._m.kicks.inc()
            body = connection_pb2.Kicked(reason=connection_pb2.Kicked.REPLACED).SerializeToString()
            try:
                old.send(Opcode.KICKED, 0, body)
            finally:
                old.kick()
        self._m.online_devices.set(self._online)
        return old

    def _make_room(self, devices: dict[int, DeviceConn]) -> None:
        """At the cap: close the most silent connection when it is evictable, else
        RateLimited with the time until it would be (decision 0077)."""
        retry_ms = CONNECTION_CAP_RETRY_AFTER_MS
        if self.evict_after_s > 0:
            now = time.monotonic()
            silent = [(c.silent_s(now), c) for c in devices.values()]
            if silent:
                quiet_s, quietest = max(silent, key=lambda pair: pair[0])
                if quiet_s > self.evict_after_s:
                    logger.info("closing a connection silent for %.0f s for a new login at the cap", quiet_s)
                    quietest.reap("evicted")  # unregisters it
                    return
                retry_ms = min(retry_ms, max(1000, math.ceil((self.evict_after_s - quiet_s) * 1000) + 1000))
        self._m.rate_limited.labels(scope="connection_cap").inc()
        raise RateLimited(f"too many connections for this user (at most {self.max_per_user})", retry_ms)

    def kick_sessions(self, tenant: int, kicks) -> int:
        """KICKED{REPLACED} to each connection named by (user_id, device_id,
        session_epoch) of `kicks`: a newer session of its device logged in on another
        gateway (docs/decisions/0042-scale-presence.md). Only that exact session: a newer
        one here is never kicked. Returns how many were kicked."""
        kicked = 0
        for k in kicks:
            conn = self._users.get((tenant, k.user_id), {}).get(k.device_id)
            if conn is None or conn.session_epoch != k.session_epoch:
                continue
            self._m.remote_kicks.inc()
            body = connection_pb2.Kicked(reason=connection_pb2.Kicked.REPLACED).SerializeToString()
            try:
                conn.send(Opcode.KICKED, 0, body)
            except ConnectionError:
                pass  # closing already
            conn.kick()
            kicked += 1
        return kicked

    def unregister(self, conn: DeviceConn) -> None:
        """Forget conn (a no-op when a newer login of its device replaced it)."""
        devices = self._users.get((conn.tenant, conn.user_id))
        if devices and devices.get(conn.device_id) is conn:
            del devices[conn.device_id]
            self._online -= 1
            if not devices:
                del self._users[(conn.tenant, conn.user_id)]
        self._m.online_devices.set(self._online)

    def connections(self, tenant: Optional[int] = None, user_id: int = 0) -> list[DeviceConn]:
        """The online connections of one user, or of everyone when `tenant` is None
        (presence renewal, revocation)."""
        if tenant is None:
            return [c for devices in self._users.values() for c in devices.values()]
        return list(self._users.get((tenant, user_id), {}).values())

    def deliver_frames(self, frames: internal_pb2.DeviceFrames) -> None:
        """One server-initiated frame (READ_SYNC, SESSION_DELTA) to every online device of
        the user but `exclude_device_id`; dropped (counted) for a slow device."""
        if frames.opcode not in DEVICE_FRAME_OPCODES:
            self._m.push_dropped.inc()
            return
        devices = self._users.get((int.from_bytes(frames.tenant_id, "big"), frames.user_id), {})
        for device_id, conn in list(devices.items()):
            if device_id == frames.exclude_device_id:
                continue
            if conn.queued_bytes > DEVICE_FRAMES_QUEUE_LIMIT:
                self._m.push_dropped.inc()
                continue
            try:
                conn.send(frames.opcode, 0, frames.body)
                self._m.push_frames.inc()
            except ConnectionError:
                self._m.push_dropped.inc()

    def deliver(self, batch: internal_pb2.PushBatch) -> None:
        """PUSH_EVENTS with its position to every online device of each position's users.
        A batch of whole entries (`targets`, a mailbox node from before positions, during
        a rolling upgrade) is delivered as the position of its newest entry."""
        started = time.perf_counter()
        tenant = int.from_bytes(batch.tenant_id, "big")
        for pos in batch.positions:
            with bind(trace=pos.trace_id), push_span(tenant, pos):  # a no-op with tracing off (0140)
                sent = self._deliver_position(tenant, pos.mailbox_seq, [pos.message_id] if pos.message_id else [],
                                              pos.user_ids, pos.inline)
                tracer.debug("push of mailbox_seq %d to %d device(s)", pos.mailbox_seq, sent)
        for target in batch.targets:
            seq = max((e.mailbox_seq for e in target.entries), default=0)
            self._deliver_position(tenant, seq, [e.message_id for e in target.entries if e.message_id],
                                   [target.user_id])
        self._m.stage.labels(stage="push").observe(time.perf_counter() - started)
        now_ms = time.time() * 1000
        for pos in batch.positions:  # the id's HLC ms is its commit time (writer clocks within the skew bound)
            try:
                committed_ms = split_message_id(pos.message_id)[0]
            except (IdError, ValueError, TypeError):  # no id, or not a writer's: nothing to time
                continue
            self._m.commit_to_push.observe(max(0.0, now_ms - committed_ms) / 1000)

    def _deliver_position(self, tenant: int, seq: int, message_ids: list[bytes], users: Sequence[int],
                          inline: Sequence[internal_pb2.PushBatch.Inline] = ()) -> int:
        # serialized once per position; a device's frame is its lane field + this (protobuf
        # concatenation is a merge: the same bytes as serializing the whole message)
        common = mailbox_pb2.PushEvents(mailbox_seq=seq, message_ids=message_ids).SerializeToString()
        whole = {one.user_id: common + _inline_fields(one) for one in inline} if inline else {}
        sent = 0
        for user in users:
            devices = self._users.get((tenant, user))
            if not devices:
                self._m.push_no_device.inc()  # nothing lost: the device pulls when it logs in
                continue
            tail = whole.get(user, common)
            if tail is not common:
                self._m.push_inline.inc(len(devices))
            for conn in list(devices.values()):
                body = _lane_field(conn.lane) + tail
                if conn.queued_bytes > PUSH_QUEUE_LIMIT:
                    self._m.push_dropped.inc()
                    conn.wake_when_drained(PUSH_QUEUE_LIMIT // 2, self._wake_drained)
                    continue
                try:
                    conn.send(Opcode.PUSH_EVENTS, 0, body)
                    self._m.push_frames.inc()
                    sent += 1
                except ConnectionError:  # closing: the device pulls when it reconnects
                    self._m.push_dropped.inc()
        return sent

    def wake_shards(self, shards: set[int]) -> int:
        """Empty PUSH_EVENTS to every online device whose mailbox shard is in `shards`;
        returns how many."""
        woken = 0
        for devices in list(self._users.values()):
            for conn in list(devices.values()):
                if conn.shard not in shards:
                    continue
                if conn.queued_bytes > PUSH_QUEUE_LIMIT:
                    conn.wake_when_drained(PUSH_QUEUE_LIMIT // 2, self._wake_drained)
                    continue
                try:
                    conn.send(Opcode.PUSH_EVENTS, 0, WAKE_BODY)
                    woken += 1
                except ConnectionError:
                    pass  # closing: the device pulls when it reconnects
        self._m.wakeups.labels(reason="link").inc(woken)
        return woken

    def _wake_drained(self, conn: DeviceConn) -> None:
        try:
            conn.send(Opcode.PUSH_EVENTS, 0, WAKE_BODY)
            self._m.wakeups.labels(reason="drained").inc()
        except ConnectionError:
            pass  # closed meanwhile: the device pulls when it reconnects
