"""`qimctl backup --to DIR` and `qimctl restore --from DIR` (docs/operations.md "Backup and
restore"; docs/decisions/0037-ops-backups.md says why this order makes a consistent cut).

backup, on a running stack, nothing paused:
  1. Redis: a point-in-time RDB (qim/cli/backup_redis.py). THE BACKUP POINT: every
     message acknowledged before it started is COMMITTED in this snapshot.
  2. Kafka: the Outbox and the dispatch log up to the watermarks seen after step 1, and
     the fanout position (qim/cli/backup_kafka.py): a superset of what step 1 refers to.
  3. The archive tier (when QIM_SCYLLA_ADDRS names one): every table with its cells'
     write times and TTLs (qim/cli/backup_cql.py), a superset of what step 1 trimmed.
  4. manifest.json (shard count, what was taken, in which order).
restore, into an EMPTY stack whose services are not running (engines up):
  1. Redis from the RDB.
  2. The cut: an Outbox record whose conversation_seq is above the restored
     conversation's last sequence was reserved after the backup point; it is left out,
     with every dispatch record of its message_id (nobody was told of it before the
     backup point; kept, it would collide with the next send's conversation_seq).
  3. Kafka: the kept records (their offsets preserved up to the first left-out one);
     the fanout position mapped to the kept Outbox; the session and archiver
     checkpoints bound to the new broker's cluster and topic ids (same offsets).
  4. The archive tier (a backup that has one needs QIM_SCYLLA_ADDRS): the schema, then
     the rows, less those of the left-out messages, archive bounds cut to the restored
     sequences.
  After step 1, every MailboxShard moves to a new shard_epoch (docs/decisions/0075):
  devices whose cursors are of the backed-up life REBUILD once instead of keeping
  messages the cut left out or skipping the ones that reuse their numbers.
  Then start the services: fanout, mailbox and session resume from the restored
  positions (anything replayed is absorbed as DUPLICATE), CommitRecovery finishes the
  commits that were in flight at the backup point.

Several Redis instances (QIM_REDIS_CORE_ADDRS / QIM_REDIS_MAILBOX_ADDRS naming more than
one, docs/decisions/0096) are refused (exit 2, naming them): one RDB per instance taken
one after another is no consistent cut (docs/decisions/0101), and backing up the home
alone would lose every other instance's keys silently.

Exit codes: 0 done, 2 a bad argument, a non-empty target or an engine error (one line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import redis

from qim.cli import backup_cql, backup_kafka, backup_redis
from qim.cli.envargs import redis_layout, shard_count_arg, shard_count_default
from qim.cli.qimctl_schema import add_scylla_args, scylla_from
from qim.config.tier import ScyllaConfig
from qim.consts import DISPATCH_TOPIC, OUTBOX_TOPIC
from qim.errors import ConfigError, EngineError
from qim.infra.kafka.bridge import topic_identity
from qim.stores.errors import StorageError
from qim.stores.redis.keys import CommitKeys, archive_checkpoint_key, archive_partition_checkpoint_key
from qim.wire import dispatch as dispatch_codec
from qim.wire import outbox as outbox_codec
from qim.wire.addr import parse_addr

MANIFEST = "manifest.json"
FORMAT = 1


def add_parsers(sub, env) -> None:
    """Register `backup` and `restore`."""
    for name, what in (("backup", "a consistent backup of Redis and Kafka of a running stack"),
                       ("restore", "a backup into an empty stack (engines up, services not started)")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--to" if name == "backup" else "--from", dest="dir", required=True, help="backup directory")
        p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"), help="commit Redis (default $QIM_REDIS_ADDR)")
        p.add_argument("--kafka-bootstrap", default=env.get("QIM_KAFKA_BOOTSTRAP"),
                       help="Kafka bootstrap (default $QIM_KAFKA_BOOTSTRAP)")
        p.add_argument("--shard-count", type=shard_count_arg, default=shard_count_default(env),
                       help="qim.dispatch partitions (default $QIM_MAILBOX_SHARD_COUNT or 64)")
        add_scylla_args(p)
        p.set_defaults(func=run_backup if name == "backup" else run_restore, environ=env)


def _check(args: argparse.Namespace) -> Path:
    for flag, value in (("--redis-addr", args.redis_addr), ("--kafka-bootstrap", args.kafka_bootstrap)):
        if not value:
            raise ConfigError(f"{flag} is required")
    layout = redis_layout("--redis-addr", args.redis_addr, args.environ, args.shard_count)
    if len(layout.addrs) > 1:
        raise ConfigError(f"{args.command} of several Redis instances ({', '.join(layout.addrs)}: "
                          "QIM_REDIS_CORE_ADDRS / QIM_REDIS_MAILBOX_ADDRS) is not supported: a consistent cut "
                          "across instances is not built (docs/decisions/0101); nothing was written")
    return Path(args.dir)


def _scylla(args: argparse.Namespace) -> ScyllaConfig | None:
    """The archive tier's configuration, None when neither QIM_SCYLLA_ADDRS nor
    --scylla-addrs names one (a stack without the tier)."""
    if not (args.scylla_addrs or args.environ.get("QIM_SCYLLA_ADDRS")):
        return None
    return scylla_from(args, args.environ)


def run_backup(args: argparse.Namespace, out=sys.stdout) -> int:
    """Steps of the module doc, in order."""
    dir = _check(args)
    if dir.exists() and any(dir.iterdir()):
        raise ConfigError(f"{dir} is not empty: a backup goes into a new directory")
    dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    size = backup_redis.snapshot(args.redis_addr, dir / "redis.rdb")
    meta = backup_kafka.export(args.kafka_bootstrap, dir / "kafka", args.shard_count)
    counts = {t: sum(hi - lo for lo, hi in info["marks"].values()) for t, info in meta["topics"].items()}
    scylla = _scylla(args)
    try:
        rows = backup_cql.export(scylla, dir / "cql") if scylla is not None else None
    except StorageError as exc:
        raise EngineError(f"backup: archive tier: {exc.message}") from None
    (dir / MANIFEST).write_text(json.dumps({
        "format": FORMAT, "backup_point_unix_s": started, "shard_count": args.shard_count,
        "order": ["redis", "kafka", *(["cql"] if rows is not None else [])], "redis_rdb_bytes": size,
        "kafka_records": counts, "cql_rows": rows}, indent=2))
    archive = f" archive={sum(rows.values())} rows" if rows is not None else " (no archive tier)"
    print(f"backup: {dir} redis={size} bytes outbox={counts[OUTBOX_TOPIC]} dispatch={counts[DISPATCH_TOPIC]} "
          f"records{archive}; backup point {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(started))}", file=out)
    return 0


def _left_out(r: redis.Redis, dir: Path) -> tuple[set[bytes], set[bytes]]:
    """(message ids of the Outbox records reserved after the backup point (module doc),
    message ids of those kept)."""
    recs = []
    for _, value in backup_kafka.records(dir / "kafka", OUTBOX_TOPIC, 0):
        rec = outbox_codec.decode(value).record
        keys = CommitKeys(int.from_bytes(rec.tenant_id, "big"), rec.conversation_id)
        recs.append((rec.message_id, rec.conversation_seq, keys.seq()))
    out: set[bytes] = set()
    for i in range(0, len(recs), 1000):
        chunk = recs[i:i + 1000]
        last = r.mget([key for _, _, key in chunk])
        out.update(mid for (mid, seq, _), have in zip(chunk, last) if seq > int(have or 0))
    return out, {mid for mid, _, _ in recs} - out


def _rebind(r: redis.Redis, bootstrap: str) -> int:
    """Bind the session and archiver checkpoints to the new broker's topic ids."""
    cluster, dispatch_id, parts = asyncio.run(topic_identity(bootstrap, DISPATCH_TOPIC))
    _, outbox_id, outbox_parts = asyncio.run(topic_identity(bootstrap, OUTBOX_TOPIC))
    n = 0
    for key in r.scan_iter(match="qim:session:ckpt:*"):
        r.hset(key, "bind", f"{cluster}|{dispatch_id}|{parts}")
        n += 1
    # the archiver's positions: one per Outbox partition (docs/decisions/0041-scale-outbox-partitions.md),
    # and the single-partition key of before, which partition 0 resumes from
    archive = [archive_partition_checkpoint_key(p) for p in range(outbox_parts)] + [archive_checkpoint_key()]
    for key in archive:
        if r.exists(key):
            r.hset(key, "bind", f"{cluster}|{outbox_id}|{outbox_parts}")
            n += 1
    return n


