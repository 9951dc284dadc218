"""NotifyStore on Redis (qim/stores/notify.py; docs/decisions/0135-notification-service.md).

Keys, on the user's instance (the mailbox instance of its MailboxShard):
- `qim:notify:a:<tenant hex>:<user>:<device>:<message hex>`: STRING, the claiming
  attempt's token "c<hex>" while an alert is being made (PX the claim time; renewed by
  notify_claim_renew.lua just before each request), "s" once made (PX SENT_TTL_MS): SET
  NX is the one at-most-once decision, whichever node replays the record;
- `qim:notify:bv:<tenant hex>:<user>`: HASH device -> "<badge version>:<badge>", the
  highest version sent to the device (notify_badge.lua);
- `qim:badge:fell` (qim/stores/redis/badges.py): users whose badge fell, written by
  badge_settle.lua, dropped by notify_fell_done.lua.
The session projection's checkpoints (`qim:session:ckpt:{s<shard>}`, field `p`) and the
badge's dirty marks (`qim:badge:dirty`) are read, never written.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Optional, Sequence

from qim.stores.badges import Dirty
from qim.stores.notify import AlertKey, ClaimState, Fell
from qim.stores.redis.badges import BADGE_DIRTY_KEY, BADGE_FELL_KEY, dirty_member, parse_dirty
from qim.stores.redis.keys import session_shard_checkpoint_key
from qim.stores.redis.mailboxes import mailbox_clients
from qim.stores.redis.scripts import boundary
from qim.stores.redis.spread import spread
from qim.stores.redis.topology import as_topology

SENT_TTL_MS = 7 * 86400 * 1000  # a replay later than a week makes no alert: the log keeps less
NOTIFY_SCRIPTS = ("notify_badge", "notify_fell_done", "notify_claim_renew", "notify_sent")


def alert_key(tenant: int, key: AlertKey) -> str:
    """The at-most-once STRING of one alert (module doc)."""
    return f"qim:notify:a:{tenant:032x}:{key.user}:{key.device}:{key.message_id.hex()}"


def chosen(rows: Sequence[tuple[int, int, int]], got: Sequence[Any]) -> list[Optional[tuple[int, int]]]:
    """notify_badge.lua's answers for `rows` (device, version, badge): None ("0": skip a
    stale silent update), the row's own (version, badge) ("1"), or the newer one recorded."""
    out: list[Optional[tuple[int, int]]] = []
    for (_, version, badge), g in zip(rows, got):
        g = g.decode() if isinstance(g, bytes) else str(g)
        if g == "0":
            out.append(None)
        elif g == "1":
            out.append((version, badge))
        else:
            v, b = g.split(":")
            out.append((int(v), int(b)))
    return out


def versions_key(tenant: int, user: int) -> str:
    """The HASH of the badge versions sent to a user's devices (module doc)."""
    return f"qim:notify:bv:{tenant:032x}:{user}"


