"""qimctl redis: planned changes of where Redis keys live (docs/decisions/0104, 0113;
docs/operations.md "Several Redis instances").

    qimctl redis move-shard --shard S --to HOST:PORT [--redis-addr H:P] [--registry H:P]
                            [--shard-count N] [--settle SECONDS]
    qimctl redis pin-shards [--redis-addr H:P] [--shard-count N]
    qimctl redis move-bucket --bucket B --to HOST:PORT [--redis-addr H:P] [--settle SECONDS]
    qimctl redis pin-buckets [--redis-addr H:P]
    qimctl redis where [--tenant T] [--user U] [--conversation HEX] [--redis-addr H:P] [--shard-count N]

moves MailboxShard S with everything it owns (DispatchProgress, watermark, its users'
mailboxes, day indexes and session state, its session checkpoint and first-registration
rows) to mailbox instance HOST:PORT under traffic: the shard's calls are refused
(StoreUnavailable, retried by clients) while its keys are copied, then every node finds
it on the new instance (qim/stores/redis/shardmove.py). Safe to run again after a crash
at any step. `pin-shards` writes every shard's current instance into the placement map,
the first step of growing from N to N+1 mailbox instances (docs/operations.md "Several
Redis instances"). `move-bucket` moves commit bucket B (every key of its hash tag: commit
hashes and idempotency keys, conversation_seq, hot history, group members ...) to core
instance HOST:PORT the same way (the bucket's sends are refused as UNAVAILABLE, retried,
while it is copied: qim/stores/redis/bucketmove.py); `pin-buckets` is the first step of
growing the core instances. `where` prints, from the live placement map, a user's
MailboxShard and its mailbox instance and a conversation's commit bucket and its core
instance (and a move in progress). The deployment's variables name the instances (QIM_REDIS_ADDR, the home;
QIM_REDIS_CORE_ADDRS, QIM_REDIS_MAILBOX_ADDRS; QIM_REGISTRY_REDIS_ADDR).

Exit codes: 0 moved (or already there), 2 refused or failed (one line on stderr naming
why and what to do; a failure after the mark leaves the shard marked: run it again; a
second run of a move while one runs is refused at once, naming the running one).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from qim.cli.envargs import check_addr, redis_layout, shard_count_arg, shard_count_default, tenant_arg, tenant_default
from qim.errors import ConfigError


def add_parsers(sub, env) -> None:
    """Register `redis move-shard`, `pin-shards`, `move-bucket` and `pin-buckets` under
    the qimctl subcommands."""
    p = sub.add_parser("redis", help="planned moves of Redis keys between instances (decision 0104)")
    rsub = p.add_subparsers(dest="redis_command", required=True)
    m = rsub.add_parser("move-shard", help="move one MailboxShard to another mailbox instance, under traffic")
    m.add_argument("--shard", type=int, required=True, help="the MailboxShard to move")
    m.add_argument("--to", required=True, help="host:port of the mailbox instance to move it to (one of "
                                               "$QIM_REDIS_MAILBOX_ADDRS)")
    m.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"),
                   help="the home instance, holding the placement map (default $QIM_REDIS_ADDR)")
    m.add_argument("--registry", default=env.get("QIM_REGISTRY_REDIS_ADDR") or env.get("QIM_REDIS_ADDR"),
                   help="the ShardRegistry's Redis (default $QIM_REGISTRY_REDIS_ADDR, else $QIM_REDIS_ADDR)")
    m.add_argument("--shard-count", type=shard_count_arg, default=shard_count_default(env),
                   help="mailbox and session shards (default $QIM_MAILBOX_SHARD_COUNT, else 64)")
    m.add_argument("--settle", type=float, default=None,
                   help="seconds to wait after marking the shard before copying (default and least 5: "
                        "every service reads the placement map once a second, and refuses the shard's "
                        "calls when it could not for 3 s)")
    m.set_defaults(func=run_move_shard, environ=env)
    pin = rsub.add_parser("pin-shards", help="write every MailboxShard's current instance into the placement "
                                             "map (before a longer QIM_REDIS_MAILBOX_ADDRS is rolled out)")
    pin.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"),
                     help="the home instance, holding the placement map (default $QIM_REDIS_ADDR)")
    pin.add_argument("--shard-count", type=shard_count_arg, default=shard_count_default(env),
                     help="mailbox and session shards (default $QIM_MAILBOX_SHARD_COUNT, else 64)")
    pin.set_defaults(func=run_pin_shards, environ=env)
    home_help = "the home instance, holding the placement map (default $QIM_REDIS_ADDR)"
    mb = rsub.add_parser("move-bucket", help="move one commit bucket to another core instance, under traffic")
    mb.add_argument("--bucket", type=int, required=True, help="the commit bucket to move (0..255)")
    mb.add_argument("--to", required=True, help="host:port of the core instance to move it to (one of "
                                                "$QIM_REDIS_CORE_ADDRS)")
    mb.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"), help=home_help)
    mb.add_argument("--settle", type=float, default=None,
                    help="seconds to wait after marking the bucket before copying (default and least 5)")
    mb.set_defaults(func=run_move_bucket, environ=env)
    pb = rsub.add_parser("pin-buckets", help="write every commit bucket's current core instance into the "
                                             "placement map (before a longer QIM_REDIS_CORE_ADDRS is rolled out)")
    pb.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"), help=home_help)
    pb.set_defaults(func=run_pin_buckets, environ=env)
    w = rsub.add_parser("where", help="a user's MailboxShard and a conversation's commit bucket, with their "
                                      "instances, from the live placement map")
    w.add_argument("--tenant", type=tenant_arg, default=tenant_default(env),
                   help="tenant id, decimal or 0x hex (default: $QIM_TENANT_ID, else 0)")
    w.add_argument("--user", type=int, default=None, help="user_id: its MailboxShard and mailbox instance")
    w.add_argument("--conversation", default=None, help="conversation_id, 32 hex: its commit bucket and core instance")
    w.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"), help=home_help)
    w.add_argument("--shard-count", type=shard_count_arg, default=shard_count_default(env),
                   help="mailbox and session shards (default $QIM_MAILBOX_SHARD_COUNT, else 64)")
    w.set_defaults(func=run_where, environ=env)


def _pinned(command: str, what: str, added: int, total: int) -> str:
    """The pin commands' one line: how many entries this run wrote, how many were there."""
    if added == total:
        return f"{command}: all {total} {what} pinned now"
    if added == 0:
        return f"{command}: all {total} {what} were pinned already; nothing written"
    return f"{command}: {added} of {total} {what} pinned now; the other {total - added} were pinned already"


