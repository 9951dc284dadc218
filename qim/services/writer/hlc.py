"""HLC message ids from clock windows leased in Redis (docs/design.md §3, §5.2).

A writer first leases a writer_id (a token with a TTL renewed every 20 s), then a
60 s window of milliseconds strictly above the cluster-wide high-water, both through the
ClockLeaseStore (qim/stores/leases.py). Ids are issued
only inside the window; the window is renewed 20 s before it runs out. A writer that
cannot prove its window issues nothing (`ready` is False and `next_id` raises
UNAVAILABLE), so ids never repeat across crash, restart or a clock stepped back.

Cluster-wide monotonicity (docs/decisions/0017): a writer never issues an id above the
issue ceiling it last published to the cluster high-water (max(now + 5 s, last + 1 ms),
published every 0.5 s with the writer_id lease renewal, sooner when ids approach it:
a clock waiting ahead of wall time claims no more than it uses), and a new
window of any writer starts above every ceiling ever published. So a writer restarted
with its clock behind, under any writer_id, continues above every id issued before (its
physical part waits at the window start, at most the slack ahead of the previous
writers' time, and the logical counter moves). Between live writers the reserve script
keeps created_at non-decreasing per conversation and `observe` applies the HLC receive
rule to the id it reports.

`QIM_CLOCK_SKEW_MS` (test/dev knob, loopback listeners only) shifts `now_ms`, the
writer's only wall-clock read, to test a clock that is behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from qim._core import ids
from qim.consts import (
    HLC_CEILING_PERIOD_S,
    HLC_CEILING_SLACK_MS,
    HLC_RENEW_BEFORE_MS,
    HLC_WINDOW_MS,
    WRITER_ID_LEASE_MS,
)
from qim.errors import EngineError, ErrorCode, RequestError
from qim.stores.errors import LeaseLost, StorageError
from qim.stores.leases import ClockLeaseStore
from qim.wire.errors import NodeUnfit

logger = logging.getLogger(__name__)
LOGICAL_MAX = 0xFFFF
_skew_ms = 0


def set_clock_skew(skew_ms: int) -> None:
    """Shift `now_ms` by `skew_ms` (QIM_CLOCK_SKEW_MS; tests and development only)."""
    global _skew_ms
    _skew_ms = skew_ms


def now_ms() -> int:
    """The writer's wall clock in unix ms (plus the configured test skew)."""
    return time.time_ns() // 1_000_000 + _skew_ms


class CeilingPassed(NodeUnfit):
    """`next_id` would issue above the published ceiling (the process was paused longer
    than the slack): the caller publishes (`raise_ceiling`) and asks again; passed on
    as NodeUnfit only when that is not possible."""


