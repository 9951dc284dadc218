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
Redis and broker outages are retried with backoff.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Callable, Optional, Sequence

from qim.consts import DISPATCH_TOPIC, KAFKA_BATCH_FETCH, KAFKA_CONSUME_WAIT_S, SESSION_CONSUME_BATCH
from qim.errors import EngineError
from qim.infra.kafka.bridge import AsyncConsumer
from qim.infra.kafka.identity import wait_topic_identity
from qim.obs.logcontext import bind, tracer
from qim.services.session.metrics import SessionMetrics
from qim.services.session.register import Message, Registration, kind_of, registrations
from qim.stores.errors import CheckpointConflict, NotOwner, StorageError
from qim.stores.sessions import SessionStore
from qim.wire import dispatch as dispatch_record

logger = logging.getLogger(__name__)



class DurableProjector:
    """`start()` binds to the topic; `run()` consumes until cancelled or failed closed.
    `on_registered(regs)` is called after each batch's store writes (cache marks);
    `on_lost(shard, reason)` when a shard stopped here ("refused": a newer owner's fence;
    "conflict": its checkpoint moved under it, take it again from a fresh read).
    `shards`: what `start()` takes without a registry."""

    def __init__(self, bootstrap: str, sessions: SessionStore, shard_count: int,
                 on_registered: Callable[[list[Registration]], None], metrics: Optional[SessionMetrics] = None,
                 shards: Sequence[int] = (), on_lost: Optional[Callable[[int, str], None]] = None) -> None:
        self._m = metrics if metrics is not None else SessionMetrics()
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
                if msgs:
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

    async def _batch(self, msgs: list) -> None:
        messages: dict[int, list[Message]] = {}  # partition -> its records' messages
        advance: dict[int, int] = {}
        count = 0
        for m in msgs:
            part, off = m.partition(), m.offset()
            if part not in self.next or off < self.next[part]:
                continue  # a shard given up, or a record projected before
            try:
                d = dispatch_record.decode(m.value())
                c = d.coord
                if d.trace_id and tracer.isEnabledFor(logging.DEBUG):
                    with bind(trace=d.trace_id):
                        tracer.debug("durable projection of partition %d offset %d", part, off)
                kind_of(c.conversation_id)
                messages.setdefault(part, []).append(Message(
                    d.tenant, c.conversation_id, c.conversation_seq, c.created_at_ms, c.sender_id, d.recipients))
            except (dispatch_record.DispatchDecodeError, ValueError) as exc:
                # never skip a record: a gap here is a conversation missing from a list
                return self._fail_closed(f"partition {part} offset {off}: {exc}")
            advance[part] = off + 1
            count += 1
        # the tenure each partition's records were read under, and its fence and position
        read_under = {p: (self.tenures[p], self.fences[p], self.next[p]) for p in advance}
        delay = 0.2
        batch: list[Registration] = []
        parts: set[int] = set()  # the partitions `batch` was built from
        while True:
            # only the shards still in the tenure their records were read under: one given
            # up (and maybe taken again) while this batch retried is the new tenure's to project
            moves = {p: (read_under[p][1], read_under[p][2], new) for p, new in advance.items()
                     if self.tenures.get(p) == read_under[p][0]}
            if not moves:
                return
            if set(moves) != parts:  # built once per batch, again only when a shard left it
                parts = set(moves)
                batch = registrations([m for p in moves for m in messages.get(p, [])], _everyone)
            try:
                # registrations then every checkpoint's fenced compare-and-set, one round
                # trip per poll (no per-record round trip); a retry after a lost reply finds its own values
                await self._sessions.project(self._binding, moves, batch,
                                             tenures={p: read_under[p][0] for p in moves})
                break
            except NotOwner as exc:
                shard = exc.shard if exc.shard is not None else min(moves)
                advance.pop(shard, None)
                if self.tenures.get(shard) != read_under[shard][0]:  # a write of an earlier tenure: dropped
                    self._m.stale_writes.inc()
                    logger.info("session shard %d: a checkpoint write of its previous tenure refused (%s)", shard,
                                exc.message)
                    continue
                # a newer owner fenced that shard: stop it, keep the others
                logger.error("session shard %d: checkpoint write refused (%s); stopping the shard", shard,
                             exc.message)
                self._m.fenced.inc()
                await self._lose(shard, "refused by a newer owner's fence", "refused")
            except EngineError as exc:  # StoreUnavailable: nothing moved, retry the batch
                self._m.durable_retries.inc()
                logger.warning("durable projection batch failed (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            except CheckpointConflict as exc:  # the checkpoint was rebound or moved under this tenure
                if self._on_lost is None:
                    return self._fail_closed(f"checkpoint: {exc.reason or 'refused'} {exc.message}")
                shard = _named_shard(exc.message, moves)
                advance.pop(shard, None)
                logger.error("session shard %d: %s %s; projecting it again from a fresh read", shard,
                             exc.reason, exc.message)
                self._m.shard_restarts.inc()
                await self._lose(shard, "checkpoint moved under its projection", "conflict")
            except StorageError as exc:  # a corrupt checkpoint: an operator decides
                return self._fail_closed(f"checkpoint: {exc.reason or 'refused'} {exc.message}")
        served = {p: advance[p] for p in moves if self.tenures.get(p) == read_under[p][0]}
        if not served:
            return
        self.next.update(served)
        done = batch if set(served) == parts else registrations(
            [m for p in served for m in messages.get(p, [])], _everyone)
        self._m.dispatch_records.inc(count)
        self._m.registrations.labels(path="durable").inc(len(done))
        self._on_registered(done)

    async def _lose(self, shard: int, why: str, reason: str) -> None:
        """Stop projecting `shard` and tell the keeper (`on_lost`), which stops its other
        parts and, for "conflict", takes it again from a fresh read."""
        await self.remove_shard(shard, why)
        if self._on_lost is not None:
            self._on_lost(shard, reason)

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


def _named_shard(message: str, moves: dict[int, tuple[int, int, int]]) -> int:
    """The shard a checkpoint refusal names ("shard=<s> ..." from session_project.lua),
    else the lowest shard of the call."""
    head = message.split(" ", 1)[0]
    if head.startswith("shard=") and head[6:].isdigit() and int(head[6:]) in moves:
        return int(head[6:])
    return min(moves)


def _everyone(user: int) -> bool:
    """Every recipient of a record on a served partition belongs to its shard."""
    return True
