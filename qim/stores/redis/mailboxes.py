"""MailboxStore on Redis (qim/stores/mailboxes.py), phase one (docs/design.md §5.4–5.5, §8).

Keys (keys.py): per (user, UTC day of created_at) a ZSET `qim:mbx:...:d<day>` scored by
the 48-bit log offset, member = mailbox_seq (8 bytes) ‖ event group, EXPIREAT = end of
that day + retention; per user the day index `qim:mbxdays:...` (a ZSET: member day, score
its highest offset; member `trim`, score the persisted trim boundary) expiring retention
+ 1 day + MAILBOX_INDEX_GRACE_MS after the write that added its newest day
(docs/decisions/0013, 0064; a HASH there is the old layout, moved in place by the first
script that meets it); per shard DispatchProgress `qim:dp:{s<N>}:...`,
its index and the watermark `qim:wm:{s<N>}` (blob, layout, epoch, and the writer
token of the materializer that wrote it last). Range reads merge the day buckets by offset
and include offset 0 for a zero cursor (seed lesson: the offset-0 exclusion bug).
"""

from __future__ import annotations

import heapq
from typing import Optional, Sequence

from qim.consts import DAY_MS, MAILBOX_INDEX_GRACE_MS, MAILBOX_RETENTION_MS_DEFAULT, WM_LAYOUT_V1
from qim.errors import MailboxDirty
from qim.stores.errors import StoreCorrupt
from qim.stores.mailboxes import RECOVERED, FusedRecord, Retained
from qim.stores.redis.keys import days_key, dp_key, dpidx_key, mailbox_key, wm_key
from qim.stores.redis.scripts import Scripts, boundary
from qim.stores.redis.topology import as_topology

UNFENCED = "qim:wm:unfenced"  # a key no owner fences: append without a shard (tools, unit tests)
SCRIPTS = ("mailbox_begin", "mailbox_append", "mailbox_finish", "mailbox_fused", "mailbox_trim",
           "mailbox_trim_entries", "mailbox_fence", "mailbox_index_read")