class HlcClock:
    """Issues message ids `(unix_ms, logical, region_id, writer_id)` inside a leased window."""

    def __init__(self, leases: ClockLeaseStore, region_id: int, writer_id: int = 0) -> None:
        self._leases = leases
        self.region_id = region_id
        self.writer_id = writer_id
        self._fixed_id = writer_id != 0
        self._token = os.urandom(16).hex()
        self._start = 0
        self._end = 0
        self._last_ms = 0
        self._logical = 0
        self._ceiling = 0  # highest ms this writer may issue: published to the cluster key
        self._publish_soon = asyncio.Event()
        self._publishing = asyncio.Lock()  # one publication at a time for raise_ceiling's waiters
        self._windowing = asyncio.Lock()  # one window lease or extension at a time (_lease_window)

    @property
    def ready(self) -> bool:
        """Whether a leased window covers the clock (else no ids: readiness fails)."""
        return self._end > 0 and max(now_ms(), self._last_ms) < self._end

    async def start(self) -> None:
        """Lease the writer_id (unless fixed) and the first window. EngineError on failure
        (StoreUnavailable is one)."""
        try:
            taken = await self._leases.take_writer_id(self.region_id, self._token, WRITER_ID_LEASE_MS,
                                                      self.writer_id if self._fixed_id else 0)
            if not taken:
                raise EngineError("no free writer_id to lease")
            self.writer_id = taken
            await self._lease_window()
        except LeaseLost as exc:
            raise EngineError(f"hlc window not leased: {exc.message}") from exc
        logger.info("writer_id %d leased, window %d..%d", self.writer_id, self._start, self._end)

    async def _lease_window(self) -> None:
        """Fresh lease at start, then extensions while we still hold the high-water. One
        at a time, each compare-and-set against the end the one before left: the
        background loop and a request's `catch_up` (after an observed newer id) both extend,
        and the second one's stale expected end read as QIM_HLC_LOST, so the writer gave
        its window up and refused every send (CI, 2026-12-06: test_hlc_restart)."""
        async with self._windowing:
            window = await self._leases.lease_window(self.region_id, self.writer_id, max(now_ms(), self._last_ms),
                                                     HLC_WINDOW_MS, self._end, HLC_CEILING_SLACK_MS)
            if window.start is not None:
                self._start = window.start
                self._ceiling = window.ceiling or 0
            self._end = window.end

    async def _publish_ceiling(self) -> bool:
        """Renew the writer_id lease and publish the issue ceiling max(now + slack,
        last + 1) to the cluster high-water (one script call). False when the lease is
        lost. A clock waiting ahead of wall time (after a start above another writer's
        ceiling, or an observed newer id) claims only 1 ms above its last id, so starts
        in quick succession do not stack the slack."""
        ceiling = max(now_ms() + HLC_CEILING_SLACK_MS, self._last_ms + 1)
        renewed = await self._leases.renew(self.region_id, self.writer_id, self._token, WRITER_ID_LEASE_MS, ceiling)
        if renewed:
            self._ceiling = max(self._ceiling, ceiling)
        return renewed

    async def maintain(self) -> None:
        """Background loop: renew the writer_id lease and publish the issue ceiling every
        HLC_CEILING_PERIOD_S (sooner when ids approach it), renew the window 20 s before
        its end."""
        while True:
            try:
                if not await self._publish_ceiling():
                    logger.error("writer_id %d lease lost; refusing to issue ids", self.writer_id)
                    self._end = 0
                    return
                if max(now_ms(), self._last_ms) >= self._end - HLC_RENEW_BEFORE_MS:
                    await self._lease_window()
            except LeaseLost as exc:
                logger.error("hlc window lost (%s); refusing to issue ids", exc.reason)
                self._end = 0
                return
            except EngineError as exc:
                logger.warning("hlc maintenance failed: %s", exc)
            self._publish_soon.clear()
            try:
                await asyncio.wait_for(self._publish_soon.wait(), HLC_CEILING_PERIOD_S)
                await asyncio.sleep(HLC_CEILING_PERIOD_S / 10)  # woken early: never a busy loop
            except asyncio.TimeoutError:
                pass

    async def catch_up(self) -> None:
        """After `observe` moved the clock ahead: extend the window and publish a higher
        ceiling now when the next id would need them (rare: another writer's clock is
        ahead). Raises RequestError(UNAVAILABLE) when Redis refuses, NodeUnfit when the
        writer_id lease is lost."""
        try:
            if self._last_ms + 1 >= self._end - HLC_RENEW_BEFORE_MS:
                await self._lease_window()
            if self._last_ms + 1 > self._ceiling:
                if not await self._publish_ceiling():
                    raise NodeUnfit("writer_id lease lost")
        except StorageError as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, "writer clock window not renewed") from exc

    async def raise_ceiling(self) -> None:
        """Publish the issue ceiling now, for a request that found the clock above it (the
        process was paused or starved longer than the slack: the background publication
        did not run; docs/decisions/0079-writer-failover.md). Concurrent callers share one
        publication. NodeUnfit when the writer_id lease is lost, RequestError(UNAVAILABLE)
        when Redis refuses."""
        async with self._publishing:
            if now_ms() <= self._ceiling and self._last_ms < self._ceiling:
                return  # another waiter's publication covered us
            try:
                renewed = await self._publish_ceiling()
            except StorageError as exc:
                raise RequestError(ErrorCode.UNAVAILABLE, "writer clock ceiling not published") from exc
            if not renewed:
                raise NodeUnfit("writer_id lease lost")

    def observe(self, message_id: bytes) -> None:
        """HLC receive rule: a newer id seen elsewhere (the reserve script's refusal)
        moves this clock to it, so the next id is above it."""
        ms, logical, _, _ = ids.split_message_id(message_id)
        if ms > self._last_ms:
            self._last_ms, self._logical = ms, logical
        elif ms == self._last_ms:
            self._logical = max(self._logical, logical)

    def next_id(self) -> tuple[bytes, int]:
        """(message_id, unix_ms). NodeUnfit (UNAVAILABLE, another writer may serve the
        request) when the window is not provable; CeilingPassed when the id would pass the
        published ceiling (`raise_ceiling`, then again)."""
        # HLC: the clock may run ahead of the wall clock inside the leased window (a new
        # window starts above every published ceiling; an observed newer id moves it)
        now = now_ms()
        ms = max(now, self._last_ms, self._start)
        logical = 0
        if ms == self._last_ms:
            logical = self._logical + 1
            if logical > LOGICAL_MAX:
                ms, logical = ms + 1, 0
        if ms < self._start or ms >= self._end:
            raise NodeUnfit("writer clock window not held")
        if ms > self._ceiling - HLC_CEILING_SLACK_MS // 2 and (now + HLC_CEILING_SLACK_MS > self._ceiling
                                                               or ms >= self._ceiling):
            self._publish_soon.set()  # a publication now would raise the ceiling: do it early
        if ms > self._ceiling:
            raise CeilingPassed("writer clock above its published ceiling")
        self._last_ms, self._logical = ms, logical
        return ids.compose_message_id(ms, logical, self.region_id, self.writer_id), ms
