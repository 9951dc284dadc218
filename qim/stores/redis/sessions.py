"""SessionStore and ReadPositionStore on Redis (qim/stores/sessions.py, reads.py): the
conversation set ZSET, the peers HASH, the read HASH and the checkpoint HASH (keys.py);
session_register.lua (the one registration script of both projection paths),
session_mark_read.lua, session_checkpoint.lua and session_mark_checked.lua."""

from __future__ import annotations

from typing import Optional, Sequence

from qim.consts import SESSION_PROJECT_MAX_REGS
from qim.stores.errors import CheckpointConflict, StoreCorrupt
from qim.stores.redis.keys import (
    convs_checked_key,
    convs_key,
    name_key,
    peers_key,
    read_key,
    session_shard_checkpoint_key,
    ucs_pending_key,
)
from qim.stores.redis.scripts import Scripts, boundary, int_score_pairs
from qim.stores.redis.topology import as_topology
from qim.stores.sessions import Checkpoint, FirstSeen, Registration

# the single session node's checkpoint before shard leases (all partitions in one HASH):
# a shard's first checkpoint resumes from it (docs/decisions/0040-scale-leases-and-fencing.md)
LEGACY_CHECKPOINT = "qim:session:ckpt:0of1"
SESSION_SCRIPTS = ("session_register", "session_checkpoint", "session_project", "session_mark_checked")
READ_SCRIPTS = ("session_mark_read",)


