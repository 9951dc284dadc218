"""ShardKeeper: one node's membership in the ShardRegistry and the shards it serves
(docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md).

`join()` takes the node lease under the configured node id (qim/cluster/join.py: a live
holder of the id refuses the join, a dead predecessor's lease is taken over, and with
it, at once, the shards it held, each under a new owner_epoch).

`run()` renews every `renew_ms`: one registry call renews the node lease and every
shard lease and returns the live nodes of the kind. The shards this node should own
are those rendezvous hashing with bounded loads gives it over the live nodes
(placement.py). A shard that should move to another live node is stopped
(`on_release`), then released: the new owner takes it only then, so it never has two
owners at once. A shard this node should own is acquired as soon as it is free or
expired, then started (`on_acquire(shard, owner_epoch)`: fence, position, serve).
Starts and stops can take seconds (each broker call may wait out an idle consume): the
keeper renews while they run (docs/decisions/0059-renew-while-shards-start.md).

Leases are judged locally by the monotonic clock from the moment the renewal was SENT:
this node's leases end no later than the registry's. When renewals fail (the registry
cannot be reached) the node keeps serving until its leases end, then stops serving
every shard (fail closed: `not_ready` says so, /healthz 503) and takes them again once
the registry answers and nobody else did. A service whose write was refused by a
fence reports it with `refused(shard)`: the shard is dropped without a release, and
`on_release` runs for it at the start of the next tick, before anything is acquired (the
service stopped the refused part at once; the rest of it, e.g. the mailbox's presence
partition, stops there). `on_release` must be safe to call for a shard in any state: a
start that failed half way is undone by it too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Iterator, Optional

from qim.cluster.join import incarnation, take_node_lease
from qim.cluster.metrics import ShardMetrics
from qim.cluster.placement import shards_of
from qim.errors import EngineError
from qim.stores.errors import NotOwner, StorageError
from qim.stores.registry import JoinRefused, ShardRegistry

logger = logging.getLogger(__name__)

SAFETY = 0.1  # this share of the lease (at most 1 s) is given up early: clock rate, scheduling

OnAcquire = Callable[[int, int], Awaitable[None]]  # (shard, owner_epoch); raise to refuse it
OnRelease = Callable[[int, str], Awaitable[None]]  # (shard, reason); stop serving; never raises
# the reasons of a graceful release (this node still holds the lease while it stops):
# a service may finish what is cheap to finish (e.g. commit a position); any other reason
# means another owner may already be serving the shard
REBALANCED, CLEAN_STOP = "rebalanced to another node", "clean stop"
GRACEFUL = frozenset((REBALANCED, CLEAN_STOP))


async def _nothing(*_: object) -> None:
    return None


class ShardKeeper:
    """The leases of node `node_id` of `kind` over `count` shards (0: a node lease
    only, e.g. a gateway's liveness). `addr`/`extra` are published with the node lease.
    `owned` maps every shard served now to its owner_epoch."""

    def __init__(self, registry: ShardRegistry, kind: str, node_id: str, count: int, ttl_ms: int, renew_ms: int,
                 addr: str = "", extra: str = "", on_acquire: OnAcquire = _nothing, on_release: OnRelease = _nothing,
                 metrics: Optional[ShardMetrics] = None) -> None:
        self._registry = registry
        self.kind, self.node_id, self.count = kind, node_id, count
        self.ttl_s, self.renew_s = ttl_ms / 1000, renew_ms / 1000
        self._ttl_ms = ttl_ms
        self.addr, self.extra = addr, extra
        self._on_acquire, self._on_release = on_acquire, on_release
        self._m = metrics if metrics is not None else ShardMetrics()
        self.paused: Callable[[], frozenset[int]] = frozenset  # shards nobody may hold: an operator's move (0104)
        self.incarnation = incarnation()
        self.owned: dict[int, int] = {}
        self.live: list[str] = []
        self.joined = False
        self.since_ms = 0  # when this incarnation joined (registry clock): orders incarnations of one id
        self.settled = False  # the first renewal and placement after joining are done
        self._refused: set[int] = set()  # shards a fence refused: on_release runs at the next tick
        self._starting: dict[int, int] = {}  # granted, on_acquire running: renewed with the owned ones
        self._lost_starting: set[int] = set()  # of those, named lost by a renewal while they started
        self._id_taken = False  # a renewal during a start or stop found the node id taken
        self.gone = ""  # why this node stopped for good (its node id was taken)
        self.registry_error = ""  # the last failed renewal, "" once one succeeds
        self.valid_until = 0.0  # monotonic: every lease of this node ends by then
        # called (with the seconds it was lapsed) after the first renewal that follows a
        # lapse of the node lease: the registry dropped this node meanwhile and its peers
        # sent it nothing (a gateway resyncs its devices: docs/decisions/0154)
        self.on_lapsed: Callable[[float], object] = lambda lapsed_s: None
        self._lapsed_at = 0.0  # monotonic: when the lease was found lapsed (0: not lapsed)
        self._changed = asyncio.Event()
        self._m.owned.labels(kind=kind).set_function(lambda: float(len(self.owned)))
        self._m.lease_left.labels(kind=kind).set_function(lambda: max(0.0, self.valid_until - time.monotonic()))

    def _margin(self) -> float:
        return min(self.ttl_s * SAFETY, 1.0)

    def _call(self, what: str, aw: Awaitable):
        """A registry call bounded by one renewal period and, while this node serves
        shards, by the end of its leases (a hung connection must not extend them)."""
        timeout = self.renew_s
        if self.owned:
            timeout = min(timeout, self.valid_until - time.monotonic())
        return asyncio.wait_for(aw, timeout=max(timeout, 0.05))

    def holds(self, shard: int) -> bool:
        """True while this node serves `shard` under a lease that has not ended."""
        return shard in self.owned and time.monotonic() < self.valid_until

    def not_ready(self) -> Iterator[str]:
        """Readiness reasons: not joined, the node id taken, leases ended without renewal."""
        if self.gone:
            yield self.gone
        elif not self.joined or not self.settled:
            yield f"{self.kind} node {self.node_id}: joining the shard registry"
        elif self.registry_error and time.monotonic() >= self.valid_until:
            yield (f"{self.kind} node {self.node_id}: shard registry unreachable ({self.registry_error}); "
                   "leases ended, serving no shards")

    async def join(self) -> None:
        """Take the node lease (module doc). JoinRefused naming the id when a live process
        holds it; StoreUnavailable / TimeoutError when the registry cannot be reached."""
        res, sent = await take_node_lease(self._registry, self.kind, self.node_id, self.incarnation, self._ttl_ms,
                                          self.renew_s, self.addr, self.extra)
        self.valid_until = sent + self.ttl_s - self._margin()
        self.since_ms = res.since_ms
        self.joined = True
        logger.info("%s node %s joined the shard registry (incarnation %s)", self.kind, self.node_id, self.incarnation)

    async def run(self) -> None:
        """Renew, rebalance and fail closed until cancelled or the node id is taken."""
        while not self.gone:
            started = time.monotonic()
            self._changed.clear()
            if self.joined and not self._lapsed_at and started >= self.valid_until + self._margin():
                self._lapsed_at = self.valid_until + self._margin()  # the registry's expiry, about
            try:
                await self.tick()
                delay = self.renew_s - (time.monotonic() - started)
                if self._lapsed_at and time.monotonic() < self.valid_until:  # renewed after a lapse
                    lapsed_s, self._lapsed_at = time.monotonic() - self._lapsed_at, 0.0
                    self._m.lapses.labels(kind=self.kind).inc()
                    logger.warning("%s node %s: its node lease had lapsed (%.1f s without a renewal: a stall "
                                   "or the registry away); renewed now", self.kind, self.node_id, lapsed_s)
                    try:
                        self.on_lapsed(lapsed_s)
                    except Exception:  # the lease loop goes on whatever the node's reaction did
                        logger.exception("%s node %s: on_lapsed failed", self.kind, self.node_id)
            except (StorageError, EngineError, asyncio.TimeoutError) as exc:
                self._failed("heartbeat", exc)
                delay = min(self.renew_s / 4, max(0.05, self.valid_until - time.monotonic()))
            if self.owned and time.monotonic() >= self.valid_until:
                await self._drop_all("lapsed", "leases ended without a renewal")
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=max(delay, 0.01))
            except asyncio.TimeoutError:
                pass

    def _failed(self, call: str, exc: BaseException) -> None:
        self._m.registry_failures.labels(kind=self.kind, call=call).inc()
        reason = f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
        if reason != self.registry_error:
            logger.warning("%s node %s: registry %s failed (%s); leases valid for %.1f s more", self.kind,
                           self.node_id, call, reason, max(0.0, self.valid_until - time.monotonic()))
        self.registry_error = reason

    async def tick(self) -> None:
        """One renewal and rebalance (run() calls it every renew_ms)."""
        while self._refused:  # refused by a fence: stop every part of it before it may be taken again
            await self._on_release(self._refused.pop(), "fenced by a newer owner")
        beat = await self._heartbeat()
        if beat.gone:
            await self._taken_over()
            return
        for shard in beat.lost:
            if self.owned.pop(shard, None) is not None:
                self._m.lost.labels(kind=self.kind, reason="taken").inc()
                logger.error("%s shard %d: the registry names another owner; stopping it", self.kind, shard)
                await self._on_release(shard, "taken by another owner")
        self.live = beat.live
        if not self.count:
            self.settled = True
            return
        desired = shards_of(self.kind, self.count, beat.live, self.node_id) - self.paused()
        moving = sorted(s for s in self.owned if s not in desired)
        if moving:
            await self._renewing(self._stop_moving(moving))
            await self._call("release", self._registry.release(self.kind, self.node_id, self.incarnation, moving))
            self._m.released.labels(kind=self.kind, reason="rebalance").inc(len(moving))
        # a shard a renewal just named lost is released in full at the next tick, first
        wanted = sorted(s for s in desired if s not in self.owned and s not in self._refused)
        if wanted and not self._id_taken:
            granted = await self._call("acquire", self._registry.acquire(self.kind, self.node_id, self.incarnation,
                                                                         self._ttl_ms, wanted))
            self._starting = dict(granted)
            try:
                await self._renewing(asyncio.gather(*(self._start(s, e) for s, e in sorted(granted.items()))))
            finally:
                self._starting, self._lost_starting = {}, set()
        if self._id_taken:
            await self._taken_over()
            return
        self.settled = True

    async def _heartbeat(self):
        """One renewal of the node lease and of every shard held or starting (a Heartbeat);
        the leases run from the moment it was sent."""
        sent = time.monotonic()
        held = {**self.owned, **self._starting}
        beat = await self._call("heartbeat", self._registry.heartbeat(self.kind, self.node_id, self.incarnation,
                                                                      self._ttl_ms, held))
        if not beat.gone:
            self.valid_until = sent + self.ttl_s - self._margin()
            if self.registry_error:
                logger.info("%s node %s: registry reachable again", self.kind, self.node_id)
                self.registry_error = ""
        return beat

    async def _taken_over(self) -> None:
        self.gone = (f"{self.kind} node {self.node_id}: the node id was taken over by another process; "
                     "serving nothing (restart under another id)")
        logger.error("%s", self.gone)
        await self._drop_all("gone", "node id taken over")

    async def _stop_moving(self, moving: list[int]) -> None:
        # together: each stop's broker calls wait for the consumer's idle consume, so one
        # after the other a rebalance of N shards took N seconds (docs/decisions/0060)
        await asyncio.gather(*(self._on_release(shard, REBALANCED) for shard in moving))
        for shard in moving:
            self.owned.pop(shard, None)

    async def _renewing(self, aw: Awaitable) -> None:
        """Await `aw` (shards starting or stopping) while renewing every renew_s: a shard
        a renewal names lost stops as a fenced one does; a taken node id ends the tick."""
        task = asyncio.ensure_future(aw)
        try:
            while not (await asyncio.wait({task}, timeout=self.renew_s))[0]:
                try:
                    beat = await self._heartbeat()
                except (StorageError, EngineError, asyncio.TimeoutError) as exc:
                    self._failed("heartbeat", exc)
                    continue
                if beat.gone:
                    self._id_taken = True  # the tick ends once `aw` is done
                    continue
                for shard in beat.lost:
                    if shard in self._starting:
                        self._lost_starting.add(shard)
                    elif shard in self.owned:
                        self.refused(shard, "taken")
            await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _start(self, shard: int, epoch: int) -> None:
        try:
            await self._on_acquire(shard, epoch)
        except NotOwner as exc:  # a newer owner fenced it: the registry lost its state?
            logger.error("%s shard %d: granted owner_epoch %d but the data is fenced higher (%s); not serving it",
                         self.kind, shard, epoch, exc.message)
            self._m.lost.labels(kind=self.kind, reason="refused").inc()
            await self._on_release(shard, "fenced higher")
            await self._release_quietly([shard])
            return
        except (StorageError, EngineError, asyncio.TimeoutError) as exc:
            logger.warning("%s shard %d: could not start serving (%s); released, retried next renewal", self.kind,
                           shard, exc)
            await self._on_release(shard, "could not start")  # undo what did start (on_release never raises)
            await self._release_quietly([shard])
            return
        if shard in self._lost_starting:  # a renewal while it started named another owner
            self._lost_starting.discard(shard)
            self._m.lost.labels(kind=self.kind, reason="taken").inc()
            logger.error("%s shard %d: taken by another owner while it started; stopping it", self.kind, shard)
            await self._on_release(shard, "taken by another owner")
            return
        self.owned[shard] = epoch
        self._m.acquired.labels(kind=self.kind).inc()
        logger.info("%s shard %d acquired by %s (owner_epoch %d)", self.kind, shard, self.node_id, epoch)

    async def _release_quietly(self, shards: list[int]) -> None:
        try:
            await self._call("release", self._registry.release(self.kind, self.node_id, self.incarnation, shards))
        except (StorageError, EngineError, asyncio.TimeoutError) as exc:
            self._failed("release", exc)  # the lease ends by itself

    async def _drop_all(self, reason: str, why: str) -> None:
        shards = sorted(self.owned)
        if shards:
            logger.error("%s node %s: stopping every shard (%s): %s", self.kind, self.node_id, why,
                         ",".join(map(str, shards)))
        for shard in shards:
            self.owned.pop(shard, None)
            self._m.lost.labels(kind=self.kind, reason=reason).inc()
            await self._on_release(shard, why)

    def refused(self, shard: int, reason: str = "refused") -> None:
        """A write of `shard` was refused by its fence (`reason` "conflict": its data moved
        under the service, decision 0071): the service stopped that part; forget it here,
        stop the rest and take it again if still ours at the next renewal (counted, logged)."""
        if self.owned.pop(shard, None) is not None:
            self._m.lost.labels(kind=self.kind, reason=reason).inc()
            logger.error("%s shard %d: stopped by its service (%s); no longer served by %s", self.kind, shard,
                         reason, self.node_id)
            self._refused.add(shard)  # the rest of it (presence, links) stops in the next tick, first
            self._changed.set()  # look at the registry again now
        elif shard in self._starting:  # issue 33: else its start would make it served, half stopped
            self._lost_starting.add(shard)

    async def stop(self) -> None:
        """Clean stop: stop serving, release every shard and leave (best effort: a lease
        that cannot be released ends by itself)."""
        shards = sorted(self.owned)
        for shard in shards:
            await self._on_release(shard, CLEAN_STOP)
        self.owned.clear()
        try:
            if shards:
                await self._call("release", self._registry.release(self.kind, self.node_id, self.incarnation, shards))
                self._m.released.labels(kind=self.kind, reason="stop").inc(len(shards))
            if self.joined:
                await self._call("leave", self._registry.leave(self.kind, self.node_id, self.incarnation))
        except (StorageError, EngineError, asyncio.TimeoutError) as exc:
            self._failed("leave", exc)


__all__ = ["JoinRefused", "ShardKeeper", "incarnation"]
