"""The hot-window trimmer of the writer (docs/decisions/0023; seed 000 ADR-0018: "writer 每 5 s 批量
裁剪：只删 committed_at ≤ min(now − 热窗口, 水位 − Outbox 恢复窗口 − 60 s) 的记录，并抬高每会话
热层下界"; seed 004 §3; docs/decisions/0023-archive-tier.md).

Every QIM_HISTORY_TRIM_PERIOD_MS one writer (a Redis lease) takes the conversations the
archiver queued whose oldest untrimmed archived message is old enough, and per
conversation removes the oldest messages from Redis while all of these hold:
- created_at <= now - min(hot window, the conversation's retention), and
  created_at <= archive watermark - recovery window (QIM_OUTBOX_RETENTION_MS) - slack
  (QIM_HISTORY_TRIM_SLACK_MS, clock skew between hosts);
- the archive's history index holds the message whole, same id, same state (or the
  message is past its retention, so the archive may have dropped it already): a commit
  published late, a record written before the archive tier existed, a recall the
  archiver has not applied yet all stop the prefix there;
- a recall/delete of an earlier trimmed message announced at or below the new floor has
  reached the archive (otherwise the trim stops below its CONTROL message, and reads
  keep taking that state from Redis).
The floor is raised and the prefix deleted in one script (history_trim.lua), so a
reader never sees a gap. A stalled archiver only stops the trim: the hot tier grows,
sends go on. Errors are counted and retried on the next period, never fatal.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from itertools import takewhile
from typing import Optional, Sequence

from qim.config.tier import TierConfig
from qim.consts import (
    DAY_MS,
    EPHEMERAL_RETENTION_MS,
    HISTORY_TRIM_BATCH,
    HISTORY_TRIM_BUDGET_S,
    HISTORY_TRIM_CONVERSATIONS,
)
from qim.errors import EngineError
from qim.services.writer.hlc import now_ms
from qim.services.writer.metrics import WriterMetrics
from qim.stores.archive import ArchiveStateStore, ArchiveStore, HotRow, TrimResult
from qim.stores.errors import StorageError
from qim.stores.retention import expired, retention_ms
from qim.wire.control import created_at_of

logger = logging.getLogger(__name__)

LEASE = "trimmer"


def due_rows(rows: Sequence[HotRow], bound: int) -> list[HotRow]:
    """The leading `rows` created at or before `bound` (ms)."""
    return list(takewhile(lambda r: created_at_of(r.message_id) <= bound, rows))


def conversation_bound(tier: TierConfig, watermark_ms: int, retention_class: str, now: int) -> int:
    """Messages created at or before this may leave Redis (see the module docstring)."""
    keep = retention_ms(retention_class, tier.default_retention_days)
    hot = tier.hot_window_ms if keep is None else min(tier.hot_window_ms, keep)
    return min(now - hot, watermark_ms - tier.recovery_window_ms - tier.trim_slack_ms)


async def trim_prefix(state: ArchiveStateStore, archive: ArchiveStore, tenant: int, conversation_id: bytes,
                      floor: int, rows: Sequence[HotRow], retention_class: str, default_days: int,
                      now: int) -> TrimResult:
    """Check `rows` (the oldest hot messages, ascending, above `floor`) against the archive
    and trim the longest prefix it holds (module docstring). TrimResult(floor, 0) when
    nothing may go."""
    if not rows:
        return TrimResult(floor, 0)
    archived = await archive.archived(tenant, conversation_id, floor, rows[-1].conversation_seq)
    ok: list[HotRow] = []
    for r in rows:
        a = archived.get(r.conversation_seq)
        if a is not None and a.complete and a.message_id == r.message_id and a.state == r.state:
            ok.append(r)
        elif a is None and expired(created_at_of(r.message_id), retention_class, default_days, now):
            ok.append(r)
        else:
            break
    if ok:
        ok = await _pending_reached(state, archive, tenant, conversation_id, ok)
    if not ok:
        return TrimResult(floor, 0)
    return await state.trim(tenant, conversation_id, ok)


async def _pending_reached(state: ArchiveStateStore, archive: ArchiveStore, tenant: int, conversation_id: bytes,
                           ok: list[HotRow]) -> list[HotRow]:
    """`ok` cut below the first CONTROL message whose recall/delete of a trimmed message
    the archive does not show yet (the trim would drop the Redis state reads rely on)."""
    pending = [p for p in await state.archived_states(tenant, conversation_id) if p[0] <= ok[-1].conversation_seq]
    if not pending:
        return ok
    recs = await archive.records(tenant, [mid for _, mid, _ in pending])
    for (seq, _, st), rec in zip(pending, recs):
        if rec is not None and rec.state != st:
            return [r for r in ok if r.conversation_seq < seq]
    return ok


class HistoryTrimmer:
    """`run()` trims every period while this writer holds the trimmer lease."""

    def __init__(self, state: ArchiveStateStore, archive: ArchiveStore, tier: TierConfig,
                 metrics: Optional[WriterMetrics] = None) -> None:
        self._state = state
        self._archive = archive
        self._tier = tier
        self._m = metrics if metrics is not None else WriterMetrics()
        self._token = secrets.token_hex(8)
        self.last_error = ""

    async def step(self, now: Optional[int] = None) -> int:
        """One trim pass (bounded by HISTORY_TRIM_BUDGET_S); messages trimmed."""
        now = now_ms() if now is None else now
        watermark = await self._state.watermark()
        if not watermark:
            return 0
        # no conversation is due before the shortest hot window any class allows
        shortest = min(self._tier.hot_window_ms, EPHEMERAL_RETENTION_MS, self._tier.default_retention_days * DAY_MS)
        upto = min(watermark - self._tier.recovery_window_ms - self._tier.trim_slack_ms, now - shortest)
        deadline = time.monotonic() + HISTORY_TRIM_BUDGET_S
        total = 0
        candidates = await self._state.trim_candidates(upto, HISTORY_TRIM_CONVERSATIONS)
        for tenant, conv in candidates:
            if time.monotonic() > deadline:
                break
            cls = (await self._state.retention_classes(tenant, [conv]))[0]
            bound = conversation_bound(self._tier, watermark, cls, now)
            while time.monotonic() <= deadline:
                floor, rows = await self._state.hot_rows(tenant, conv, HISTORY_TRIM_BATCH)
                due = due_rows(rows, bound)
                result = await trim_prefix(self._state, self._archive, tenant, conv, floor, due, cls,
                                           self._tier.default_retention_days, now)
                total += result.trimmed
                if result.trimmed < len(due):
                    self._m.trim_blocked.inc()  # not in the archive (yet) as it is in Redis
                if result.trimmed < HISTORY_TRIM_BATCH:
                    break
        self._m.trimmed.inc(total)
        return total

    async def run(self) -> None:
        """Trim every period while holding the lease; store errors are counted and logged
        (the next period retries), never fatal."""
        period = self._tier.trim_period_ms / 1000
        while True:
            try:
                if await self._state.lease(LEASE, self._token, int(self._tier.trim_period_ms * 3)):
                    await self.step()
                self.last_error = ""
            except (StorageError, EngineError) as exc:
                self._m.trim_failures.inc()
                if str(exc) != self.last_error:
                    logger.warning("history trim failed: %s", exc)
                self.last_error = str(exc)
            await asyncio.sleep(period)
