"""MailboxMaterializer (DESIGN.md §5.4, seed 001 §2.5, seed 004 §5).

Statically assigns its dispatch partitions, seeks each to the watermark's start offset
(never trusts committed group offsets), and runs one FIFO worker per shard (capacity
128, strictly serial within a partition) under a global permit (64). A full shard
queue pauses only that partition. Per record: one fused materialize call (DP + entries
+ watermark), then a best-effort push. Any store failure: W does not move, the node
stops consuming (MailboxDirty, /healthz 503) and replays on restart.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Callable, Deque, Optional

from prometheus_client import Counter, Gauge

from qim._core import eventgroup, ids, watermark
from qim._core import mailbox_seq as mseq
from qim._core.types import MailboxEvent
from qim.consts import DISPATCH_TOPIC, MAILBOX_GLOBAL_PERMIT, MAILBOX_SHARD_FIFO
from qim.errors import EngineError, MailboxDirty
from qim.infra.kafka.bridge import AsyncConsumer
from qim.protocol import EventType
from qim.services import dispatch_record
from qim.services.mailbox.store import RedisMailboxStore

logger = logging.getLogger(__name__)

RECORDS = Counter("qim_mailbox_records", "Dispatch records materialized", ["status"])
DIRTY = Counter("qim_mailbox_dirty", "Shards stopped by MailboxDirty (must stay 0)")
PAUSES = Counter("qim_mailbox_partition_pauses", "Partitions paused because their FIFO was full")
LAG = Gauge("qim_mailbox_queued_records", "Records queued in shard FIFOs")

# Called after a record is final: (tenant, [(user_id, mailbox_seq, events)]). It must
# only queue (never await): push is off the shard path (DESIGN.md §5.4).
PushHook = Callable[[int, list[tuple[int, int, list[MailboxEvent]]]], None]


class ShardState:
    """In-memory view of one owned shard; `blob` mirrors the stored watermark."""

    def __init__(self, shard: int, epoch: int, blob: Optional[bytes]) -> None:
        self.shard = shard
        self.epoch = epoch
        self.stored_blob = blob  # None until the first record is materialized
        self.blob = blob if blob is not None else watermark.empty()
        self.queue: Deque = collections.deque()
        self.wakeup = asyncio.Event()
        self.paused = False


class MailboxMaterializer:
    """`start()` positions the shards; `run()` consumes until cancelled or dirty."""

    def __init__(self, bootstrap: str, store: RedisMailboxStore, shards: list[int], push: PushHook) -> None:
        self._consumer = AsyncConsumer(bootstrap, "qim-mailbox")
        self._store = store
        self._owned = shards
        self._push = push
        self._permit = asyncio.Semaphore(MAILBOX_GLOBAL_PERMIT)
        self.shards: dict[int, ShardState] = {}
        self.dirty_reason = ""
        self.ready = False

    async def start(self) -> None:
        starts = {}
        for shard in self._owned:
            blob, epoch = await self._store.load_watermark(shard)
            state = ShardState(shard, epoch, blob)
            watermark.decode(state.blob)  # fail closed on a corrupt blob before serving
            self.shards[shard] = state
            starts[shard] = watermark.start_offset(state.blob)
        await self._consumer.assign(DISPATCH_TOPIC, starts)
        logger.info("mailbox owns %d shards", len(self._owned))

    async def run(self) -> None:
        workers = [asyncio.get_running_loop().create_task(self._worker(s)) for s in self.shards.values()]
        self.ready = True
        try:
            while not self.dirty_reason:
                try:
                    msgs = await self._consumer.consume(256, 0.1)
                except EngineError as exc:
                    logger.warning("dispatch read failed: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                full = []
                for m in msgs:
                    state = self.shards[m.partition()]
                    state.queue.append(m)
                    state.wakeup.set()
                    if len(state.queue) >= MAILBOX_SHARD_FIFO and not state.paused:
                        state.paused = True
                        full.append(state.shard)
                if full:
                    PAUSES.inc(len(full))
                    await self._consumer.pause(DISPATCH_TOPIC, full)
                LAG.set(sum(len(s.queue) for s in self.shards.values()))
                await self._resume_drained()
        finally:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _resume_drained(self) -> None:
        ready = [s.shard for s in self.shards.values() if s.paused and len(s.queue) < MAILBOX_SHARD_FIFO // 2]
        if ready:
            for shard in ready:
                self.shards[shard].paused = False
            await self._consumer.resume(DISPATCH_TOPIC, ready)

    async def _worker(self, state: ShardState) -> None:
        while True:
            if not state.queue:
                state.wakeup.clear()
                await state.wakeup.wait()
                continue
            msg = state.queue[0]
            async with self._permit:
                try:
                    await self._materialize(state, msg.offset(), msg.value())
                except (MailboxDirty, EngineError, dispatch_record.DispatchDecodeError) as exc:
                    DIRTY.inc()
                    self.dirty_reason = f"shard {state.shard} offset {msg.offset()}: {exc}"
                    self.ready = False
                    logger.error("mailbox stopped: %s", self.dirty_reason)
                    return
            state.queue.popleft()

    async def _materialize(self, state: ShardState, offset: int, value: bytes) -> None:
        d = dispatch_record.decode(value)
        if d.target_shard != state.shard:
            raise MailboxDirty(f"dispatch for shard {d.target_shard} found in partition {state.shard}")
        digest = dispatch_record.payload_digest(value)
        per_user = []
        for user in d.recipients:
            event = MailboxEvent(
                event_type=EventType.MESSAGE, event_id=ids.event_id(d.dispatch_id, user, EventType.MESSAGE),
                message_id=d.message_id, conversation_id=d.conversation_id, conversation_seq=d.conversation_seq,
                sender_id=d.sender_id, created_at_ms=d.created_at_ms, message_type=d.message_type,
                custom_type=d.custom_type, client_message_id=d.client_message_id if user == d.sender_id else b"",
                body=d.body,
            )
            per_user.append((user, [event]))
        seq_bytes = mseq.to_bytes(mseq.compose(state.epoch, offset))
        members = [(u, seq_bytes + eventgroup.pack_group(evs)) for u, evs in per_user]
        new_blob = watermark.advance_all(state.blob, offset)
        status, used_seq = await self._store.materialize(state.shard, state.epoch, d.tenant, d.dispatch_id, digest,
                                                         offset, members, state.stored_blob, new_blob)
        state.blob = state.stored_blob = new_blob
        RECORDS.labels(status=status).inc()
        if status == "FRESH":
            self._push(d.tenant, [(u, used_seq, evs) for u, evs in per_user])

    async def close(self) -> None:
        await self._consumer.close()
