"""The ShardRegistry as a table for people (`qimctl shards`, `qim-dev stack status`;
docs/operations.md "Several nodes of each kind"): every live node of each leasing kind
with its address, lease time left and join time, then every shard grouped by owner as
`shard@e<owner_epoch>` ("unowned": nobody holds it, a takeover in progress)."""

from __future__ import annotations

import time
from typing import Optional

from qim.stores.registry import NodeInfo, Owner
from qim.topology import OUTBOX, SHARDS, leasing, service


def counts(shard_count: int, outbox_partitions: int) -> dict[str, int]:
    """Shards of each leasing kind of the service table (a node lease only: 0)."""
    per = {SHARDS: shard_count, OUTBOX: outbox_partitions}
    return {s.name: per.get(s.leases, 0) for s in leasing()}


async def read_registry(addr: str, kinds: list[str], sizes: dict[str, int]) -> dict[str, tuple[list, list]]:
    """{kind: (nodes, owners)} read from the registry at `addr`. StoreUnavailable when
    it cannot be read."""
    from qim.stores.open import open_registry

    registry = open_registry(addr)
    try:
        out = {}
        for kind in kinds:
            out[kind] = (await registry.nodes(kind), await registry.owners(kind, sizes[kind]))
        return out
    finally:
        await registry.close()


def deployed(kind: str, nodes: list[NodeInfo], owners: list[Owner]) -> bool:
    """False for a kind that runs only with the archive tier (qim/topology.py
    `archive_only`) on a stack without it: no live node and no shard ever owned
    (owner_epoch 0 everywhere). A kind that had owners and lost them is deployed (an
    outage, not an absence)."""
    return not (service(kind).archive_only and not nodes and all(o.owner_epoch == 0 for o in owners))


def unowned(tables: dict[str, tuple[list[NodeInfo], list[Owner]]]) -> int:
    """Shards without a live owner over the deployed kinds of `tables` (`qimctl shards`
    exits 1 when any)."""
    return sum(1 for kind, (nodes, owners) in tables.items() if deployed(kind, nodes, owners)
               for o in owners if not o.live)


def render(tables: dict[str, tuple[list[NodeInfo], list[Owner]]], now_ms: Optional[int] = None) -> list[str]:
    """The lines `qimctl shards` and `qim-dev stack status` print for `tables`."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    lines = []
    for kind, (nodes, owners) in tables.items():
        if not deployed(kind, nodes, owners):
            lines.append(f"{kind}: not running (only with the archive tier; no node ever held its shards)")
            continue
        lines.append(f"{kind}: {len(nodes)} live node(s)")
        for n in nodes:
            since = f"{(now_ms - n.since_ms) / 1000:.0f}s ago" if n.since_ms else "?"
            lines.append(f"  node {n.node_id}  addr={n.addr or '-'}  lease {n.remaining_ms / 1000:.1f}s  "
                         f"joined {since}")
        by_node: dict[str, list[str]] = {}
        for o in owners:
            key = o.node_id if o.live else "-"
            by_node.setdefault(key, []).append(f"{o.shard}@e{o.owner_epoch}")
        for node, shards in sorted(by_node.items()):
            lines.append(f"  {'unowned' if node == '-' else node}: {' '.join(shards)}")
    return lines