class RedisNotifyStore:
    """NotifyStore over the mailbox instances of a RedisTopology (or one client)."""

    def __init__(self, client: Any) -> None:
        self._t = t = as_topology(client)
        # coalesced: the claim checks and sent records of the alerts of one loop turn share
        # one pipelined round trip per instance (issue 39's open item)
        self._scripts_of = {id(c): t.scripts(c, NOTIFY_SCRIPTS, coalesce=True) for c in mailbox_clients(t)}
        self._cursors: dict[int, int] = {}

    def _user(self, tenant: int, user: int) -> Any:
        return self._t.home if self._t.single else self._t.user(tenant, user)

    def _shard(self, shard: int) -> Any:
        return self._t.home if self._t.single else self._t.shard(shard)

    def clients(self) -> list[Any]:
        """NotifyStore.clients."""
        return mailbox_clients(self._t)

    async def checkpoints(self, shards: Sequence[int]) -> dict[int, int]:
        """NotifyStore.checkpoints: one pipelined HGET per instance."""
        async def read(client: Any, part: list[int]) -> list[int]:
            with boundary("session checkpoints read"):
                async with client.pipeline(transaction=False) as pipe:
                    for s in part:
                        pipe.hget(session_shard_checkpoint_key(s), "p")
                    got = await pipe.execute()
            return [int(v) if v is not None else -1 for v in got]
        shards = list(dict.fromkeys(shards))
        return dict(zip(shards, await spread(self._t, shards, self._shard, read)))

    async def marked(self, tenant: int, pairs: Sequence[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
        """NotifyStore.marked: one pipelined HEXISTS per instance."""
        async def read(client: Any, part: list[tuple[int, bytes]]) -> list[bool]:
            with boundary("badge marks read"):
                async with client.pipeline(transaction=False) as pipe:
                    for user, conv in part:
                        pipe.hexists(BADGE_DIRTY_KEY, dirty_member(tenant, user, conv))
                    return [bool(x) for x in await pipe.execute()]
        pairs = list(dict.fromkeys(pairs))
        got = await spread(self._t, pairs, lambda p: self._user(tenant, p[0]), read)
        return {p for p, m in zip(pairs, got) if m}

    async def claim(self, tenant: int, keys: Sequence[AlertKey], claim_ms: int, token: str = "c") -> list[ClaimState]:
        """NotifyStore.claim: SET NX PX then GET, pipelined per instance."""
        if not token.startswith("c"):
            raise ValueError("a claim token starts with 'c' ('s' is a made alert)")
        async def run(client: Any, part: list[AlertKey]) -> list[ClaimState]:
            with boundary("alert claim"):
                async with client.pipeline(transaction=False) as pipe:
                    for k in part:
                        name = alert_key(tenant, k)
                        pipe.set(name, token, nx=True, px=claim_ms)
                        pipe.get(name)
                    got = await pipe.execute()
            out: list[ClaimState] = []
            for i in range(len(part)):
                made, value = got[2 * i], got[2 * i + 1]
                out.append("new" if made else "sent" if value == b"s" else "claimed")
            return out
        return await spread(self._t, list(keys), lambda k: self._user(tenant, k.user), run)

    async def renew(self, tenant: int, key: AlertKey, token: str, claim_ms: int) -> bool:
        """NotifyStore.renew: notify_claim_renew.lua on the user's instance."""
        client = self._user(tenant, key.user)
        got = await self._scripts_of[id(client)].call("notify_claim_renew", [alert_key(tenant, key)],
                                                      [token, claim_ms])
        return int(got) == 1

    async def sent(self, tenant: int, keys: Sequence[AlertKey]) -> None:
        """NotifyStore.sent: SET "s" PX SENT_TTL_MS, pipelined per instance (one alert:
        notify_sent.lua, sharing the loop turn's round trip with the other alerts')."""
        if len(keys) == 1:
            client = self._user(tenant, keys[0].user)
            with boundary("alert sent"):
                await self._scripts_of[id(client)].call("notify_sent", [alert_key(tenant, keys[0])], [SENT_TTL_MS])
            return
        async def run(client: Any, part: list[AlertKey]) -> list[None]:
            with boundary("alert sent"):
                async with client.pipeline(transaction=False) as pipe:
                    for k in part:
                        pipe.set(alert_key(tenant, k), "s", px=SENT_TTL_MS)
                    await pipe.execute()
            return [None] * len(part)
        await spread(self._t, list(keys), lambda k: self._user(tenant, k.user), run)

    async def badge_versions(self, tenant: int, user: int, rows: Sequence[tuple[int, int, int]],
                             silent: bool) -> list[Optional[tuple[int, int]]]:
        """NotifyStore.badge_versions: notify_badge.lua, one call."""
        if not rows:
            return []
        client = self._user(tenant, user)
        args: list = ["1" if silent else "0"]
        for device, version, badge in rows:
            args += [device, version, badge]
        got = await self._scripts_of[id(client)].call("notify_badge", [versions_key(tenant, user)], args)
        return chosen(rows, got)

    async def badge_versions_of(self, tenant: int, rows: Mapping[int, Sequence[tuple[int, int, int]]],
                                silent: bool) -> dict[int, list[Optional[tuple[int, int]]]]:
        """NotifyStore.badge_versions_of: notify_badge.lua once per user, one pipeline per
        instance (the script only raises what it records: safe to replay on NOSCRIPT)."""
        by_client: dict[int, tuple[Any, list[int]]] = {}
        for user, r in rows.items():
            if r:
                client = self._user(tenant, user)
                by_client.setdefault(id(client), (client, []))[1].append(user)

        async def run(client: Any, users: list[int]) -> list[Any]:
            calls = [([versions_key(tenant, u)], ["1" if silent else "0"] + [x for row in rows[u] for x in row])
                     for u in users]
            return await self._scripts_of[id(client)].call_many("notify_badge", calls)
        parts = list(by_client.values())
        got = await asyncio.gather(*(run(client, users) for client, users in parts))
        out: dict[int, list[Optional[tuple[int, int]]]] = {u: [] for u, r in rows.items() if not r}
        for (_, users), replies in zip(parts, got):
            out.update({u: chosen(rows[u], g) for u, g in zip(users, replies)})
        return out

    async def fell(self, client: Any, count: int) -> list[Fell]:
        """NotifyStore.fell: one HSCAN page; a member not "<tenant hex>:<user>" is StoreCorrupt."""
        with boundary("badge fell scan"):
            cursor, page = await client.hscan(BADGE_FELL_KEY, self._cursors.get(id(client), 0), count=count)
        self._cursors[id(client)] = int(cursor)
        out = []
        for m, v in page.items():
            m = m.decode() if isinstance(m, bytes) else m
            v = v.decode() if isinstance(v, bytes) else str(v)
            d: Dirty = parse_dirty(f"{m}:{'00' * 16}".encode(), v.encode())  # the same member rules
            out.append(Fell(d.tenant, d.user, m, v))
        return out

    async def fell_done(self, client: Any, handled: Sequence[Fell]) -> None:
        """NotifyStore.fell_done: notify_fell_done.lua."""
        if not handled:
            return
        args: list = []
        for f in handled:
            args += [f.member, f.version]
        await self._scripts_of[id(client)].call("notify_fell_done", [BADGE_FELL_KEY], args)

