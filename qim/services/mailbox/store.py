"""Redis MailboxStore, phase one (DESIGN.md §5.4–5.5, §8; seed 001 §2.6).

Keys (tenant as 32 hex):
- `qim:mbx:<tenant>:<user>:d<day>` ZSET, one per day of created_at (UTC days since the
  epoch): score = 48-bit log offset, member = mailbox_seq (8 bytes) ‖ event group.
  EXPIREAT = end of that day + retention (QIM_MAILBOX_RETENTION_MS, default 7 days).
- `qim:mbxdays:<tenant>:<user>` HASH: day -> highest offset in that day, and `trim` =
  the highest offset ever removed (the persisted trim boundary); it expires
  retention + 1 day + MAILBOX_INDEX_GRACE_MS after the last write.
Retention is exact without a per-entry cost (docs/decisions/0013-mailbox-retention-ms.md):
a day bucket is removed once its whole day is older than the retention; entries of the
one bucket that straddles the cutoff are filtered by created_at on the read that
returns them anyway (`Retained.cutoff_ms`).
- `qim:dp:{s<shard>}:<dispatch_id>` DispatchProgress; `qim:dpidx:{s<shard>}` its index
  (score = highest observed offset); `qim:wm:{s<shard>}` the watermark (blob, layout, epoch).
Range reads merge the day buckets by offset and include offset 0 for a zero cursor
(seed lesson: the offset-0 exclusion bug).
"""

from __future__ import annotations

import heapq
import time
from typing import NamedTuple, Optional

from qim.consts import DAY_MS, MAILBOX_INDEX_GRACE_MS, MAILBOX_RETENTION_MS_DEFAULT, WM_LAYOUT_V1
from qim.errors import EngineError, MailboxDirty
from qim.infra.redis.client import LuaScripts, ScriptError

SCRIPTS = ("mailbox_begin", "mailbox_append", "mailbox_finish", "mailbox_fused", "mailbox_trim",
           "mailbox_trim_entries")


def mailbox_key(tenant: int, user_id: int, day: int) -> str:
    return f"qim:mbx:{tenant:032x}:{user_id}:d{day}"


def days_key(tenant: int, user_id: int) -> str:
    return f"qim:mbxdays:{tenant:032x}:{user_id}"


def dp_key(shard: int, dispatch_id: bytes) -> str:
    return f"qim:dp:{{s{shard}}}:{dispatch_id.hex()}"


def dpidx_key(shard: int) -> str:
    return f"qim:dpidx:{{s{shard}}}"


def wm_key(shard: int) -> str:
    return f"qim:wm:{{s{shard}}}"


def day_of(created_at_ms: int) -> int:
    return created_at_ms // DAY_MS


class Retained(NamedTuple):
    """What retention leaves of one user's mailbox at `now`: the retained days
    (ascending), the persisted trim boundary (-1: nothing removed yet), whether the user
    has any mailbox metadata, and the cutoff: entries created before it are not served."""

    days: list[int]
    trim: int
    known: bool
    cutoff_ms: int

    def straddles(self) -> bool:
        """True when the oldest retained bucket holds entries older than the cutoff."""
        return bool(self.days) and self.days[0] * DAY_MS < self.cutoff_ms


