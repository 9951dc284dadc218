"""qimctl shards: the ShardRegistry as an operator reads it (docs/design.md §13;
docs/decisions/0032-scale-leases-and-fencing.md; docs/operations.md "Several nodes of
each kind").

    qimctl shards [--registry H:P] [--kind K ...] [--shard-count N] [--outbox-partitions N]

prints, per kind, every live node (id, address, lease left, since when) and every shard
with its owner, owner_epoch and lease left ("-" when nobody holds it: a takeover in
progress). Exit codes: 0 every shard of the kinds shown has a live owner, 1 some shard
has none, 2 the registry cannot be read (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Optional

from qim.consts import DEFAULT_SHARD_COUNT
from qim.errors import ConfigError, EngineError
from qim.stores.registry import NodeInfo, Owner
from qim.topology import OUTBOX, SHARDS, leasing


def add_parser(sub, env) -> None:
    """Register `shards` under the qimctl subcommands."""
    p = sub.add_parser("shards", help="print the ShardRegistry: live nodes, shard owners and owner epochs")
    p.add_argument("--registry", default=env.get("QIM_REGISTRY_REDIS_ADDR") or env.get("QIM_REDIS_ADDR"),
                   help="the registry's Redis host:port (default $QIM_REGISTRY_REDIS_ADDR, else $QIM_REDIS_ADDR)")
    p.add_argument("--kind", action="append", choices=[s.name for s in leasing()], default=None,
                   help="only this kind (repeatable; default: every kind)")
    p.add_argument("--shard-count", type=int, default=int(env.get("QIM_MAILBOX_SHARD_COUNT") or DEFAULT_SHARD_COUNT),
                   help="mailbox and session shards (default $QIM_MAILBOX_SHARD_COUNT, else 64)")
    p.add_argument("--outbox-partitions", type=int, default=None,
                   help="fanout and archiver partitions (default: read from $QIM_KAFKA_BOOTSTRAP, else 1)")
    p.add_argument("--kafka-bootstrap", default=env.get("QIM_KAFKA_BOOTSTRAP"), help=argparse.SUPPRESS)
    p.set_defaults(func=run_shards)


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


def render(tables: dict[str, tuple[list[NodeInfo], list[Owner]]], now_ms: Optional[int] = None) -> list[str]:
    """The lines `qimctl shards` and `qim-dev stack status` print for `tables`."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    lines = []
    for kind, (nodes, owners) in tables.items():
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


def run_shards(args: argparse.Namespace, out=sys.stdout) -> int:
    """Print the registry (module docstring)."""
    if not args.registry:
        raise ConfigError("--registry (or $QIM_REGISTRY_REDIS_ADDR / $QIM_REDIS_ADDR) is required")
    partitions = args.outbox_partitions
    if partitions is None:
        partitions = 1
        if args.kafka_bootstrap:
            from qim.consts import OUTBOX_TOPIC
            from qim.infra.kafka.bridge import topic_partitions

            try:
                partitions = asyncio.run(topic_partitions(args.kafka_bootstrap, OUTBOX_TOPIC))
            except EngineError:
                partitions = 1
    kinds = args.kind or [s.name for s in leasing()]
    sizes = counts(args.shard_count, partitions)
    try:
        tables = asyncio.run(read_registry(args.registry, kinds, sizes))
    except EngineError as exc:
        raise EngineError(f"registry at {args.registry}: {exc}") from None
    for line in render(tables):
        print(line, file=out)
    unowned = sum(1 for _, owners in tables.values() for o in owners if not o.live)
    return 1 if unowned else 0
