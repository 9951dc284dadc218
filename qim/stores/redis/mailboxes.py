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

Several instances (docs/decisions/0096, 0097): a MailboxShard's DispatchProgress, index
and watermark are on `topology.shard(shard)`, a user's mailboxes and day index on
`topology.user(tenant, user)`, the instance of the user's MailboxShard. A shard's fenced
call (begin, append with a shard, finish, fused) runs on the shard's instance and may
name only users placed there: every recipient of a shard's dispatch record is one of
its users; one placed elsewhere refuses the call before anything is written
(MailboxDirty), never a call split across instances. Each instance coalesces its own
calls (decision 0026): one pipeline per instance per event-loop iteration.
"""

from __future__ import annotations

import heapq
from typing import Optional, Sequence

from qim.consts import DAY_MS, MAILBOX_INDEX_GRACE_MS, MAILBOX_RETENTION_MS_DEFAULT, WM_LAYOUT_V1
from qim.errors import MailboxDirty
from qim.stores.errors import StoreCorrupt
from qim.stores.mailboxes import RECOVERED, FusedRecord, Retained
from qim.stores.redis.keys import days_key, dp_key, dpidx_key, mailbox_key, wm_key
from qim.stores.redis.scripts import boundary
from qim.stores.redis.spread import gather_all
from qim.stores.redis.topology import as_topology

UNFENCED = "qim:wm:unfenced"  # a key no owner fences: append without a shard (tools, unit tests)
SCRIPTS = ("mailbox_begin", "mailbox_append", "mailbox_finish", "mailbox_fused", "mailbox_trim",
           "mailbox_trim_entries", "mailbox_fence", "mailbox_index_read")


def mailbox_clients(topology) -> list:
    """The clients a store of the mailbox role calls: the home alone on one instance (a
    client of any kind, a test double too), else every distinct mailbox instance's."""
    return [topology.home] if topology.single else topology.mailbox_clients