def run_restore(args: argparse.Namespace, out=sys.stdout) -> int:
    """Steps of the module doc, in order."""
    dir = _check(args)
    try:
        manifest = json.loads((dir / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{dir} is not a backup ({MANIFEST}: {exc})") from None
    if manifest.get("format") != FORMAT or manifest["shard_count"] != args.shard_count:
        raise ConfigError(f"backup format {manifest.get('format')} with {manifest.get('shard_count')} shards; "
                          f"this stack runs format {FORMAT} with {args.shard_count} shards")
    scylla = _scylla(args)
    if "cql" in manifest["order"] and scylla is None:
        raise ConfigError("this backup has the archive tier: QIM_SCYLLA_ADDRS (or --scylla-addrs) is required")
    # every target checked empty before anything is written (Redis refuses a non-empty one
    # itself, first): a refused restore leaves the target as it was
    backup_kafka.check_empty(args.kafka_bootstrap, dir / "kafka")
    if scylla is not None and "cql" in manifest["order"]:
        try:
            backup_cql.check_empty(scylla)
        except StorageError as exc:
            raise EngineError(f"restore: archive tier: {exc.message}") from None
    keys = backup_redis.restore(args.redis_addr, dir / "redis.rdb", dir / "restore-tmp")
    host, port = parse_addr(args.redis_addr)
    r = redis.Redis(host=host, port=port, socket_timeout=30)
    try:
        dropped, kept_ids = _left_out(r, dir)
        # the restored mailboxes are a rewind: a new life, so the cursors of devices that
        # synced past the backup point are answered CURSOR_EXPIRED (docs/decisions/0075)
        epoch = backup_redis.move_shard_epochs(r, args.shard_count, time.time())

        def keep(topic: str, p: int, offset: int, value) -> bool:
            if topic == OUTBOX_TOPIC:
                return outbox_codec.decode(value).record.message_id not in dropped
            return dispatch_codec.decode(value).coord.message_id in kept_ids  # none without its record

        moved = backup_kafka.import_(args.kafka_bootstrap, dir / "kafka", keep)
        meta = json.loads((dir / "kafka" / backup_kafka.META).read_text())
        if meta["fanout_position"] is not None:  # kept records are renumbered from the log start on
            old, low = meta["fanout_position"], meta["topics"][OUTBOX_TOPIC]["marks"]["0"][0]
            backup_kafka.set_fanout_position(
                args.kafka_bootstrap, low + sum(1 for o, _ in moved[(OUTBOX_TOPIC, 0)] if o < old))
        rebound = _rebind(r, args.kafka_bootstrap)
        rows = None
        if scylla is not None and "cql" in manifest["order"]:  # checked above: the tier is named
            def seq_of(tenant: bytes, conversation_id: bytes) -> int:
                return int(r.get(CommitKeys(int.from_bytes(tenant, "big"), conversation_id).seq()) or 0)

            rows = backup_cql.restore(scylla, dir / "cql", dropped, seq_of)
    except EngineError:
        raise
    except StorageError as exc:  # StoreCorrupt: the target keyspace refused a statement
        raise EngineError(f"restore: archive tier: {exc.message}") from None
    except (redis.exceptions.RedisError, ValueError) as exc:
        raise EngineError(f"restore: {exc}") from None
    finally:
        r.close()
    kept = sum(len(v) for (t, _), v in moved.items() if t == OUTBOX_TOPIC)
    archive = f"; archive {sum(rows.values())} rows" if rows is not None else ""
    print(f"restore: {keys} Redis keys; outbox {kept} records kept, {len(dropped)} reserved after the backup "
          f"point left out; {rebound} checkpoint(s) bound to the new broker{archive}; mailbox shards at "
          f"shard_epoch {epoch} (devices REBUILD once); start the services now", file=out)
    return 0
