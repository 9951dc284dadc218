"""Session side of the low-latency Projection path, mailbox -> session (docs/design.md §5.4
last step, §6; seed 004 §5 "Projection → session（try_send，满则丢）").

PROJECTION frames (one-way, from qim/services/mailbox/projection.py) are queued
(bounded, drop counted) and ONE consumer drains everything queued into one pipelined
registration batch (the seed's session awaited one write per projection: throughput ≈
1/RTT, 75 % dropped at 15k/s). Dropping is safe: the durable dispatch consumer registers
the same messages with the same script. What this path wrote is remembered by where
its record was read (`Projected`), and the durable consumer skips those records
(docs/decisions/0167).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Callable, Optional

from google.protobuf.message import DecodeError

from qim.consts import SESSION_PROJECTION_QUEUE
from qim.obs.logcontext import bind, tracer
from qim.proto.v1 import projection_pb2
from qim.services.session.metrics import SessionMetrics
from qim.services.session.projected import Projected
from qim.services.session.register import Message, Registration, kind_of, registrations
from qim.stores.errors import StorageError
from qim.stores.sessions import SessionStore

logger = logging.getLogger(__name__)

DRAIN_MAX = 4096  # projected messages per registration batch


class ProjectionIntake:
    """`offer(body)` from the RPC listener (never awaits); `run()` drains. Counts into
    `metrics` (a private SessionMetrics when None). `projected`: where the records whose
    registrations were written are remembered for the durable consumer (decision 0167;
    None: nothing is remembered)."""

    def __init__(self, sessions: SessionStore, owns: Callable[[int], bool],
                 on_registered: Callable[[list[Registration]], None], limit: int = SESSION_PROJECTION_QUEUE,
                 metrics: Optional[SessionMetrics] = None, projected: Optional[Projected] = None) -> None:
        self._m = metrics if metrics is not None else SessionMetrics()
        self._projected = projected
        self._sessions = sessions
        self._owns = owns
        self._on_registered = on_registered
        self._limit = limit
        self._queue: collections.deque = collections.deque()
        self._wakeup = asyncio.Event()

    def offer(self, body: bytes) -> None:
        """Queue the messages of one PROJECTION frame (dropped, counted, past the limit)."""
        try:
            frame = projection_pb2.Projection.FromString(body)
        except DecodeError:
            self._m.projection_dropped.labels(reason="undecodable").inc()
            return
        tenant = int.from_bytes(frame.tenant_id, "big")
        for m in frame.messages:
            if len(self._queue) >= self._limit:
                self._m.projection_dropped.labels(reason="queue_full").inc()
                continue
            self._queue.append((tenant, m))
            if tracer.isEnabledFor(logging.DEBUG):
                with bind(trace=m.trace_id):
                    tracer.debug("projection queued for %d recipient(s)", len(m.users))
        self._wakeup.set()

    async def run(self) -> None:
        """Drain the queue into registration batches until cancelled."""
        while True:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch = [self._queue.popleft() for _ in range(min(DRAIN_MAX, len(self._queue)))]
            messages: list[Message] = []
            places: list[tuple[int, int]] = []  # (shard, mailbox_seq) of each message written
            for tenant, m in batch:
                try:
                    kind_of(m.conversation_id)
                except ValueError:
                    self._m.projection_dropped.labels(reason="bad_conversation").inc()
                    continue
                messages.append(Message(tenant, m.conversation_id, m.conversation_seq, m.created_at_ms,
                                        m.sender_id, m.users))
                places.append((m.shard, m.mailbox_seq))
            regs = registrations(messages, self._owns)
            try:
                await self._sessions.register(regs)
            except StorageError as exc:
                self._m.projection_dropped.labels(reason="redis").inc(len(batch))
                logger.warning("low-latency projection of %d messages dropped: %s", len(batch), exc)
                continue
            except Exception:  # noqa: BLE001 — this loop must outlive a bug; the durable path recovers
                self._m.projection_dropped.labels(reason="error").inc(len(batch))
                logger.exception("low-latency projection of %d messages failed", len(batch))
                continue
            self._m.registrations.labels(path="lowlatency").inc(len(regs))
            if self._projected is not None:  # written: the durable consumer need not write them again
                for shard, seq in places:
                    self._projected.add(shard, seq)
            self._on_registered(regs)
