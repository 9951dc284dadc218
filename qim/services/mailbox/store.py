"""Redis MailboxStore, phase one (DESIGN.md §5.4–5.5, §8; seed 001 §2.6).

Keys (tenant as 32 hex):
- `qim:mbx:<tenant>:<user>:d<day>` ZSET, one per day of created_at (UTC days since the
  epoch): score = 48-bit log offset, member = mailbox_seq (8 bytes) ‖ event group.
  EXPIREAT = end of that day + retention (7 days).
- `qim:mbxdays:<tenant>:<user>` HASH: day -> highest offset in that day, and `trim` =
  the highest offset ever removed (the persisted trim boundary).
- `qim:dp:{s<shard>}:<dispatch_id>` DispatchProgress; `qim:dpidx:{s<shard>}` its index
  (score = highest observed offset); `qim:wm:{s<shard>}` the watermark (blob, layout, epoch).
Range reads merge the day buckets by offset and include offset 0 for a zero cursor
(seed lesson: the offset-0 exclusion bug).
"""

from __future__ import annotations

import heapq
import time
from typing import Optional

from qim.consts import MAILBOX_RETENTION_DAYS, WM_LAYOUT_V1
from qim.errors import EngineError, MailboxDirty
from qim.infra.redis.client import LuaScripts, ScriptError

DAY_MS = 86_400_000
INDEX_TTL_S = 30 * 86400  # the day index (and its trim boundary) outlives the buckets
SCRIPTS = ("mailbox_begin", "mailbox_append", "mailbox_finish", "mailbox_fused", "mailbox_trim")


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


class RedisMailboxStore:
    """Materialization steps and range reads over one Redis instance.

    Errors: MailboxDirty for a digest conflict or a watermark moved by someone else
    (the shard must stop); EngineError when Redis fails (W has not moved; retry).
    """

    def __init__(self, redis, retention_days: int = MAILBOX_RETENTION_DAYS) -> None:
        self._redis = redis
        self._scripts = LuaScripts(redis, SCRIPTS)
        self.retention_days = retention_days

    def expire_at(self, day: int) -> int:
        return (day + 1 + self.retention_days) * 86400

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
        keys, args = [], [offset, INDEX_TTL_S]
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
        args = [digest, offset, seq8, expected_wm or b"", new_wm, epoch, member, day, self.expire_at(day), INDEX_TTL_S]
        status, seq = await self._call("mailbox_fused", keys, args)
        return status.decode(), seq

    async def trim_and_days(self, tenant: int, user_id: int, now_ms: Optional[int] = None) -> tuple[list[int], int, bool]:
        """Trim expired day buckets; return (retained days ascending, trim boundary or -1,
        whether the user has any mailbox metadata at all)."""
        try:
            index = await self._redis.hgetall(days_key(tenant, user_id))
        except Exception as exc:
            raise EngineError(f"mailbox read failed: {exc.__class__.__name__}") from exc
        if not index:
            return [], -1, False
        today = (time.time_ns() // 1_000_000 if now_ms is None else now_ms) // DAY_MS
        trim = int(index.pop(b"trim", b"-1"))
        days = sorted(int(d) for d in index)
        expired = [d for d in days if d < today - self.retention_days]
        if expired:
            keys = [days_key(tenant, user_id)] + [mailbox_key(tenant, user_id, d) for d in expired]
            trim = int(await self._call("mailbox_trim", keys, expired))
        return [d for d in days if d not in expired], trim, True

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
