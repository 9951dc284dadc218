"""qimctl shards: the ShardRegistry as an operator reads it (docs/design.md §13;
docs/decisions/0040-scale-leases-and-fencing.md; docs/operations.md "Several nodes of
each kind").

    qimctl shards [--registry H:P] [--kind K ...] [--shard-count N] [--outbox-partitions N]

prints, per kind, every live node (id, address, lease left, since when) and every shard
with its owner, owner_epoch and lease left ("-" when nobody holds it: a takeover in
progress). A kind that runs only with the archive tier and that no node ever held
(a stack without it) is shown as not running and is not an error. Exit codes: 0 every
shard of the kinds running has a live owner, 1 some shard has none, 2 the registry
cannot be read (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from qim.cli.envargs import check_addr, shard_count_arg, shard_count_default
from qim.cluster.table import counts, read_registry, render, unowned
from qim.errors import ConfigError, EngineError
from qim.topology import leasing

LEGEND = ("legend: 0@e3 is shard 0 held under owner_epoch 3 (one higher each time the shard changes hands; "
          "docs/operations.md \"Several nodes of each kind\")")


def add_parser(sub, env) -> None:
    """Register `shards` under the qimctl subcommands."""
    p = sub.add_parser("shards", help="print the ShardRegistry: live nodes, shard owners and owner epochs")
    p.add_argument("--registry", default=env.get("QIM_REGISTRY_REDIS_ADDR") or env.get("QIM_REDIS_ADDR"),
                   help="the registry's Redis host:port (default $QIM_REGISTRY_REDIS_ADDR, else $QIM_REDIS_ADDR)")
    p.add_argument("--kind", action="append", choices=[s.name for s in leasing()], default=None,
                   help="only this kind (repeatable; default: every kind)")
    p.add_argument("--shard-count", type=shard_count_arg, default=shard_count_default(env),
                   help="mailbox and session shards (default $QIM_MAILBOX_SHARD_COUNT, else 64)")
    p.add_argument("--outbox-partitions", type=int, default=None,
                   help="fanout and archiver partitions (default: read from $QIM_KAFKA_BOOTSTRAP, else 1)")
    p.add_argument("--kafka-bootstrap", default=env.get("QIM_KAFKA_BOOTSTRAP"), help=argparse.SUPPRESS)
    p.set_defaults(func=run_shards)


def run_shards(args: argparse.Namespace, out=sys.stdout) -> int:
    """Print the registry (module docstring)."""
    if not args.registry:
        raise ConfigError("--registry (or $QIM_REGISTRY_REDIS_ADDR / $QIM_REDIS_ADDR) is required: load the "
                          "stack's addresses first: set -a; . .qim/stack/stack.env; set +a")
    check_addr("--registry", args.registry)
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
    print(LEGEND, file=out)
    return 1 if unowned(tables) else 0
