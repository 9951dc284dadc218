"""ShardRegistry on Redis (qim/stores/registry.py; docs/decisions/0040-scale-leases-and-fencing.md).

Keys (keys.py): one HASH per node lease, one ZSET of node ids per kind scored by lease
end, one HASH per shard lease that never expires as a key (its owner_epoch must only
grow). Leases end by the registry's clock (TIME inside the scripts). Every mutation is
one script by cached SHA; the owner table is one script call (registry_owners.lua);
`nodes` is TIME, ZRANGEBYSCORE and one pipeline.

The registry may be its own Redis (QIM_REGISTRY_REDIS_ADDR) or the data Redis: fencing
never needs both in one script, because each owner copies its owner_epoch into the data
it writes (the fence) before its first write.
"""

from __future__ import annotations

from typing import Optional, Sequence

from qim.stores.redis.keys import registry_node_key, registry_nodes_key, registry_shard_key
from qim.stores.redis.scripts import Scripts, boundary
from qim.stores.registry import Heartbeat, JoinResult, NodeInfo, Owner

SCRIPTS = ("registry_join", "registry_beat", "registry_acquire", "registry_release", "registry_owners")
# node ids whose lease ended this long ago leave the ZSET of their kind (the node HASH
# stays until the id joins again: `qimctl shards` can still name a dead owner)
DEAD_NODE_HORIZON_MS = 3_600_000


def _s(value: Optional[bytes]) -> str:
    return value.decode() if value else ""


class RedisShardRegistry:
    """ShardRegistry over one Redis client (see the Protocol for shapes and errors)."""

    def __init__(self, client, owns_client: bool = False) -> None:
        self._redis = client
        self._owns = owns_client
        self._scripts = Scripts(client, SCRIPTS)

    async def join(self, kind: str, node_id: str, incarnation: str, ttl_ms: int, addr: str, extra: str,
                   take_from: Optional[tuple[str, int]] = None) -> JoinResult:
        """ShardRegistry.join: registry_join.lua."""
        holder, beat = take_from or ("", 0)
        reply = await self._scripts.call("registry_join", [registry_node_key(kind, node_id), registry_nodes_key(kind)],
                                         [node_id, incarnation, ttl_ms, addr, extra, holder, beat])
        if _s(reply[0]) == "OK":
            return JoinResult(True, since_ms=int(reply[1] or 0))
        return JoinResult(False, _s(reply[1]), int(reply[2]), int(reply[3]), _s(reply[4]))

    async def heartbeat(self, kind: str, node_id: str, incarnation: str, ttl_ms: int,
                        held: dict[int, int]) -> Heartbeat:
        """ShardRegistry.heartbeat: registry_beat.lua."""
        shards = sorted(held)
        keys = [registry_node_key(kind, node_id), registry_nodes_key(kind)]
        keys += [registry_shard_key(kind, s) for s in shards]
        args = [node_id, incarnation, ttl_ms, DEAD_NODE_HORIZON_MS] + [held[s] for s in shards]
        reply = await self._scripts.call("registry_beat", keys, args)
        if _s(reply[0]) == "GONE":
            return Heartbeat(True, list(shards))
        return Heartbeat(False, [shards[int(i) - 1] for i in reply[1]], [_s(n) for n in reply[2]])

    async def acquire(self, kind: str, node_id: str, incarnation: str, ttl_ms: int,
                      shards: Sequence[int]) -> dict[int, int]:
        """ShardRegistry.acquire: registry_acquire.lua."""
        if not shards:
            return {}
        keys = [registry_node_key(kind, node_id)] + [registry_shard_key(kind, s) for s in shards]
        epochs = await self._scripts.call("registry_acquire", keys, [node_id, incarnation, ttl_ms])
        return {s: int(e) for s, e in zip(shards, epochs) if int(e)}

    async def release(self, kind: str, node_id: str, incarnation: str, shards: Sequence[int]) -> int:
        """ShardRegistry.release: registry_release.lua."""
        return await self._release(kind, node_id, incarnation, shards, "")

    async def leave(self, kind: str, node_id: str, incarnation: str) -> None:
        """ShardRegistry.leave: registry_release.lua with "leave" (no shards: release them first)."""
        await self._release(kind, node_id, incarnation, (), "leave")

    async def _release(self, kind: str, node_id: str, incarnation: str, shards: Sequence[int], mode: str) -> int:
        keys = [registry_node_key(kind, node_id), registry_nodes_key(kind)]
        keys += [registry_shard_key(kind, s) for s in shards]
        return int(await self._scripts.call("registry_release", keys, [node_id, incarnation, mode]))

    async def _now_ms(self) -> int:
        seconds, micros = await self._redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    async def nodes(self, kind: str) -> list[NodeInfo]:
        """ShardRegistry.nodes: ZRANGEBYSCORE of the kind, then one HMGET per node, pipelined
        (sorted by node id)."""
        with boundary("registry nodes"):
            now = await self._now_ms()
            ids = [_s(n) for n in await self._redis.zrangebyscore(registry_nodes_key(kind), f"({now}", "+inf")]
            async with self._redis.pipeline(transaction=False) as pipe:
                for node_id in ids:
                    pipe.hmget(registry_node_key(kind, node_id), "inc", "addr", "extra", "exp", "since")
                rows = await pipe.execute()
        out = []
        for node_id, (inc, addr, extra, exp, since) in zip(ids, rows):
            if inc is None:
                continue
            out.append(NodeInfo(kind, node_id, _s(inc), _s(addr), _s(extra), int(exp or 0) - now, int(since or 0)))
        return sorted(out, key=lambda n: n.node_id)

    async def owners(self, kind: str, count: int) -> list[Owner]:
        """ShardRegistry.owners: registry_owners.lua, one call (the shard HASHes, the
        registry's clock and each owner's node HASH)."""
        keys = [registry_shard_key(kind, shard) for shard in range(count)]
        now, rows, nodes = await self._scripts.call("registry_owners", keys, [registry_node_key(kind, "")])
        addrs = {_s(nodes[i]): (_s(nodes[i + 1]), int(nodes[i + 2] or 0)) for i in range(0, len(nodes), 3)}
        out = []
        for shard in range(count):
            node, epoch, exp, since = rows[4 * shard:4 * shard + 4]
            node_id = _s(node)
            addr, node_exp = addrs.get(node_id, ("", 0))
            out.append(Owner(shard, node_id, int(epoch or 0), int(exp or 0) - now,
                             addr if node_exp > now else "", int(since or 0)))
        return out

    async def close(self) -> None:
        """Close the client when this registry opened it."""
        if self._owns:
            await self._redis.aclose()