class RedisMailboxStore:
    """Materialization steps and range reads over one Redis instance.

    Errors: MailboxDirty for a digest conflict or a watermark moved by someone else
    (the shard must stop); EngineError when Redis fails (W has not moved; retry).
    """

    def __init__(self, redis, retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT) -> None:
        self._redis = redis
        self._scripts = LuaScripts(redis, SCRIPTS)
        self.retention_ms = retention_ms
        self.index_ttl_s = -(-(retention_ms + DAY_MS + MAILBOX_INDEX_GRACE_MS) // 1000)

    def expire_at(self, day: int) -> int:
        """Unix seconds at which a day bucket's key expires: its day's end + retention."""
        return -(-((day + 1) * DAY_MS + self.retention_ms) // 1000)

    async def _call(self, name: str, keys: list, args: list):
        try:
            return await self._scripts.call(name, keys, args)
        except ScriptError as exc:
            raise MailboxDirty(exc.reason) from None

    async def load_watermark(self, shard: int) -> tuple[Optional[bytes], int]:
        """(blob or None when never written, shard_epoch)."""
        try:
            blob, layout, epoch = await self._redis.hmget(wm_key(shard), "blob", "layout", "epoch")
        except Exception as exc:
            raise EngineError(f"watermark read failed: {exc.__class__.__name__}") from exc
        if blob is not None and int(layout or 0) != WM_LAYOUT_V1:
            raise MailboxDirty(f"shard {shard}: unknown watermark layout {layout!r}")
        return blob, int(epoch or 1)

    async def begin(self, shard: int, dispatch_id: bytes, digest: bytes, offset: int, seq8: bytes) -> tuple[str, bytes]:
        """begin_dispatch -> (FRESH | RESUME | DUPLICATE, mailbox_seq bytes to use)."""
        status, seq = await self._call("mailbox_begin", [dp_key(shard, dispatch_id), dpidx_key(shard)],
                                       [digest, offset, seq8])
        return status.decode(), seq

    async def append(self, tenant: int, offset: int, day: int, members: list[tuple[int, bytes]]) -> None:
        """Append each (user, member) into its day bucket (idempotent)."""
        keys, args = [], [offset, self.index_ttl_s]
        for user, member in members:
            keys += [mailbox_key(tenant, user, day), days_key(tenant, user)]
            args += [member, day, self.expire_at(day)]
        await self._call("mailbox_append", keys, args)

    async def finish(self, shard: int, epoch: int, dispatch_id: bytes, expected_wm: Optional[bytes],
                     new_wm: bytes) -> None:
        await self._call("mailbox_finish", [dp_key(shard, dispatch_id), wm_key(shard)],
                         [expected_wm or b"", new_wm, epoch])

    async def fused(self, shard: int, epoch: int, tenant: int, dispatch_id: bytes, digest: bytes, offset: int,
                    seq8: bytes, day: int, user: int, member: bytes, expected_wm: Optional[bytes],
                    new_wm: bytes) -> tuple[str, bytes]:
        """begin + append + finish for a single-recipient dispatch, one round trip."""
        keys = [dp_key(shard, dispatch_id), dpidx_key(shard), wm_key(shard), mailbox_key(tenant, user, day),
                days_key(tenant, user)]
        args = [digest, offset, seq8, expected_wm or b"", new_wm, epoch, member, day, self.expire_at(day),
                self.index_ttl_s]
        status, seq = await self._call("mailbox_fused", keys, args)
        return status.decode(), seq

    async def trim_and_days(self, tenant: int, user_id: int, now_ms: Optional[int] = None) -> Retained:
        """Remove the day buckets whose whole day is older than the retention (raising the
        persisted trim boundary) and return what is retained. EngineError on Redis failure."""
        cutoff = (time.time_ns() // 1_000_000 if now_ms is None else now_ms) - self.retention_ms
        try:
            index = await self._redis.hgetall(days_key(tenant, user_id))
        except Exception as exc:
            raise EngineError(f"mailbox read failed: {exc.__class__.__name__}") from exc
        if not index:
            return Retained([], -1, False, cutoff)
        trim = int(index.pop(b"trim", b"-1"))
        days = sorted(int(d) for d in index)
        expired = [d for d in days if (d + 1) * DAY_MS <= cutoff]
        if expired:
            keys = [days_key(tenant, user_id)] + [mailbox_key(tenant, user_id, d) for d in expired]
            trim = int(await self._call("mailbox_trim", keys, expired))
        return Retained(days[len(expired):], trim, True, cutoff)

    async def trim_entries(self, tenant: int, user_id: int, day: int, members: list[tuple[bytes, int]]) -> int:
        """Remove (member, offset) entries of `day`'s bucket that a read found past the
        retention and raise the trim boundary to their highest offset; returns it."""
        keys = [days_key(tenant, user_id), mailbox_key(tenant, user_id, day)]
        hi = max(offset for _, offset in members)
        return int(await self._call("mailbox_trim_entries", keys, [hi] + [m for m, _ in members]))

    async def read_range(self, tenant: int, user_id: int, days: list[int], after_offset: int, upto_offset: int,
                         limit: int) -> list[tuple[bytes, int]]:
        """Members with after_offset < score <= upto_offset (after_offset -1 includes 0)
        across the day buckets, merged by offset, at most `limit`, as (member, offset)."""
        if upto_offset <= after_offset or not days:
            return []
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for day in days:
                    pipe.zrangebyscore(mailbox_key(tenant, user_id, day), f"({after_offset}", upto_offset,
                                       start=0, num=limit, withscores=True)
                per_day = await pipe.execute()
        except Exception as exc:
            raise EngineError(f"mailbox read failed: {exc.__class__.__name__}") from exc
        merged = heapq.merge(*([(int(s), m) for m, s in rows] for rows in per_day))
        out = []
        for offset, member in merged:
            out.append((member, offset))
            if len(out) == limit:
                break
        return out

    async def gc_dispatch_progress(self, shard: int, upto_offset: int, batch: int = 512) -> int:
        """Delete DispatchProgress whose highest observed offset <= upto_offset; returns
        how many. The caller guarantees W passed it and the replay safety window elapsed."""
        idx = dpidx_key(shard)
        victims = await self._redis.zrangebyscore(idx, "-inf", upto_offset, start=0, num=batch)
        if victims:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(*victims)
                pipe.zrem(idx, *victims)
                await pipe.execute()
        return len(victims)
