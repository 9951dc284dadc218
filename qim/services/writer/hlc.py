"""HLC message ids from clock windows leased in Redis (DESIGN.md §3, §5.2).

A writer first leases a writer_id (SET NX with a TTL renewed every 20 s), then a
60 s window of milliseconds strictly above the stored high-water of (region,
writer_id). Ids are issued only inside the window; the window is renewed 20 s before
it runs out. A writer that cannot prove its window issues nothing (`ready` is False
and `next_id` raises UNAVAILABLE), so ids never repeat across crash, restart or a
clock stepped back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from qim._core import ids
from qim.consts import HLC_RENEW_BEFORE_MS, HLC_WINDOW_MS, WRITER_ID_LEASE_MS
from qim.errors import EngineError, ErrorCode, RequestError
from qim.infra.redis.client import LuaScripts, ScriptError
from qim.services.writer.keys import hlc_key, writer_lease_key

logger = logging.getLogger(__name__)
LOGICAL_MAX = 0xFFFF


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class HlcClock:
    """Issues message ids `(unix_ms, logical, region_id, writer_id)` inside a leased window."""

    def __init__(self, redis, scripts: LuaScripts, region_id: int, writer_id: int = 0) -> None:
        self._redis = redis
        self._scripts = scripts
        self.region_id = region_id
        self.writer_id = writer_id
        self._fixed_id = writer_id != 0
        self._token = os.urandom(16).hex()
        self._start = 0
        self._end = 0
        self._last_ms = 0
        self._logical = 0
        self._renewing = False

    @property
    def ready(self) -> bool:
        return self._end > 0 and max(now_ms(), self._last_ms) < self._end

    async def start(self) -> None:
        """Lease the writer_id (unless fixed) and the first window. EngineError on failure."""
        if not self._fixed_id:
            for candidate in range(1, 65536):
                ok = await self._redis.set(writer_lease_key(self.region_id, candidate), self._token,
                                           nx=True, px=WRITER_ID_LEASE_MS)
                if ok:
                    self.writer_id = candidate
                    break
            else:
                raise EngineError("no free writer_id to lease")
        else:
            await self._redis.set(writer_lease_key(self.region_id, self.writer_id), self._token, px=WRITER_ID_LEASE_MS)
        await self._lease_window()
        logger.info("writer_id %d leased, window %d..%d", self.writer_id, self._start, self._end)

    async def _lease_window(self) -> None:
        """Fresh lease at start, then extensions while we still hold the high-water."""
        expected = str(self._end) if self._end else ""
        start, end = await self._scripts.call("hlc_lease", [hlc_key(self.region_id, self.writer_id)],
                                              [now_ms(), HLC_WINDOW_MS, expected])
        if start:
            self._start = int(start)
        self._end = int(end)

    async def maintain(self) -> None:
        """Background loop: renew the writer_id lease and the window 20 s before its end."""
        while True:
            try:
                renewed = await self._scripts.call("lease_renew", [writer_lease_key(self.region_id, self.writer_id)],
                                                   [self._token, WRITER_ID_LEASE_MS])
                if not int(renewed):
                    logger.error("writer_id %d lease lost; refusing to issue ids", self.writer_id)
                    self._end = 0
                    return
                if now_ms() >= self._end - HLC_RENEW_BEFORE_MS:
                    await self._lease_window()
            except ScriptError as exc:
                logger.error("hlc window lost (%s); refusing to issue ids", exc.reason)
                self._end = 0
                return
            except EngineError as exc:
                logger.warning("hlc maintenance failed: %s", exc)
            await asyncio.sleep(1.0)

    def next_id(self) -> tuple[bytes, int]:
        """(message_id, unix_ms). RequestError(UNAVAILABLE) when the window is not provable."""
        # HLC: the clock may run ahead of the wall clock inside the leased window (after
        # a restart the window starts strictly above the previous high-water).
        ms = max(now_ms(), self._last_ms, self._start)
        if ms == self._last_ms:
            self._logical += 1
            if self._logical > LOGICAL_MAX:
                ms += 1
                self._logical = 0
        else:
            self._logical = 0
        if ms < self._start or ms >= self._end:
            raise RequestError(ErrorCode.UNAVAILABLE, "writer clock window not held")
        self._last_ms = ms
        return ids.compose_message_id(ms, self._logical, self.region_id, self.writer_id), ms
