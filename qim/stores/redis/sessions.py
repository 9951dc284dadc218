"""SessionStore and ReadPositionStore on Redis (qim/stores/sessions.py, reads.py): the
conversation set ZSET, the peers HASH, the read HASH and the checkpoint HASH (keys.py);
session_register.lua (the one registration script of both projection paths),
session_mark_read.lua, session_checkpoint.lua and session_mark_checked.lua.

Several instances (docs/decisions/0096, 0097): a user's state (conversation set, peers,
name, the checked mark, read positions) is on `topology.user(tenant, user)`, the
instance of its MailboxShard; session shard s (= MailboxShard s) keeps its checkpoint on
`topology.shard(s)`, with its users, so the registrations of shard s's records and its
checkpoint go in one call (sessionsplit.py). The first-registration queue is one ZSET
per mailbox instance (a registration queues on its user's instance); the drainer reads
every instance. A call covering several instances runs one call per instance,
concurrently (spread.py); with one instance every call is made as before.
"""

from __future__ import annotations

import heapq
from typing import Any, Optional, Sequence

from qim.consts import SESSION_PROJECT_MAX_REGS
from qim.stores.errors import CheckpointConflict, StoreCorrupt
from qim.stores.redis.badges import BADGE_DIRTY_KEY, dirty_member
from qim.stores.redis.keys import (
    convs_checked_key,
    convs_key,
    name_key,
    peers_key,
    read_key,
    session_shard_checkpoint_key,
    ucs_pending_key,
)
from qim.stores.redis.mailboxes import mailbox_clients
from qim.stores.redis.scripts import boundary, int_score_pairs
from qim.stores.redis.sessionsplit import project_args, project_split
from qim.stores.redis.spread import gather_all, spread
from qim.stores.redis.topology import as_topology
from qim.stores.sessions import Checkpoint, FirstSeen, Registration

# the single session node's checkpoint before shard leases (all partitions in one HASH):
# a shard's first checkpoint resumes from it (docs/decisions/0040-scale-leases-and-fencing.md);
# written only by one-instance deployments, read on the shard's instance
LEGACY_CHECKPOINT = "qim:session:ckpt:0of1"
SESSION_SCRIPTS = ("session_register", "session_checkpoint", "session_project", "session_mark_checked")
READ_SCRIPTS = ("session_mark_read",)


