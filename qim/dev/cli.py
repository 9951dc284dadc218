"""`qim-dev`: development helpers.

    qim-dev engines up     [--dir DIR] [--shard-count N] [--brokers 1|3] [--outbox-partitions N]
                           [--without-cassandra] [--cql-nodes 1|3] [--redis-instances N] [--without-s3]
                                          start Redis (one, or N standalone instances) + Kafka
                                          (one broker or a KRaft cluster of three) + Cassandra
                                          (one node or three, RF 3) + s3proxy (the object
                                          store: qim/dev/engines_s3.py), print env file
    qim-dev engines down   [--dir DIR]    stop exactly the recorded pids
    qim-dev engines status [--dir DIR]    exit 1 unless every running engine answers

    qim-dev stack up|down|status [--dir DIR] [--engines-dir D]   the QIM services
    qim-dev stack restart NAME                                   one service, same ports
    qim-dev stack roll                                           every node, one at a time, readers first

DIR defaults to `<repo>/.qim/engines` (engines) and `<repo>/.qim/stack` (services). Load
the addresses with `set -a; . DIR/engines.env; set +a`. A user's mistake (a taken port,
a missing engine, a corrupt state file) prints one `qim-dev: error: …` line and exits 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from qim.dev import progress, stack_cli
from qim.dev.engines import EngineSet, cassandra_wanted, default_dir
from qim.dev.engines_s3 import s3_wanted
from qim.dev.envshow import shown
from qim.errors import EngineError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qim-dev", description="QIM development helpers")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO)")
    sub = p.add_subparsers(dest="group", required=True)
    eng = sub.add_parser("engines", help="private Redis + Kafka (+ Cassandra) for development")
    eng.add_argument("action", choices=["up", "down", "status"])
    eng.add_argument("--dir", default=None, help=f"engine directory (default {default_dir()})")
    eng.add_argument("--shard-count", type=int, default=None,
                     help="qim.dispatch partitions (default: recorded, else 64)")
    eng.add_argument("--brokers", type=int, choices=(1, 3), default=None,
                     help="up: Kafka brokers: 1, or a KRaft cluster of 3 (replication factor 3, min.insync.replicas "
                          "2) (default: recorded, else 1)")
    eng.add_argument("--outbox-partitions", type=int, default=None,
                     help="up: qim.outbox partitions, 1..256 (default: recorded, else 1; docs/decisions/0041)")
    eng.add_argument("--with-cassandra", dest="with_cassandra", action="store_const", const=True, default=None,
                     help="up: also start Cassandra 5.0, the local stand-in for ScyllaDB (the archive tier) "
                          "(default: $QIM_DEV_WITH_CASSANDRA, else yes)")
    eng.add_argument("--without-cassandra", dest="with_cassandra", action="store_const", const=False,
                     help="up: Redis and Kafka only (no archive tier)")
    eng.add_argument("--cql-nodes", type=int, choices=(1, 3), default=None,
                     help="up: Cassandra nodes: 1 (keyspaces RF 1, QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1), or a cluster "
                          "of 3 on 127.0.0.1-3 (keyspaces RF 3) (default: recorded, else 1)")
    eng.add_argument("--redis-instances", type=int, default=None, metavar="N",
                     help="up: N standalone Redis instances (own ports and dirs; core = all N, mailbox = all N "
                          "rotated by one: QIM_REDIS_CORE_ADDRS, QIM_REDIS_MAILBOX_ADDRS; docs/decisions/0098) "
                          "(default: recorded, else 1)")
    eng.add_argument("--without-s3", dest="with_s3", action="store_false", default=None,
                     help="up: no object store (s3proxy), so `stack up` starts no MediaService "
                          "(default: $QIM_DEV_WITH_S3, else yes)")
    eng.add_argument("--timeout", type=float, default=15.0,
                     help="down: seconds between SIGTERM and SIGKILL")
    stack_cli.add_parser(sub)
    return p


def _up(args) -> int:
    t0 = time.monotonic()
    progress.enable("engines")  # one stderr line per engine ready (docs/decisions/0085)
    with_cassandra = args.with_cassandra if args.with_cassandra is not None else cassandra_wanted(default=True)
    count = args.shard_count
    if count is not None and (count < 1 or count & (count - 1)):  # 0 is refused, never taken as the default
        raise EngineError(f"--shard-count must be a power of two (1, 2, 4, ...), got {count}")
    if args.cql_nodes is not None and not with_cassandra:
        raise EngineError("--cql-nodes needs Cassandra (drop --without-cassandra)")
    if args.outbox_partitions is not None and not 1 <= args.outbox_partitions <= 256:
        raise EngineError(f"--outbox-partitions must be 1..256, got {args.outbox_partitions}")
    es = EngineSet.up(args.dir, args.shard_count, with_cassandra=with_cassandra, brokers=args.brokers,
                      outbox_partitions=args.outbox_partitions, cql_nodes=args.cql_nodes,
                      redis_instances=args.redis_instances,
                      with_s3=args.with_s3 if args.with_s3 is not None else s3_wanted(default=True))
    print(shown(es.env_path.read_text()), end="")  # the file keeps the secrets, the terminal does not
    print(f"# engines up in {time.monotonic() - t0:.1f}s; env file:")
    print(es.env_path)
    return 0


def _down(args) -> int:
    es = EngineSet.load(args.dir or default_dir())
    if es is None:
        print(f"no engines recorded in {args.dir or default_dir()}")
        return 0
    es.down(args.timeout)
    print(f"engines in {es.dir} stopped")
    return 0


def _status(args) -> int:
    es = EngineSet.load(args.dir or default_dir())
    if es is None:
        print(f"no engines recorded in {args.dir or default_dir()}")
        return 1
    ok = True
    for r in es.status():
        state = "up" if r["healthy"] else ("not answering" if r["alive"] else "down")
        # Cassandra is opt-in: stopped, it is not a fault of the set
        ok &= r["healthy"] or (r["name"] == "cassandra" and not r["alive"])
        print(f"{r['name']:9} pid={r['pid'] or '-':<8} alive={str(r['alive']).lower():5} "
              f"{state:13} {r['addr']}  rss={r['rss_mib']}MiB")
    if es.env_path.exists():
        print(f"env file: {es.env_path}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `qim-dev` console script; returns the exit code.

    EngineError and OSError (a directory we cannot write, ...) are reported as one
    `qim-dev: error: …` message with exit code 2, never as a traceback.
    """
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.group == "stack":
            return stack_cli.run(args)
        return {"up": _up, "down": _down, "status": _status}[args.action](args)
    except (EngineError, OSError) as e:
        print(f"qim-dev: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