class RedisMailboxStore:
    """MailboxStore over one Redis instance (see the Protocol for shapes and errors)."""

    def __init__(self, client, retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT) -> None:
        self._t = as_topology(client)
        self._redis = client = self._t.home
        # the records of different shards materialized in one event-loop iteration share
        # one pipelined round trip (no per-message round trip; each script still atomic, each call its own reply)
        self._scripts = Scripts(client, SCRIPTS, coalesce=True)
        self.retention_ms = retention_ms
        self.index_ttl_s = -(-(retention_ms + DAY_MS + MAILBOX_INDEX_GRACE_MS) // 1000)

    def expire_at(self, day: int) -> int:
        """Unix seconds at which a day bucket's key expires: its day's end + retention."""
        return -(-((day + 1) * DAY_MS + self.retention_ms) // 1000)

    async def load_watermark(self, shard: int, fence: Optional[int] = None) -> tuple[Optional[bytes], int]:
        """MailboxStore.load_watermark: HMGET of the watermark HASH (mailbox_fence.lua with `fence`)."""
        if fence is not None:
            blob, layout, epoch = await self._scripts.call("mailbox_fence", [wm_key(shard)], [fence])
        else:
            with boundary("watermark read"):
                blob, layout, epoch = await self._redis.hmget(wm_key(shard), "blob", "layout", "epoch")
        if blob is not None and int(layout or 0) != WM_LAYOUT_V1:
            raise MailboxDirty(f"shard {shard}: unknown watermark layout {layout!r}")
        return blob, int(epoch or 1)

    async def begin(self, shard: int, dispatch_id: bytes, digest: bytes, offset: int, seq8: bytes,
                    fence: int = 0) -> tuple[str, bytes]:
        """MailboxStore.begin: mailbox_begin.lua."""
        status, seq = await self._scripts.call("mailbox_begin", [dp_key(shard, dispatch_id), dpidx_key(shard),
                                                                 wm_key(shard)], [digest, offset, seq8, fence])
        return status.decode(), seq

    async def append(self, tenant: int, offset: int, day: int, members: Sequence[tuple[int, bytes]],
                     shard: Optional[int] = None, fence: int = 0) -> None:
        """MailboxStore.append: mailbox_append.lua, every recipient in one call."""
        keys: list = [wm_key(shard) if shard is not None else UNFENCED]
        args: list = [offset, self.index_ttl_s, fence, day, self.expire_at(day)]
        for user, member in members:
            keys += [mailbox_key(tenant, user, day), days_key(tenant, user)]
            args.append(member)
        await self._scripts.call("mailbox_append", keys, args)

    async def finish(self, shard: int, epoch: int, dispatch_id: bytes, expected_wm: Optional[bytes],
                     new_wm: bytes, writer: bytes = b"", fence: int = 0) -> bool:
        """MailboxStore.finish: mailbox_finish.lua."""
        wrote = await self._scripts.call("mailbox_finish", [dp_key(shard, dispatch_id), wm_key(shard)],
                                         [expected_wm or b"", new_wm, epoch, writer, fence])
        return bool(wrote)

    async def fused(self, shard: int, epoch: int, records: Sequence[FusedRecord], expected_wm: Optional[bytes],
                    new_wm: bytes, writer: bytes = b"", fence: int = 0) -> list[tuple[str, bytes]]:
        """MailboxStore.fused: mailbox_fused.lua, every recipient of every record in one
        call; each (user, day) bucket's keys are sent once, its entries go in one ZADD."""
        keys: list = [wm_key(shard), dpidx_key(shard)]
        keys += [dp_key(shard, r.dispatch_id) for r in records]
        args: list = [fence, expected_wm or b"", new_wm, epoch, writer, self.index_ttl_s, len(records)]
        buckets: list = []
        pairs: dict[tuple[int, int, int], int] = {}
        for r in records:
            args += (r.digest, r.offset, r.seq8, r.day, self.expire_at(r.day), len(r.members))
            for user, member in r.members:
                p = pairs.get((r.tenant, user, r.day))
                if p is None:
                    p = pairs[(r.tenant, user, r.day)] = len(pairs) + 1
                    buckets += (mailbox_key(r.tenant, user, r.day), days_key(r.tenant, user))
                args += (p, member)
        reply = await self._scripts.call("mailbox_fused", keys + buckets, args)
        if len(reply) != 1 + 2 * len(records):
            raise StoreCorrupt(f"mailbox_fused: {len(reply)} reply items for {len(records)} records")
        if reply[0] == 1:
            return [(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]
        return [(RECOVERED, reply[i + 1]) for i in range(1, len(reply), 2)]

    async def trim_and_days(self, tenant: int, user_id: int, now_ms: Optional[int] = None) -> Retained:
        """MailboxStore.trim_and_days: Redis's clock and the day index in one call
        (mailbox_index_read.lua, which moves an index of the old layout first),
        mailbox_trim.lua when days expired. The cutoff is Redis's clock (unless `now_ms`
        is given), the clock that expires the day buckets (EXPIREAT): with this host's
        clock behind Redis's, a bucket Redis already dropped was read as retained, and a
        cursor below its entries passed them without CURSOR_EXPIRED (docs/decisions/0032)."""
        key = days_key(tenant, user_id)
        seconds, micros, flat = await self._scripts.call("mailbox_index_read", [key], [])
        rows = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
        seconds, micros = int(seconds), int(micros)
        now = seconds * 1000 + micros // 1000 if now_ms is None else now_ms
        cutoff = now - self.retention_ms
        if not rows:
            return Retained([], -1, False, cutoff)
        index = {member: int(score) for member, score in rows}
        trim = index.pop(b"trim", -1)
        days = sorted(int(d) for d in index)
        expired = [d for d in days if (d + 1) * DAY_MS <= cutoff]
        if expired:
            keys = [key] + [mailbox_key(tenant, user_id, d) for d in expired]
            trim = int(await self._scripts.call("mailbox_trim", keys, expired))
        return Retained(days[len(expired):], trim, True, cutoff)

    async def trim_entries(self, tenant: int, user_id: int, day: int, members: Sequence[tuple[bytes, int]]) -> int:
        """MailboxStore.trim_entries: mailbox_trim_entries.lua."""
        keys = [days_key(tenant, user_id), mailbox_key(tenant, user_id, day)]
        hi = max(offset for _, offset in members)
        return int(await self._scripts.call("mailbox_trim_entries", keys, [hi] + [m for m, _ in members]))

    async def read_range(self, tenant: int, user_id: int, days: Sequence[int], after_offset: int, upto_offset: int,
                         limit: int) -> list[tuple[bytes, int]]:
        """MailboxStore.read_range: one ZRANGEBYSCORE per day bucket, one pipeline."""
        if upto_offset <= after_offset or not days:
            return []
        with boundary("mailbox read"):
            async with self._redis.pipeline(transaction=False) as pipe:
                for day in days:
                    pipe.zrangebyscore(mailbox_key(tenant, user_id, day), f"({after_offset}", upto_offset,
                                       start=0, num=limit, withscores=True)
                per_day = await pipe.execute()
        merged = heapq.merge(*([(int(s), m) for m, s in rows] for rows in per_day))
        out = []
        for offset, member in merged:
            out.append((member, offset))
            if len(out) == limit:
                break
        return out

    async def gc_dispatch_progress(self, shard: int, upto_offset: int, batch: int = 512) -> int:
        """MailboxStore.gc_dispatch_progress: ZRANGEBYSCORE of the index, then DEL + ZREM in one transaction."""
        idx = dpidx_key(shard)
        with boundary("dispatch progress gc"):
            victims = await self._redis.zrangebyscore(idx, "-inf", upto_offset, start=0, num=batch)
            if victims:
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.delete(*victims)
                    pipe.zrem(idx, *victims)
                    await pipe.execute()
        return len(victims)