class RedisMailboxStore:
    """MailboxStore over the mailbox instances of a RedisTopology, or one redis-py client
    (see the Protocol for shapes and errors; placement: the module doc)."""

    def __init__(self, client, retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT) -> None:
        self._t = t = as_topology(client)
        # the records of different shards materialized in one event-loop iteration share
        # one pipelined round trip per instance (no per-message round trip; each script
        # still atomic, each call its own reply)
        self._scripts_of = {id(c): t.scripts(c, SCRIPTS, coalesce=True) for c in mailbox_clients(t)}
        self._single = t.single
        self._redis = t.home if t.single else None  # one instance: every call on it, as before
        self.retention_ms = retention_ms
        self.index_ttl_s = -(-(retention_ms + DAY_MS + MAILBOX_INDEX_GRACE_MS) // 1000)

    def expire_at(self, day: int) -> int:
        """Unix seconds at which a day bucket's key expires: its day's end + retention."""
        return -(-((day + 1) * DAY_MS + self.retention_ms) // 1000)

    def _at_shard(self, shard: int):
        """(client, Scripts) of the instance holding MailboxShard `shard`."""
        c = self._redis if self._single else self._t.shard(shard)
        return c, self._scripts_of[id(c)]

    def _at_user(self, tenant: int, user_id: int):
        """(client, Scripts) of the instance holding a user's mailboxes and day index."""
        c = self._redis if self._single else self._t.user(tenant, user_id)
        return c, self._scripts_of[id(c)]

    def _placed(self, client, shard: int, tenant: int, user_id: int, offset: int) -> None:
        """MailboxDirty unless the user's mailbox is on `client`, the instance of `shard`:
        a shard's fenced call never crosses instances (decision 0097)."""
        if self._t.user(tenant, user_id) is not client:
            raise MailboxDirty(f"shard {shard}: a recipient of the dispatch at offset {offset} is placed on another "
                               f"Redis instance than the shard (MailboxShard {self._t.layout.user_shard(tenant, user_id)}"
                               f" of {self._t.layout.shard_count}); refused, nothing written (decision 0097)")

    async def load_watermark(self, shard: int, fence: Optional[int] = None) -> tuple[Optional[bytes], int]:
        """MailboxStore.load_watermark: HMGET of the watermark HASH (mailbox_fence.lua with `fence`)."""
        client, scripts = self._at_shard(shard)
        if fence is not None:
            blob, layout, epoch = await scripts.call("mailbox_fence", [wm_key(shard)], [fence])
        else:
            with boundary("watermark read"):
                blob, layout, epoch = await client.hmget(wm_key(shard), "blob", "layout", "epoch")
        if blob is not None and int(layout or 0) != WM_LAYOUT_V1:
            raise MailboxDirty(f"shard {shard}: unknown watermark layout {layout!r}")
        return blob, int(epoch or 1)

    async def begin(self, shard: int, dispatch_id: bytes, digest: bytes, offset: int, seq8: bytes,
                    fence: int = 0) -> tuple[str, bytes]:
        """MailboxStore.begin: mailbox_begin.lua on the shard's instance."""
        _, scripts = self._at_shard(shard)
        status, seq = await scripts.call("mailbox_begin", [dp_key(shard, dispatch_id), dpidx_key(shard),
                                                           wm_key(shard)], [digest, offset, seq8, fence])
        return status.decode(), seq

    async def append(self, tenant: int, offset: int, day: int, members: Sequence[tuple[int, bytes]],
                     shard: Optional[int] = None, fence: int = 0) -> None:
        """MailboxStore.append: mailbox_append.lua, every recipient in one call. With a
        shard: on its instance, fenced, every recipient placed there (MailboxDirty
        otherwise, nothing written). Without (UNFENCED: tools, unit tests): one call per
        instance holding some of the recipients, the instances concurrently."""
        if shard is not None:
            client, scripts = self._at_shard(shard)
            if not self._single:
                for user, _ in members:
                    self._placed(client, shard, tenant, user, offset)
            await self._append_on(scripts, wm_key(shard), tenant, offset, day, members, fence)
            return
        groups = [(None, list(members))] if self._single else \
            self._t.group_by(members, lambda m: self._t.user(tenant, m[0]))
        await gather_all([self._append_on(self._scripts_of[id(c or self._redis)], UNFENCED, tenant, offset, day,
                                          part, fence) for c, part in groups])

    async def _append_on(self, scripts, fence_key: str, tenant: int, offset: int, day: int,
                         members: Sequence[tuple[int, bytes]], fence: int) -> None:
        keys: list = [fence_key]
        args: list = [offset, self.index_ttl_s, fence, day, self.expire_at(day)]
        for user, member in members:
            keys += [mailbox_key(tenant, user, day), days_key(tenant, user)]
            args.append(member)
        await scripts.call("mailbox_append", keys, args)

    async def finish(self, shard: int, epoch: int, dispatch_id: bytes, expected_wm: Optional[bytes],
                     new_wm: bytes, writer: bytes = b"", fence: int = 0) -> bool:
        """MailboxStore.finish: mailbox_finish.lua on the shard's instance."""
        _, scripts = self._at_shard(shard)
        wrote = await scripts.call("mailbox_finish", [dp_key(shard, dispatch_id), wm_key(shard)],
                                   [expected_wm or b"", new_wm, epoch, writer, fence])
        return bool(wrote)

    async def fused(self, shard: int, epoch: int, records: Sequence[FusedRecord], expected_wm: Optional[bytes],
                    new_wm: bytes, writer: bytes = b"", fence: int = 0, unfinished: int = 0, *,
                    prevs: Optional[dict] = None) -> list[tuple[str, bytes]]:
        """MailboxStore.fused: mailbox_fused.lua on the shard's instance, every recipient
        of every record in one call; each (user, day) bucket's keys are sent once, its
        entries go in one ZADD. A recipient placed on another instance refuses the call
        before anything is written (MailboxDirty; decision 0097: a record is DONE only
        after all its entries, which one call on one instance guarantees). The first
        `unfinished` records are begun and appended, never marked DONE (the records a
        direct one overtakes, with some of their members: decisions/0142). `prevs`:
        filled for the members of `inline` records, read by the same script after its
        writes (no extra round trip; decisions/0156)."""
        client, scripts = self._at_shard(shard)
        keys: list = [wm_key(shard), dpidx_key(shard)]
        keys += [dp_key(shard, r.dispatch_id) for r in records]
        args: list = [fence, expected_wm or b"", new_wm, epoch, writer, self.index_ttl_s, len(records), unfinished]
        buckets: list = []
        pairs: dict[tuple[int, int, int], int] = {}
        for r in records:
            args += (r.digest, r.offset, r.seq8, r.day, self.expire_at(r.day), len(r.members))
            for user, member in r.members:
                p = pairs.get((r.tenant, user, r.day))
                if p is None:
                    if not self._single:  # once per (user, day): a hash of the user's id
                        self._placed(client, shard, r.tenant, user, r.offset)
                    p = pairs[(r.tenant, user, r.day)] = len(pairs) + 1
                    buckets += (mailbox_key(r.tenant, user, r.day), days_key(r.tenant, user))
                args += (p, member)
        asked = [(i, user, pairs[(r.tenant, user, r.day)], r.offset) for i, r in enumerate(records)
                 if r.inline and prevs is not None for user, _ in r.members]
        if asked:
            args.append(len(asked))
            for _, _, p, offset in asked:
                args += (p, offset)
        reply = await scripts.call("mailbox_fused", keys + buckets, args)
        if len(reply) != 1 + 2 * len(records) + len(asked):
            raise StoreCorrupt(f"mailbox_fused: {len(reply)} reply items for {len(records)} records")
        if prevs is not None:
            for (i, user, _, _), prev in zip(asked, reply[1 + 2 * len(records):]):
                if prev >= -1:  # -2: unknown (another day holds a later offset)
                    prevs[(i, user)] = prev
        reply = reply[:1 + 2 * len(records)]
        if reply[0] == 1:
            return [(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]
        return [(RECOVERED, reply[i + 1]) for i in range(1, len(reply), 2)]

    async def trim_and_days(self, tenant: int, user_id: int, now_ms: Optional[int] = None) -> Retained:
        """MailboxStore.trim_and_days: Redis's clock and the day index in one call
        (mailbox_index_read.lua, which moves an index of the old layout first),
        mailbox_trim.lua when days expired, both on the user's instance. The cutoff is
        Redis's clock (unless `now_ms` is given), the clock that expires the day buckets
        (EXPIREAT): with this host's clock behind Redis's, a bucket Redis already dropped
        was read as retained, and a cursor below its entries passed them without
        CURSOR_EXPIRED (docs/decisions/0032)."""
        _, scripts = self._at_user(tenant, user_id)
        key = days_key(tenant, user_id)
        seconds, micros, flat = await scripts.call("mailbox_index_read", [key], [])
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
            trim = int(await scripts.call("mailbox_trim", keys, expired))
        return Retained(days[len(expired):], trim, True, cutoff)

    async def trim_entries(self, tenant: int, user_id: int, day: int, members: Sequence[tuple[bytes, int]]) -> int:
        """MailboxStore.trim_entries: mailbox_trim_entries.lua on the user's instance."""
        _, scripts = self._at_user(tenant, user_id)
        keys = [days_key(tenant, user_id), mailbox_key(tenant, user_id, day)]
        hi = max(offset for _, offset in members)
        return int(await scripts.call("mailbox_trim_entries", keys, [hi] + [m for m, _ in members]))

    async def read_range(self, tenant: int, user_id: int, days: Sequence[int], after_offset: int, upto_offset: int,
                         limit: int) -> list[tuple[bytes, int]]:
        """MailboxStore.read_range: one ZRANGEBYSCORE per day bucket, one pipeline to the
        user's instance."""
        if upto_offset <= after_offset or not days:
            return []
        client, _ = self._at_user(tenant, user_id)
        with boundary("mailbox read"):
            async with client.pipeline(transaction=False) as pipe:
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
        """MailboxStore.gc_dispatch_progress: ZRANGEBYSCORE of the index, then DEL + ZREM
        in one transaction, on the shard's instance."""
        client, _ = self._at_shard(shard)
        idx = dpidx_key(shard)
        with boundary("dispatch progress gc"):
            victims = await client.zrangebyscore(idx, "-inf", upto_offset, start=0, num=batch)
            if victims:
                async with client.pipeline(transaction=True) as pipe:
                    pipe.delete(*victims)
                    pipe.zrem(idx, *victims)
                    await pipe.execute()
        return len(victims)
