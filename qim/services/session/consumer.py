"""SessionProjection's durable dispatch consumer (docs/design.md §6; seed 000: "qsession 独立
静态消费 dispatch 并把 Redis checkpoint 绑定 cluster_id + topic_id + partition_count").

Session shards (docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md): a user's
session shard is its MailboxShard (virtual bucket mod shard count), and dispatch
partition s carries exactly the records of shard s, so the owner of session shard s
reads partition s by static assignment from the shard's OWN checkpoint in Redis (never a
consumer-group offset) and registers every recipient of every record (and, for a direct
message, its sender, whatever the sender's shard: every registration write is
order-independent). Only after every registration of a batch succeeded does it advance
each shard's checkpoint by compare-and-set, fenced by the shard's owner_epoch: both in
one script, one Redis round trip per poll (session_project.lua). A crash replays the
batch; registration is idempotent. A shard is served (list pages) once caught up to
the high watermark seen when it was taken. Shards come from the node's ShardKeeper
(`add_shard`, `remove_shard`); a checkpoint write refused by a newer owner's fence stops
that shard at once (`on_lost`). Without a registry (tests) `start()` takes the shards
given at construction.

Each acquisition of a shard is a tenure (issue 33): `add_shard` binds the checkpoint
under a token of its own, and a batch writes only the shards whose tenure it read its
records under. A write of an earlier tenure (a batch still retrying across a lapse and
a re-acquire, or one landing late) is refused by the checkpoint's tenure and never moves
the new tenure's position: the same owner taking a shard back keeps its owner_epoch, so
the fence alone cannot tell the two apart. A checkpoint that moved under a tenure all the
same (QIM_CKPT_CONFLICT, QIM_CKPT_BINDING: a bug, or a hand edit) stops that shard and
hands it back through `on_lost(shard, "conflict")`: the keeper takes it again from a
fresh read, the other shards keep running.

Fails closed — stays up, not ready, the reason in /healthz and in UNAVAILABLE replies —
when a checkpoint is bound to another cluster id, topic id or partition count; when
the topic has no topic id or not QIM_MAILBOX_SHARD_COUNT partitions; when a checkpoint
offset is below the retained log start (records lost to retention) or past the log end
(topic re-created); on an undecodable dispatch record (an operator decides: a restart
would find the same). Without `on_lost` (tests), a checkpoint moved under us too.
Redis and broker outages are retried with backoff; a Redis instance down holds back
only the shards that need it, the others go on (durablebatch.py; decision 0097).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Callable, Optional, Sequence

from qim.consts import DISPATCH_TOPIC, KAFKA_BATCH_FETCH, KAFKA_CONSUME_WAIT_S, SESSION_CONSUME_BATCH
from qim.errors import EngineError
from qim.infra.kafka.consumer import AsyncConsumer
from qim.infra.kafka.identity import wait_topic_identity
from qim.services.session.durablebatch import BatchWrites, Pending
from qim.services.session.metrics import SessionMetrics
from qim.services.session.projected import Projected
from qim.services.session.register import Registration
from qim.stores.sessions import SessionStore

logger = logging.getLogger(__name__)



class DurableProjector(BatchWrites):
    """`start()` binds to the topic; `run()` consumes until cancelled or failed closed.
    `on_registered(regs)` is called after each batch's store writes (cache marks);
    `on_lost(shard, reason)` when a shard stopped here ("refused": a newer owner's fence;
    "conflict": its checkpoint moved under it, take it again from a fresh read).
    `shards`: what `start()` takes without a registry. `projected`: the records the
    low-latency path registered, skipped here (decision 0167; None: every record is
    written)."""

    def __init__(self, bootstrap: str, sessions: SessionStore, shard_count: int,
                 on_registered: Callable[[list[Registration]], None], metrics: Optional[SessionMetrics] = None,
                 shards: Sequence[int] = (), on_lost: Optional[Callable[[int, str], None]] = None,
                 projected: Optional[Projected] = None) -> None:
        self._m = metrics if metrics is not None else SessionMetrics()
        self._projected = projected
        self._bootstrap = bootstrap
        # no user waits on this path (the mailbox's low-latency feed comes first): large
        # fetches, one script call per batch of many records (docs/decisions/0053)
        self._consumer = AsyncConsumer(bootstrap, "qim-session", KAFKA_BATCH_FETCH)  # nothing is ever committed under it
        self._sessions = sessions
        self._shard_count = shard_count
        self._static = list(shards)
        self._on_registered = on_registered
        self._on_lost = on_lost
        self._binding = ""
        self.next: dict[int, int] = {}  # served shard -> next offset of its partition
        self.fences: dict[int, int] = {}  # served shard -> owner_epoch
        self.tenures: dict[int, str] = {}  # served shard -> the token its checkpoint was bound with
        self.held: dict[int, Pending] = {}  # served shard -> records not written yet (durablebatch.py)
        self.catch_up_to: dict[int, int] = {}
        self.stopped = ""
        self.running = False

    def not_ready(self) -> Optional[str]:
        """Why this node is not ready (failed closed, not running, catching up), or None."""
        if self.stopped:
            return f"durable projection failed closed: {self.stopped}"
        if not self.running:
            return "durable projection not running"
        behind = [p for p, hw in self.catch_up_to.items() if p in self.next and self.next[p] < hw]
        if behind:
            return f"durable projection catching up with the dispatch log (shards {', '.join(map(str, behind))})"
        return None

    def unserved(self, shard: int) -> Optional[str]:
        """Why list pages of session shard `shard` must not be served here now, or None."""
        reason = self.not_ready() if self.stopped or not self.running else None
        if reason:
            return reason
        if shard not in self.next:
            return f"session shard {shard} is not served by this node (not its owner)"
        if self.next[shard] < self.catch_up_to.get(shard, 0):
            return f"session shard {shard} is catching up with the dispatch log"
        return None

    def _fail_closed(self, reason: str) -> None:
        self.stopped = reason
        logger.error("session durable projection stopped: %s", reason)

    async def start(self) -> None:
        """Bind to the dispatch topic (and take the static shards). Raises EngineError
        when the broker stays unreachable; every other problem fails closed (see the
        module docstring)."""
        cluster, topic_id, parts = await wait_topic_identity(self._bootstrap, DISPATCH_TOPIC)
        if parts != self._shard_count:
            return self._fail_closed(f"{DISPATCH_TOPIC} has {parts} partitions, QIM_MAILBOX_SHARD_COUNT={self._shard_count}")
        self._binding = f"{cluster}|{topic_id}|{parts}"
        for shard in self._static:
            if self.stopped:
                break
            await self.add_shard(shard, 0)

    async def add_shard(self, shard: int, owner_epoch: int) -> None:
        """Serve session shard `shard` as owner `owner_epoch`: fence and bind its
        checkpoint, check it against the retained log, assign its partition there.
        NotOwner when a newer owner fenced it; EngineError (StoreUnavailable) on an
        outage; a checkpoint that must not be used fails the projection closed."""
        if self.stopped:  # held (MARK_READ is served), never projected: the reason is in /healthz
            return
        self._forget(shard)  # a batch of an earlier tenure must see at once that it ended
        tenure = secrets.token_hex(8)
        ckpt = await self._sessions.checkpoint_bind(shard, self._binding, owner_epoch, tenure)
        if ckpt.status == "MISMATCH":
            return self._fail_closed(f"shard {shard}: checkpoint bound to {ckpt.binding}, the broker has "
                                     f"{self._binding}")
        start = ckpt.offsets[0]
        low, high = (await self._consumer.watermark_ranges(DISPATCH_TOPIC, [shard]))[shard]
        if start < low:
            return self._fail_closed(f"partition {shard}: checkpoint {start} below the retained log start {low}")
        if start > high:
            return self._fail_closed(f"partition {shard}: checkpoint {start} past the log end {high}")
        # the position of THIS acquisition: whatever an earlier tenure's batch still does,
        # it no longer touches these (module doc; issue 33)
        self.next[shard], self.fences[shard], self.catch_up_to[shard] = start, owner_epoch, high
        self.tenures[shard] = tenure
        try:
            await self._consumer.add_partitions(DISPATCH_TOPIC, {shard: start})
        except BaseException:
            self._forget(shard)
            raise
        logger.info("session shard %d projected from offset %d (owner_epoch %d, %s)", shard, start, owner_epoch,
                    "new checkpoint" if ckpt.status == "NEW" else "resumed")

    def _forget(self, shard: int) -> None:
        self.next.pop(shard, None)
        self.fences.pop(shard, None)
        self.catch_up_to.pop(shard, None)
        self.tenures.pop(shard, None)
        self.held.pop(shard, None)

    async def remove_shard(self, shard: int, reason: str) -> None:
        """Stop projecting `shard` at once (records of it still queued are ignored).
        Never raises."""
        if shard not in self.next:
            return
        self._forget(shard)
        try:
            await self._consumer.remove_partitions(DISPATCH_TOPIC, [shard])
        except EngineError as exc:
            logger.warning("session shard %d: unassign failed: %s", shard, exc)
        logger.info("session shard %d no longer projected: %s", shard, reason)

    async def run(self) -> None:
        """Consume and project batch after batch until cancelled or failed closed (see the module docstring)."""
        if self.stopped:
            return await self._stop_fetching()
        self.running = True
        try:
            while not self.stopped:
                try:
                    msgs = await self._consumer.consume(SESSION_CONSUME_BATCH, KAFKA_CONSUME_WAIT_S)
                except EngineError as exc:
                    logger.warning("dispatch read failed: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                if msgs or self.held:  # a held shard is retried even when nothing new came
                    await self._batch(msgs)
        finally:
            self.running = False
        await self._stop_fetching()

    async def _stop_fetching(self) -> None:
        # failed closed: nothing reads the dispatch consumer any more; unassigned, it stops
        # fetching (issue 33: its prefetch queue grew about 2 MB a minute while the node ran)
        try:
            await self._consumer.remove_partitions(DISPATCH_TOPIC, list(range(self._shard_count)))
        except EngineError as exc:
            logger.warning("dispatch consumer not unassigned after failing closed: %s", exc)

    async def lag_loop(self, period_s: float = 5.0) -> None:
        """Export the durable projection's lag over every dispatch partition."""
        while True:
            try:
                if self.next:
                    hws = await self._consumer.high_watermarks(DISPATCH_TOPIC, list(self.next))
                    # a shard given up while the watermarks were read is no longer counted
                    self._m.lag.set(sum(max(0, hw - self.next[p]) for p, hw in hws.items() if p in self.next))
            except EngineError as exc:
                logger.debug("dispatch lag unavailable: %s", exc)
            await asyncio.sleep(period_s)

    async def close(self) -> None:
        """Close the dispatch consumer."""
        await self._consumer.close()

