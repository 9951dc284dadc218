"""ArchiveStateStore on Redis (qim/stores/archive.py; docs/decisions/0023): the archiver's position
(session_checkpoint.lua with one partition), the archive watermark
(archive_watermark.lua), retention classes, the trim queue, hot floors and the trim
itself (history_trim.lua), the trimmer's lease (archive_lease.lua). Keys in keys.py.

Placement (docs/decisions/0096, 0101): a conversation's keys (hot floor, history,
archived states, retention) on the core instance of its commit bucket; the global
ones (checkpoints, watermarks, trim queue, lease) on the home instance. Every Lua call
touches one instance; reads over several conversations go once per instance,
concurrently. The trim's queue update is a second call on the home (decision 0101).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from qim.consts import RETENTION_DEFAULT
from qim.stores.archive import HotRow, TrimResult
from qim.stores.errors import CheckpointConflict, StoreCorrupt
from qim.stores.redis.keys import (
    CommitKeys,
    archive_checkpoint_key,
    archive_partition_checkpoint_key,
    archive_partition_watermark_key,
    archive_watermark_key,
    lease_key,
    trim_queue_key,
)
from qim.stores.redis.messages import STATES
from qim.stores.redis.scripts import boundary, int_score_pairs
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology
from qim.stores.retention import check_class
from qim.stores.sessions import Checkpoint

SCRIPTS = ("session_checkpoint", "archive_watermark", "archive_lease", "history_trim")
STATE_NAMES: dict[int, str] = {int(v): k.decode() for k, v in STATES.items()}


def queue_member(tenant: int, conversation_id: bytes) -> str:
    """The trim queue member of a conversation."""
    return f"{tenant:032x}:{conversation_id.hex()}"


def parse_member(member: bytes) -> tuple[int, bytes]:
    """(tenant, conversation_id) of a trim queue member; StoreCorrupt when malformed."""
    try:
        t, c = member.decode().split(":")
        conv = bytes.fromhex(c)
        if len(conv) != 16:
            raise ValueError
        return int(t, 16), conv
    except (UnicodeDecodeError, ValueError):
        raise StoreCorrupt("malformed trim queue member") from None


class RedisArchiveState:
    """ArchiveStateStore over a RedisTopology or one redis-py client (see the Protocol;
    placement in the module doc)."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)
        self._redis = self._t.home  # the global keys
        self._scripts = self._t.scripts(self._redis, SCRIPTS)

    def _conv(self, tenant: int, conversation_id: bytes) -> tuple[CommitKeys, Any]:
        """A conversation's keys and the client of its commit bucket's instance."""
        keys = CommitKeys(tenant, conversation_id)
        return keys, self._t.core(keys.bucket)

    async def position_bind(self, binding: str, partition: int = 0, owner_epoch: int = 0) -> Checkpoint:
        """ArchiveStateStore.position_bind: session_checkpoint.lua init of the partition's
        checkpoint (partition 0 resumes the single-partition checkpoint of before)."""
        keys = [archive_partition_checkpoint_key(partition), archive_checkpoint_key()]
        res = await self._scripts.call("session_checkpoint", keys,
                                       ["init", binding, partition, owner_epoch, f"p{partition}"])
        status = res[0].decode()
        if status == "MISMATCH":
            return Checkpoint(status, res[1].decode(errors="replace"))
        return Checkpoint(status, binding, [int(res[1])])

    async def position(self, partition: int = 0) -> Optional[int]:
        """ArchiveStateStore.position: one HGET."""
        with boundary("archive position read"):
            raw = await self._redis.hget(archive_partition_checkpoint_key(partition), "p")
        return None if raw is None else int(raw)

    async def position_advance(self, binding: str, expected: int, new: int, partition: int = 0,
                               owner_epoch: int = 0) -> None:
        """ArchiveStateStore.position_advance: compare-and-set, fenced; a lost reply of our
        own write (the stored value is already `new`) passes."""
        key = archive_partition_checkpoint_key(partition)
        try:
            await self._scripts.call("session_checkpoint", [key],
                                     ["advance", binding, partition, owner_epoch, str(expected), str(new)])
        except CheckpointConflict as exc:
            if exc.reason != "QIM_CKPT_CONFLICT":
                raise
            with boundary("archive position read"):
                stored = await self._redis.hget(key, "p")
            if (stored or b"").decode() != str(new):
                raise

    async def watermark(self) -> int:
        """ArchiveStateStore.watermark: one GET."""
        with boundary("archive watermark read"):
            raw = await self._redis.get(archive_watermark_key())
        return int(raw or 0)

    async def advance_watermark(self, t0_ms: int, partition: int = 0, partitions: int = 1) -> int:
        """ArchiveStateStore.advance_watermark: archive_watermark.lua."""
        keys = [archive_watermark_key()] + [archive_partition_watermark_key(p) for p in range(partitions)]
        return int(await self._scripts.call("archive_watermark", keys, [partition, t0_ms]))

    async def retention_classes(self, tenant: int, conversation_ids: Sequence[bytes]) -> list[str]:
        """ArchiveStateStore.retention_classes: one pipeline of GETs."""
        if not conversation_ids:
            return []
        async def read(client, convs: list[bytes]) -> list:
            with boundary("retention read"):
                async with client.pipeline(transaction=False) as pipe:
                    for conv in convs:
                        pipe.get(CommitKeys(tenant, conv).retention())
                    return await pipe.execute()

        got = await spread(self._t, conversation_ids, lambda c: self._conv(tenant, c)[1], read)
        out = []
        for raw in got:
            name = raw.decode() if raw else RETENTION_DEFAULT
            try:
                out.append(check_class(name))
            except ValueError:
                raise StoreCorrupt("unknown retention class stored") from None
        return out

    async def set_retention(self, tenant: int, conversation_id: bytes, name: str) -> None:
        """ArchiveStateStore.set_retention: one SET (DEL for "default")."""
        keys, client = self._conv(tenant, conversation_id)
        with boundary("retention write"):
            if check_class(name) == RETENTION_DEFAULT:
                await client.delete(keys.retention())
            else:
                await client.set(keys.retention(), name)

    async def mark_archived(self, tenant: int, oldest: dict[bytes, int]) -> None:
        """ArchiveStateStore.mark_archived: one ZADD LT (kept at the earliest time)."""
        if not oldest:
            return
        with boundary("trim queue write"):
            await self._redis.zadd(trim_queue_key(), {queue_member(tenant, c): ms for c, ms in oldest.items()},
                                   lt=True)

    async def trim_candidates(self, upto_ms: int, limit: int) -> list[tuple[int, bytes]]:
        """ArchiveStateStore.trim_candidates: one ZRANGEBYSCORE."""
        with boundary("trim queue read"):
            got = await self._redis.zrangebyscore(trim_queue_key(), "-inf", upto_ms, start=0, num=limit)
        return [parse_member(m) for m in got]

    async def hot_rows(self, tenant: int, conversation_id: bytes, limit: int) -> tuple[int, list[HotRow]]:
        """ArchiveStateStore.hot_rows: floor and index in one MULTI, then the state keys."""
        keys, client = self._conv(tenant, conversation_id)
        with boundary("hot rows read"):
            async with client.pipeline(transaction=True) as pipe:
                pipe.get(keys.floor())
                pipe.execute_command("ZRANGE", keys.history(), "-inf", "+inf", "BYSCORE", "LIMIT", 0, limit,
                                     "WITHSCORES")
                raw_floor, raw_rows = await pipe.execute()
            floor = int(raw_floor or 0)
            rows = [(m, s) for m, s in int_score_pairs(raw_rows) if s > floor]
            async with client.pipeline(transaction=False) as pipe:
                for mid, _ in rows:
                    pipe.get(keys.state(mid))
                states = await pipe.execute() if rows else []
        return floor, [HotRow(seq, mid, STATES.get(st, 0) if st else 0) for (mid, seq), st in zip(rows, states)]

    async def trim(self, tenant: int, conversation_id: bytes, rows: Sequence[HotRow]) -> TrimResult:
        """ArchiveStateStore.trim: history_trim.lua on the bucket's instance (floor raised
        and prefix deleted atomically); the trim queue entry moved in the same call when
        the bucket is on the home, else by `_requeue` on the home (decision 0101)."""
        keys, client = self._conv(tenant, conversation_id)
        member = queue_member(tenant, conversation_id)
        args: list = [member, keys.record_prefix(), keys.state_prefix()]
        for r in rows:
            args += [r.message_id, r.conversation_seq, STATE_NAMES.get(r.state, "")]
        conv_keys = [keys.history(), keys.floor(), keys.archived_states()]
        if client is self._redis:  # one instance: one atomic call, as before
            floor, n, _ = await self._scripts.call("history_trim", conv_keys + [trim_queue_key()], args)
            return TrimResult(int(floor), int(n))
        scripts = self._t.scripts(client, SCRIPTS)
        floor, n, nxt = await scripts.call("history_trim", conv_keys, args)
        await self._requeue(scripts, conv_keys, member, int(nxt))
        return TrimResult(int(floor), int(n))

    async def _requeue(self, scripts, conv_keys: list[str], member: str, nxt: int) -> None:
        """The trim queue after a trim on another instance than the home (decision 0101):
        the created_at (ms) of the next hot message, or the entry removed when none is
        left (nxt < 0). The removal is followed by a look at the history again (the same
        script with no message: it trims nothing and names the next one): a message
        committed and marked archived between the trim and the removal is queued again,
        so no archived message is left out of the queue."""
        with boundary("trim queue write"):
            if nxt >= 0:
                await self._redis.zadd(trim_queue_key(), {member: nxt})
                return
            await self._redis.zrem(trim_queue_key(), member)
        _, _, again = await scripts.call("history_trim", conv_keys, [member, "", ""])
        if int(again) >= 0:
            with boundary("trim queue write"):
                await self._redis.zadd(trim_queue_key(), {member: int(again)}, lt=True)

    async def archived_states(self, tenant: int, conversation_id: bytes) -> list[tuple[int, bytes, int]]:
        """ArchiveStateStore.archived_states: one ZRANGE WITHSCORES."""
        keys, client = self._conv(tenant, conversation_id)
        with boundary("archived states read"):
            raw = await client.execute_command("ZRANGE", keys.archived_states(), 0, -1, "WITHSCORES")
        out = []
        for member, seq in int_score_pairs(raw):
            h, _, st = member.decode().partition(":")
            out.append((seq, bytes.fromhex(h), STATES.get(st.encode(), 0)))
        return out

    async def floors(self, tenant: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """ArchiveStateStore.floors: one MGET."""
        if not conversation_ids:
            return []
        async def read(client, convs: list[bytes]) -> list:
            with boundary("floor read"):
                return await client.mget([CommitKeys(tenant, c).floor() for c in convs])

        got = await spread(self._t, conversation_ids, lambda c: self._conv(tenant, c)[1], read)
        return [int(v or 0) for v in got]

    async def lease(self, name: str, token: str, ttl_ms: int) -> bool:
        """ArchiveStateStore.lease: archive_lease.lua."""
        return bool(int(await self._scripts.call("archive_lease", [lease_key(name)], [token, ttl_ms])))