class RedisSessionStore:
    """SessionStore over one Redis client (see the Protocol for shapes and errors)."""

    def __init__(self, client, first_registrations: bool = False) -> None:
        self._t = as_topology(client)
        self._redis = client = self._t.home
        self._scripts = Scripts(client, SESSION_SCRIPTS)
        # with the archive tier (docs/decisions/0023): first registrations are queued for CQL
        self.first_registrations = first_registrations

    async def register(self, regs: Sequence[Registration]) -> int:
        """SessionStore.register: session_register.lua once per SESSION_PROJECT_MAX_REGS
        registrations, every call in one pipelined round trip (the seed's session once
        awaited one write per projection: throughput ≈ 1/RTT, 75 % dropped at 15k msg/s;
        one script call per registration cost Redis and this process about 10 µs each:
        docs/decisions/0062-registrations-in-one-call.md)."""
        if not regs:
            return 0
        flag = "1" if self.first_registrations else "0"
        calls = []
        for i in range(0, len(regs), SESSION_PROJECT_MAX_REGS):
            keys: list = [ucs_pending_key()]
            args: list = [flag]
            for r in regs[i:i + SESSION_PROJECT_MAX_REGS]:
                keys += self._reg_keys(r)
                args += self._reg_args(r)
            calls.append((keys, args))
        return sum(int(x) for x in await self._scripts.call_many("session_register", calls))

    async def project(self, binding: str, moves: dict[int, tuple[int, int, int]],
                      regs: Sequence[Registration], tenures: Optional[dict[int, str]] = None) -> int:
        """SessionStore.project: session_project.lua, one round trip for a batch of up to
        SESSION_PROJECT_MAX_REGS registrations (the leading ones of a larger batch go
        first through `register`, one more pipelined round trip): the checkpoints move
        only after every registration ran. NotOwner / CheckpointConflict as
        checkpoint_advance (a stale tenure is NotOwner too); a retry after a lost reply
        finds its own offsets and passes (returns 0)."""
        head, tail = regs[:-SESSION_PROJECT_MAX_REGS], regs[-SESSION_PROJECT_MAX_REGS:]
        added = await self.register(head) if head else 0
        shards = sorted(moves)
        keys: list = [ucs_pending_key()] + [session_shard_checkpoint_key(s) for s in shards]
        args: list = [binding, len(shards), "1" if self.first_registrations else "0"]
        for shard in shards:
            epoch, expected, new = moves[shard]
            args += [shard, epoch, (tenures or {}).get(shard, ""), str(expected), str(new)]
        for r in tail:
            keys += self._reg_keys(r)
            args += self._reg_args(r)
        res = int(await self._scripts.call("session_project", keys, args))
        return added + max(res, 0)

    @staticmethod
    def _reg_keys(r: Registration) -> tuple:
        return convs_key(r.tenant, r.user), read_key(r.tenant, r.user), peers_key(r.tenant, r.user)

    def _reg_args(self, r: Registration) -> tuple:
        member = _pending_member(r) if self.first_registrations else ""
        return r.conversation_id.hex(), r.created_at_ms, r.own_seq, r.peer, member

    async def pending_first(self, limit: int) -> list[FirstSeen]:
        """SessionStore.pending_first: one ZRANGE WITHSCORES of the queue."""
        with boundary("first registration queue read"):
            raw = await self._redis.execute_command("ZRANGE", ucs_pending_key(), 0, limit - 1, "WITHSCORES")
        out = []
        for member, seen in int_score_pairs(raw):
            try:
                t, u, c, p = member.decode().split(":")
                conv = bytes.fromhex(c)
                out.append(FirstSeen(int(t, 16), int(u), conv, conv[0], int(p), seen))
            except (UnicodeDecodeError, ValueError, IndexError):
                raise StoreCorrupt("malformed first registration queue member") from None
        return out

    async def done_first(self, rows: Sequence[FirstSeen]) -> None:
        """SessionStore.done_first: one ZREM of the rows' members."""
        if rows:
            with boundary("first registration queue write"):
                await self._redis.zrem(ucs_pending_key(), *[_pending_member(r) for r in rows])

    async def conversations(self, tenant: int, user: int) -> list[tuple[int, bytes]]:
        """SessionStore.conversations: one ZRANGE WITHSCORES (raw reply)."""
        with boundary("conversation set read"):
            # raw reply: redis-py's score-pair callback costs ~5 µs per member
            raw = await self._redis.execute_command("ZRANGE", convs_key(tenant, user), 0, -1, "WITHSCORES")
        return int_score_pairs(raw, swap=True)

    async def checked_conversations(self, tenant: int, user: int) -> tuple[list[tuple[int, bytes]], bool]:
        """SessionStore.checked_conversations: ZRANGE WITHSCORES and EXISTS, one pipelined round trip."""
        with boundary("conversation set read"):
            pipe = self._redis.pipeline(transaction=False)
            pipe.execute_command("ZRANGE", convs_key(tenant, user), 0, -1, "WITHSCORES")
            pipe.exists(convs_checked_key(tenant, user))
            raw, checked = await pipe.execute()
        return int_score_pairs(raw, swap=True), bool(checked)

    async def mark_checked(self, tenant: int, user: int, at_least: int) -> bool:
        """SessionStore.mark_checked: session_mark_checked.lua (ZCARD, then SET)."""
        return bool(await self._scripts.call("session_mark_checked",
                                             [convs_key(tenant, user), convs_checked_key(tenant, user)], [at_least]))

    async def scores(self, tenant: int, user: int, members: Sequence[bytes]) -> list[Optional[int]]:
        """SessionStore.scores: one ZMSCORE."""
        if not members:
            return []
        with boundary("conversation set read"):
            got = await self._redis.zmscore(convs_key(tenant, user), list(members))
        return [None if s is None else int(s) for s in got]

    async def listed(self, tenant: int, user: int, conversation_id: bytes) -> bool:
        """SessionStore.listed: one ZSCORE."""
        with boundary("conversation set read"):
            return await self._redis.zscore(convs_key(tenant, user), conversation_id.hex()) is not None

    async def peers(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """SessionStore.peers: one HMGET of the peers HASH."""
        if not conversation_ids:
            return []
        with boundary("peer read"):
            got = await self._redis.hmget(peers_key(tenant, user), [c.hex() for c in conversation_ids])
        return [int(p or 0) for p in got]

    async def set_display_name(self, tenant: int, user: int, name: str) -> None:
        """SessionStore.set_display_name: one SET (DEL for "")."""
        with boundary("display name write"):
            if name:
                await self._redis.set(name_key(tenant, user), name.encode("utf-8"))
            else:
                await self._redis.delete(name_key(tenant, user))

    async def display_names(self, tenant: int, users: Sequence[int]) -> list[str]:
        """SessionStore.display_names: one MGET."""
        if not users:
            return []
        with boundary("display name read"):
            got = await self._redis.mget([name_key(tenant, u) for u in users])
        return [(n or b"").decode("utf-8", errors="replace") for n in got]

    async def checkpoint_bind(self, shard: int, binding: str, owner_epoch: int, tenure: str = "") -> Checkpoint:
        """SessionStore.checkpoint_bind: session_checkpoint.lua init."""
        keys = [session_shard_checkpoint_key(shard), LEGACY_CHECKPOINT]
        res = await self._scripts.call("session_checkpoint", keys,
                                       ["init", binding, shard, owner_epoch, f"p{shard}", tenure])
        status = res[0].decode()
        if status == "MISMATCH":
            return Checkpoint(status, res[1].decode(errors="replace"))
        return Checkpoint(status, binding, [int(res[1])])

    async def checkpoint_advance(self, shard: int, binding: str, owner_epoch: int, expected: int, new: int,
                                 tenure: str = "") -> None:
        """SessionStore.checkpoint_advance: session_checkpoint.lua advance; on
        QIM_CKPT_CONFLICT the stored offset is read back (a lost reply of our own write passes)."""
        key = session_shard_checkpoint_key(shard)
        try:
            await self._scripts.call("session_checkpoint", [key],
                                     ["advance", binding, shard, owner_epoch, str(expected), str(new), tenure])
        except CheckpointConflict as exc:
            if exc.reason != "QIM_CKPT_CONFLICT":  # rebound under us: never our own write
                raise
            # our previous attempt may have been applied with only its reply lost
            with boundary("checkpoint read"):
                stored = await self._redis.hget(key, "p")
            if (stored.decode() if stored else "") != str(new):
                raise


def _pending_member(r) -> str:
    """The first-registration queue member of a Registration or FirstSeen."""
    return f"{r.tenant:032x}:{r.user}:{r.conversation_id.hex()}:{r.peer}"


class RedisReadPositions:
    """ReadPositionStore over one Redis client."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)
        self._redis = client = self._t.home
        self._scripts = Scripts(client, READ_SCRIPTS)

    async def positions(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """ReadPositionStore.positions: one HMGET of the read HASH."""
        if not conversation_ids:
            return []
        with boundary("read position read"):
            got = await self._redis.hmget(read_key(tenant, user), [c.hex() for c in conversation_ids])
        try:
            return [int(r or 0) for r in got]
        except ValueError:
            raise StoreCorrupt("corrupt read position") from None

    async def mark_read(self, tenant: int, user: int, conversation_id: bytes, seq: int) -> tuple[int, bool]:
        """ReadPositionStore.mark_read: session_mark_read.lua (forward only)."""
        pos, moved = await self._scripts.call("session_mark_read", [read_key(tenant, user)],
                                              [conversation_id.hex(), seq])
        return int(pos), bool(int(moved))