class RedisSessionStore:
    """SessionStore over the mailbox instances of a RedisTopology, or one redis-py
    client (see the Protocol for shapes and errors; placement: the module doc)."""

    def __init__(self, client, first_registrations: bool = False) -> None:
        self._t = t = as_topology(client)
        self._single = t.single
        self._redis = t.home  # one instance: every call on it, as before
        self._scripts_of = {id(c): t.scripts(c, SESSION_SCRIPTS) for c in mailbox_clients(t)}
        # with the archive tier (docs/decisions/0023): first registrations are queued for CQL
        self.first_registrations = first_registrations

    def _user(self, tenant: int, user: int) -> Any:
        """The client holding a user's session state."""
        return self._redis if self._single else self._t.user(tenant, user)

    def _shard(self, shard: int) -> Any:
        """The client holding session shard `shard`'s checkpoint."""
        return self._redis if self._single else self._t.shard(shard)

    async def register(self, regs: Sequence[Registration]) -> int:
        """SessionStore.register: session_register.lua once per SESSION_PROJECT_MAX_REGS
        registrations, every call in one pipelined round trip (the seed's session once
        awaited one write per projection: throughput ≈ 1/RTT, 75 % dropped at 15k msg/s;
        one script call per registration cost Redis and this process about 10 µs each:
        docs/decisions/0062-registrations-in-one-call.md). Several instances: one such
        round trip per instance holding some of the users, concurrently."""
        if not regs:
            return 0
        if self._single:
            return await self._register_on(self._redis, regs)
        groups = self._t.group_by(regs, lambda r: self._t.user(r.tenant, r.user))
        return sum(await gather_all([self._register_on(c, part) for c, part in groups]))

    async def _register_on(self, client: Any, regs: Sequence[Registration]) -> int:
        """session_register.lua calls for `regs`, all on `client`, one pipelined round trip."""
        flag = "1" if self.first_registrations else "0"
        calls = []
        for i in range(0, len(regs), SESSION_PROJECT_MAX_REGS):
            keys: list = [ucs_pending_key()]
            args: list = [flag]
            for r in regs[i:i + SESSION_PROJECT_MAX_REGS]:
                keys += self._reg_keys(r)
                args += self._reg_args(r)
            calls.append((keys, args))
        return sum(int(x) for x in await self._scripts_of[id(client)].call_many("session_register", calls))

    async def project(self, binding: str, moves: dict[int, tuple[int, int, int]],
                      regs: Sequence[Registration], tenures: Optional[dict[int, str]] = None) -> int:
        """SessionStore.project: session_project.lua, one round trip for a batch of up to
        SESSION_PROJECT_MAX_REGS registrations (the leading ones of a larger batch go
        first through `register`, one more pipelined round trip): the checkpoints move
        only after every registration ran. NotOwner / CheckpointConflict as
        checkpoint_advance (a stale tenure is NotOwner too); a retry after a lost reply
        finds its own offsets and passes (returns 0).

        Several instances (decision 0097): one session_project call per instance holding
        a checkpoint of `moves`, concurrently, each with its shards' checkpoints and the
        registrations of its users those shards' records produced (atomic per shard as
        before); a registration that another instance's shard produced (a direct
        message's sender on another instance) is written first, through `register`,
        so no checkpoint moves before it ran (sessionsplit.py). An unavailable instance
        holds back only the shards that need it: ShardsUnavailable names them, the
        others were written (decision 0097, Amendment)."""
        if self._single:
            return await self._project_on(self._redis, binding, sorted(moves), moves, tenures, regs)
        return await project_split(self._t, moves, regs, self._register_on,
                                   lambda c, shards, part: self._project_on(c, binding, shards, moves, tenures, part))

    async def _project_on(self, client: Any, binding: str, shards: list[int], moves: dict[int, tuple[int, int, int]],
                          tenures: Optional[dict[int, str]], regs: Sequence[Registration]) -> int:
        """The head of `regs` through `register` on `client`, then one session_project
        call there with `shards`' checkpoints and the last SESSION_PROJECT_MAX_REGS."""
        head, tail = regs[:-SESSION_PROJECT_MAX_REGS], regs[-SESSION_PROJECT_MAX_REGS:]
        added = await self._register_on(client, head) if head else 0
        keys, args = project_args(binding, shards, moves, tenures, self.first_registrations)
        for r in tail:
            keys += self._reg_keys(r)
            args += self._reg_args(r)
        res = int(await self._scripts_of[id(client)].call("session_project", keys, args))
        return added + max(res, 0)

    @staticmethod
    def _reg_keys(r: Registration) -> tuple:
        # the last: UserBadgeState's dirty mark, in the same script (decision 0129)
        return convs_key(r.tenant, r.user), read_key(r.tenant, r.user), peers_key(r.tenant, r.user), BADGE_DIRTY_KEY

    def _reg_args(self, r: Registration) -> tuple:
        member = _pending_member(r) if self.first_registrations else ""
        return (r.conversation_id.hex(), r.created_at_ms, r.own_seq, r.peer, member,
                dirty_member(r.tenant, r.user, r.conversation_id))

    async def pending_first(self, limit: int) -> list[FirstSeen]:
        """SessionStore.pending_first: one ZRANGE WITHSCORES of the queue of every mailbox
        instance (concurrently), the oldest `limit` of them."""
        if self._single:
            return await self._pending_on(self._redis, limit)
        parts = await gather_all([self._pending_on(c, limit) for c in self._t.mailbox_clients])
        # in the one queue's order: by score, then member (ZRANGE's order of equal scores)
        return list(heapq.merge(*parts, key=lambda f: (f.first_seen_at_ms, _pending_member(f))))[:limit]

    @staticmethod
    async def _pending_on(client: Any, limit: int) -> list[FirstSeen]:
        with boundary("first registration queue read"):
            raw = await client.execute_command("ZRANGE", ucs_pending_key(), 0, limit - 1, "WITHSCORES")
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
        """SessionStore.done_first: one ZREM of the rows' members on each instance
        holding some (the queue of the row's user's instance), concurrently."""
        async def drop(client: Any, part: Sequence[FirstSeen]) -> list:
            with boundary("first registration queue write"):
                await client.zrem(ucs_pending_key(), *[_pending_member(r) for r in part])
            return list(part)
        if rows:
            await spread(self._t, rows, lambda r: self._user(r.tenant, r.user), drop)

    async def conversations(self, tenant: int, user: int) -> list[tuple[int, bytes]]:
        """SessionStore.conversations: one ZRANGE WITHSCORES (raw reply)."""
        with boundary("conversation set read"):
            # raw reply: redis-py's score-pair callback costs ~5 µs per member
            raw = await self._user(tenant, user).execute_command("ZRANGE", convs_key(tenant, user), 0, -1, "WITHSCORES")
        return int_score_pairs(raw, swap=True)

    async def checked_conversations(self, tenant: int, user: int) -> tuple[list[tuple[int, bytes]], bool]:
        """SessionStore.checked_conversations: ZRANGE WITHSCORES and EXISTS, one pipelined round trip."""
        with boundary("conversation set read"):
            pipe = self._user(tenant, user).pipeline(transaction=False)
            pipe.execute_command("ZRANGE", convs_key(tenant, user), 0, -1, "WITHSCORES")
            pipe.exists(convs_checked_key(tenant, user))
            raw, checked = await pipe.execute()
        return int_score_pairs(raw, swap=True), bool(checked)

    async def mark_checked(self, tenant: int, user: int, at_least: int) -> bool:
        """SessionStore.mark_checked: session_mark_checked.lua (ZCARD, then SET)."""
        scripts = self._scripts_of[id(self._user(tenant, user))]
        return bool(await scripts.call("session_mark_checked",
                                       [convs_key(tenant, user), convs_checked_key(tenant, user)], [at_least]))

    async def scores(self, tenant: int, user: int, members: Sequence[bytes]) -> list[Optional[int]]:
        """SessionStore.scores: one ZMSCORE."""
        if not members:
            return []
        with boundary("conversation set read"):
            got = await self._user(tenant, user).zmscore(convs_key(tenant, user), list(members))
        return [None if s is None else int(s) for s in got]

    async def listed(self, tenant: int, user: int, conversation_id: bytes) -> bool:
        """SessionStore.listed: one ZSCORE."""
        with boundary("conversation set read"):
            return await self._user(tenant, user).zscore(convs_key(tenant, user), conversation_id.hex()) is not None

    async def peers(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """SessionStore.peers: one HMGET of the peers HASH."""
        if not conversation_ids:
            return []
        with boundary("peer read"):
            got = await self._user(tenant, user).hmget(peers_key(tenant, user), [c.hex() for c in conversation_ids])
        return [int(p or 0) for p in got]

    async def set_display_name(self, tenant: int, user: int, name: str) -> None:
        """SessionStore.set_display_name: one SET (DEL for "")."""
        with boundary("display name write"):
            client = self._user(tenant, user)
            if name:
                await client.set(name_key(tenant, user), name.encode("utf-8"))
            else:
                await client.delete(name_key(tenant, user))

    async def display_names(self, tenant: int, users: Sequence[int]) -> list[str]:
        """SessionStore.display_names: one MGET per instance holding some of the users,
        concurrently."""
        async def read(client: Any, part: Sequence[int]) -> list:
            with boundary("display name read"):
                return await client.mget([name_key(tenant, u) for u in part])
        got = await spread(self._t, users, lambda u: self._user(tenant, u), read)
        return [(n or b"").decode("utf-8", errors="replace") for n in got]

    async def checkpoint_bind(self, shard: int, binding: str, owner_epoch: int, tenure: str = "") -> Checkpoint:
        """SessionStore.checkpoint_bind: session_checkpoint.lua init, on the shard's instance."""
        keys = [session_shard_checkpoint_key(shard), LEGACY_CHECKPOINT]
        scripts = self._scripts_of[id(self._shard(shard))]
        res = await scripts.call("session_checkpoint", keys,
                                 ["init", binding, shard, owner_epoch, f"p{shard}", tenure])
        status = res[0].decode()
        if status == "MISMATCH":
            return Checkpoint(status, res[1].decode(errors="replace"))
        return Checkpoint(status, binding, [int(res[1])])

    async def checkpoint_advance(self, shard: int, binding: str, owner_epoch: int, expected: int, new: int,
                                 tenure: str = "") -> None:
        """SessionStore.checkpoint_advance: session_checkpoint.lua advance; on
        QIM_CKPT_CONFLICT the stored offset is read back (a lost reply of our own write passes)."""
        key, client = session_shard_checkpoint_key(shard), self._shard(shard)
        try:
            await self._scripts_of[id(client)].call("session_checkpoint", [key],
                                                    ["advance", binding, shard, owner_epoch, str(expected), str(new), tenure])
        except CheckpointConflict as exc:
            if exc.reason != "QIM_CKPT_CONFLICT":  # rebound under us: never our own write
                raise
            # our previous attempt may have been applied with only its reply lost
            with boundary("checkpoint read"):
                stored = await client.hget(key, "p")
            if (stored.decode() if stored else "") != str(new):
                raise


def _pending_member(r) -> str:
    """The first-registration queue member of a Registration or FirstSeen."""
    return f"{r.tenant:032x}:{r.user}:{r.conversation_id.hex()}:{r.peer}"


class RedisReadPositions:
    """ReadPositionStore over a RedisTopology (a user's read HASH on the user's
    instance), or one redis-py client."""

    def __init__(self, client) -> None:
        self._t = t = as_topology(client)
        self._single, self._redis = t.single, t.home
        self._scripts_of = {id(c): t.scripts(c, READ_SCRIPTS) for c in mailbox_clients(t)}

    def _user(self, tenant: int, user: int) -> Any:
        return self._redis if self._single else self._t.user(tenant, user)

    async def positions(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """ReadPositionStore.positions: one HMGET of the read HASH."""
        if not conversation_ids:
            return []
        with boundary("read position read"):
            got = await self._user(tenant, user).hmget(read_key(tenant, user), [c.hex() for c in conversation_ids])
        try:
            return [int(r or 0) for r in got]
        except ValueError:
            raise StoreCorrupt("corrupt read position") from None

    async def mark_read(self, tenant: int, user: int, conversation_id: bytes, seq: int) -> tuple[int, bool]:
        """ReadPositionStore.mark_read: session_mark_read.lua (forward only)."""
        scripts = self._scripts_of[id(self._user(tenant, user))]
        # a move marks UserBadgeState dirty in the same script (decision 0129)
        pos, moved = await scripts.call("session_mark_read", [read_key(tenant, user), BADGE_DIRTY_KEY],
                                        [conversation_id.hex(), seq, dirty_member(tenant, user, conversation_id)])
        return int(pos), bool(int(moved))