def run_where(args: argparse.Namespace, out=None) -> int:
    """Print where a user's and a conversation's keys live (module docstring); ConfigError
    for no --user and no --conversation, a bad conversation id, or a map naming an
    address outside the deployment's lists."""
    from qim.cli.redis_where import where

    if args.user is None and args.conversation is None:
        raise ConfigError("give --user (its MailboxShard) and/or --conversation (its commit bucket)")
    conversation = None
    if args.conversation is not None:
        try:
            conversation = bytes.fromhex(args.conversation)
        except ValueError:
            conversation = b""
        if len(conversation) != 16:
            raise ConfigError("--conversation must be 32 hex digits (a conversation_id)")
    if args.user is not None and args.user < 0:
        raise ConfigError("--user must be a user_id (0 or more)")
    layout = redis_layout("--redis-addr", args.redis_addr, args.environ, args.shard_count)
    for line in asyncio.run(where(layout, args.tenant, args.user, conversation)):
        print(f"where: {line}", file=out or sys.stdout)
    return 0


def _settle(value) -> float:
    """The --settle given, or SETTLE_S; ConfigError when shorter than SETTLE_S (a service
    could still write the shard or bucket while it is copied: decision 0104)."""
    from qim.stores.redis.placement import SETTLE_S

    settle = SETTLE_S if value is None else value
    if settle < SETTLE_S:
        raise ConfigError(f"--settle must be at least {SETTLE_S:.0f} s (decision 0104: every service has read "
                          "the mark, or refuses the calls it covers, by then)")
    return settle


def run_pin_buckets(args: argparse.Namespace, out=None) -> int:
    """Pin every commit bucket where the current layout places it (module docstring)."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.bucketmove import pin_buckets

    layout = redis_layout("--redis-addr", args.redis_addr, args.environ)
    added = asyncio.run(pin_buckets(layout, connect))
    print(_pinned("pin-buckets", "commit buckets", added, 256), file=out or sys.stdout)
    return 0


def run_move_bucket(args: argparse.Namespace, out=sys.stdout) -> int:
    """Run the bucket move (module docstring); ConfigError / EngineError reach qimctl's
    main, which prints them and exits 2."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.bucketmove import move_bucket

    layout = redis_layout("--redis-addr", args.redis_addr, args.environ)
    check_addr("--to", args.to)
    settle = _settle(args.settle)

    def say(line: str) -> None:
        print(f"move-bucket: {line}", file=out, flush=True)

    asyncio.run(move_bucket(layout, connect, args.bucket, args.to, say, settle_s=settle))
    return 0


def run_pin_shards(args: argparse.Namespace, out=None) -> int:
    """Pin every shard where the current layout places it (module docstring)."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.shardmove import pin_shards

    layout = redis_layout("--redis-addr", args.redis_addr, args.environ, args.shard_count)
    added = asyncio.run(pin_shards(layout, connect))
    print(_pinned("pin-shards", "shards", added, layout.shard_count), file=out or sys.stdout)
    return 0


def run_move_shard(args: argparse.Namespace, out=sys.stdout) -> int:
    """Run the move (module docstring); ConfigError / EngineError reach qimctl's main,
    which prints them and exits 2."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.shardmove import move_shard

    layout = redis_layout("--redis-addr", args.redis_addr, args.environ, args.shard_count)
    if not args.registry:
        raise ConfigError("--registry (or $QIM_REGISTRY_REDIS_ADDR / $QIM_REDIS_ADDR) is required")
    check_addr("--registry", args.registry)
    check_addr("--to", args.to)
    settle = _settle(args.settle)

    def say(line: str) -> None:
        print(f"move-shard: {line}", file=out, flush=True)

    asyncio.run(move_shard(layout, connect, args.registry, args.shard, args.to, say, settle_s=settle))
    return 0
