"""qimctl: the admin plane (docs/design.md §2 "admin / load: qimctl ... audits").

    qimctl membership add|remove ...   qimctl message delete ...   (qim/cli/qimctl_admin.py)
    qimctl token --user U --device D   qimctl group create ...     (qim/cli/qimctl_dev.py)
    qimctl schema apply|check                                      (qim/cli/qimctl_schema.py)
    qimctl audit archive ...   qimctl retention set|get ...        (qim/cli/qimctl_archive.py)
    qimctl audit media [--orphan-ms MS]   objects against media records (qim/cli/qimctl_media.py)
    qimctl shards [--kind K] ...   the ShardRegistry: nodes, owners, owner epochs (qim/cli/qimctl_shards.py)
    qimctl redis move-shard --shard S --to H:P   move a MailboxShard (qim/cli/qimctl_redis.py)
    qimctl redis move-bucket --bucket B --to H:P   move a commit bucket (qim/cli/qimctl_redis.py)
    qimctl moderation replay --from TIME   after-send notifications again (qim/cli/qimctl_moderation.py)
    qimctl audit dispatch [--kafka-bootstrap HOST:PORT] [--redis-addr HOST:PORT[,...]]
                          [--shard-count N] [--outbox-topic T] [--dispatch-topic T]
                          [--fanout-group G] [--no-wait] [--timeout S]

Defaults come from QIM_KAFKA_BOOTSTRAP, QIM_REDIS_ADDR and QIM_MAILBOX_SHARD_COUNT.

`audit dispatch` (docs/design.md §12, seed 000 "orphan 独立审计"):
1. unless --no-wait, waits (each step bounded by --timeout) until the writer's in-flight
   commits (CommitStore.inflight_count: all 256 commit buckets, on every --redis-addr;
   one address that is the home of QIM_REDIS_CORE_ADDRS means every core instance)
   are none, then until the committed offset of the fanout group on every Outbox
   partition reaches its high watermark;
2. reads the Outbox, then every dispatch partition, from the low to the high watermark
   (snapshotted after the wait) by static assign, never a group subscription, nothing
   committed; --timeout also bounds a read that makes no progress;
3. compares them with qim.services.audit.dispatch_audit (digests only, no bodies).

Output (stdout): `read: ...` counts, one line per undecodable/unplannable record (with
its offset), up to 20 orphan details, then exactly
`audit: committed_without_dispatch=A dispatch_without_commit=B coordinate_mismatch=C wrong_partition=D`.
Exit 0 when all four are 0, 1 when any is non-zero, 2 on errors (engine unreachable,
drain timeout, bad configuration, any undecodable or unplannable record).
The audit is meant for a quiescent system: with live traffic the drain may time out,
and --no-wait can report commits whose fanout has not happened yet. An Outbox trimmed by
retention makes dispatches of trimmed commits count as dispatch_without_commit (a note
on stderr says so).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import sys
import time
import uuid
from typing import Optional, Sequence

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from qim.cli import (
    qimctl_admin,
    qimctl_archive,
    qimctl_backup,
    qimctl_dev,
    qimctl_media,
    qimctl_moderation,
    qimctl_redis,
    qimctl_schema,
    qimctl_shards,
    qimctl_trace,
)
from qim.cli.envargs import redis_layout
from qim.cli.topic_read import KAFKA_CALL_TIMEOUT_S, QUIET_CLIENT, high_watermarks, read_topic
from qim.config import Env
from qim.consts import DISPATCH_TOPIC, KAFKA_MAX_RECORD_BYTES, OUTBOX_TOPIC
from qim.errors import ConfigError, EngineError
from qim.services.audit.dispatch_audit import DispatchAudit
from qim.stores.groups import SnapshotKey
from qim.stores.open import Stores, open_stores
from qim.wire.addr import parse_addr

FANOUT_GROUP = "qim-fanout"  # qim.services.fanout.coordinator.GROUP_ID (not imported: metrics side effects)
POLL_INTERVAL_S = 0.2


class StoreReader:
    """The stores of every commit instance (--redis-addr), read from this synchronous CLI
    through a private event loop. Errors are the stores' typed errors (StoreUnavailable
    is an EngineError: exit 2)."""

    def __init__(self, addrs: Sequence[str]) -> None:
        self._loop = asyncio.new_event_loop()
        self._stores: list[tuple[str, Stores]] = [(a, open_stores(a)) for a in addrs]

    def _run(self, coro):
        return self._loop.run_until_complete(coro)

    def inflight(self) -> int:
        """Commits not yet COMMITTED on every instance."""
        total = 0
        for addr, stores in self._stores:
            try:
                total += self._run(stores.commits.inflight_count())
            except EngineError as exc:
                raise EngineError(f"redis at {addr} unreachable: {exc}") from None
        return total

    def snapshot(self, tenant: int, conversation_id: bytes, version: int):
        """Member ids of a group's snapshot at `version` (the first instance holding it),
        None when no instance does."""
        for _, stores in self._stores:
            found = self._run(stores.groups.snapshots([SnapshotKey(tenant, conversation_id, version)]))[0]
            if found is not None:
                return found
        return None

    def close(self) -> None:
        """Close every connection and the loop."""
        for _, stores in self._stores:
            self._run(stores.close())
        self._loop.close()


def wait_commits_drained(reader: StoreReader, timeout_s: float) -> None:
    """Block until no commit is in flight on any instance.

    EngineError when Redis is unreachable or commits stay in flight past timeout_s.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        pending = reader.inflight()
        if pending == 0:
            return
        if time.monotonic() > deadline:
            raise EngineError(f"{pending} commits still in flight (qim:inflight:*) after {timeout_s:g}s")
        time.sleep(POLL_INTERVAL_S)


def wait_fanout_caught_up(admin: AdminClient, consumer: Consumer, topic: str, group: str,
                          timeout_s: float, partitions: int = 1) -> None:
    """Block until `group`'s committed offset on every partition of `topic` reaches its
    high watermark (the Outbox may have several: docs/decisions/0041).

    No committed offset counts as 0 (an empty Outbox is caught up). EngineError on timeout.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        marks = high_watermarks(consumer, topic, partitions)
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
        res = admin.list_consumer_group_offsets([req])[group].result(timeout=KAFKA_CALL_TIMEOUT_S)
        behind = []
        for tp in res.topic_partitions:
            if tp.error is not None:
                raise EngineError(f"committed offset of {group} on {topic}[{tp.partition}]: {tp.error}")
            if max(tp.offset, 0) < marks[tp.partition][1]:
                behind.append(f"{topic}[{tp.partition}] offset {max(tp.offset, 0)}, high watermark "
                              f"{marks[tp.partition][1]}")
        if not behind:
            return
        if time.monotonic() > deadline:
            raise EngineError(f"fanout group {group} at {'; '.join(behind)}, after {timeout_s:g}s")
        time.sleep(POLL_INTERVAL_S)


def topic_partition_count(admin: AdminClient, topic: str, timeout_s: float = KAFKA_CALL_TIMEOUT_S) -> int:
    """Partition count from broker metadata; EngineError when the topic is absent."""
    md = admin.list_topics(topic, timeout=timeout_s)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        raise EngineError(f"topic {topic} missing: {t.error if t is not None else 'absent'}")
    return len(t.partitions)


def audit_dispatch(args: argparse.Namespace, out=sys.stdout) -> int:
    """Run the audit described in the module docstring; returns the exit code (0/1/2)."""
    quiet = {"bootstrap.servers": args.kafka_bootstrap, **QUIET_CLIENT}  # topic_read.QUIET_CLIENT: why
    admin = AdminClient(dict(quiet))
    consumer = Consumer({
        **quiet, "group.id": f"qimctl-audit-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "enable.auto.offset.store": False, "enable.partition.eof": True,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        "max.partition.fetch.bytes": KAFKA_MAX_RECORD_BYTES, "fetch.max.bytes": 2 * KAFKA_MAX_RECORD_BYTES,
        "receive.message.max.bytes": 2 * KAFKA_MAX_RECORD_BYTES + 65536,
    })
    stores = StoreReader(args.redis_addr)
    try:
        first_call_s = min(args.timeout, KAFKA_CALL_TIMEOUT_S)  # an unreachable broker fails fast
        outbox_parts = topic_partition_count(admin, args.outbox_topic, first_call_s)
        dispatch_parts = topic_partition_count(admin, args.dispatch_topic, first_call_s)
        if dispatch_parts != args.shard_count:
            raise EngineError(f"{args.dispatch_topic} has {dispatch_parts} partitions, shard count is "
                              f"{args.shard_count}")
        if not args.no_wait:
            wait_commits_drained(stores, args.timeout)
            wait_fanout_caught_up(admin, consumer, args.outbox_topic, args.fanout_group, args.timeout, outbox_parts)
        outbox_marks = high_watermarks(consumer, args.outbox_topic, outbox_parts)
        dispatch_marks = high_watermarks(consumer, args.dispatch_topic, dispatch_parts)
        for p, (low, _) in sorted(outbox_marks.items()):
            if low > 0:
                print(f"note: {args.outbox_topic}[{p}] starts at offset {low} (retention); dispatches of "
                      "trimmed commits count as dispatch_without_commit", file=sys.stderr)
        audit = DispatchAudit(args.shard_count, stores.snapshot if args.redis_addr else None)
        read_topic(consumer, args.outbox_topic, outbox_marks, lambda _p, o, v: audit.add_outbox(o, v), args.timeout)
        read_topic(consumer, args.dispatch_topic, dispatch_marks, audit.add_dispatch, args.timeout)
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise EngineError(f"kafka at {args.kafka_bootstrap}: {exc.__class__.__name__}: {exc}") from None
    finally:
        consumer.close()
        stores.close()
    result = audit.finish()
    print(result.counts_line(), file=out)
    for line in result.errors:
        print(f"error: {line}", file=out)
    for line in result.details:
        print(f"orphan: {line}", file=out)
    print(result.counters_line(), file=out, flush=True)
    if result.errors:
        return 2
    return 0 if result.clean else 1


def build_parser(environ=None) -> argparse.ArgumentParser:
    """The argparse tree; defaults read from `environ` (os.environ when None)."""
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog="qimctl", description="QIM admin plane")
    sub = parser.add_subparsers(dest="command", required=True)
    audit = sub.add_parser("audit", help="independent audits of the durable logs")
    audit_sub = audit.add_subparsers(dest="audit", required=True)
    d = audit_sub.add_parser("dispatch", help="Outbox against the dispatch log: four orphan counters")
    d.add_argument("--kafka-bootstrap", default=env.get("QIM_KAFKA_BOOTSTRAP"),
                   help="Kafka-API bootstrap (default $QIM_KAFKA_BOOTSTRAP)")
    d.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"),
                   help="commit Redis host:port, comma-separated for several (default $QIM_REDIS_ADDR)")
    d.add_argument("--shard-count", default=env.get("QIM_MAILBOX_SHARD_COUNT"),
                   help="mailbox shard count = dispatch partitions (default $QIM_MAILBOX_SHARD_COUNT or 64)")
    d.add_argument("--outbox-topic", default=OUTBOX_TOPIC)
    d.add_argument("--dispatch-topic", default=DISPATCH_TOPIC)
    d.add_argument("--fanout-group", default=FANOUT_GROUP, help="consumer group whose Outbox offset is awaited")
    d.add_argument("--no-wait", action="store_true", help="skip waiting for commits and fanout to drain")
    d.add_argument("--timeout", type=float, default=60.0, help="seconds per wait step / read stall (default 60)")
    d.set_defaults(func=audit_dispatch, environ=env)
    qimctl_archive.add_audit_parser(audit_sub, env)
    qimctl_media.add_audit_parser(audit_sub, env)
    qimctl_admin.add_parsers(sub, env)
    qimctl_dev.add_parsers(sub, env)
    qimctl_schema.add_parsers(sub, env)
    qimctl_archive.add_parsers(sub, env)
    qimctl_backup.add_parsers(sub, env)
    qimctl_trace.add_parsers(sub, env)
    qimctl_shards.add_parser(sub, env)
    qimctl_redis.add_parsers(sub, env)
    qimctl_moderation.add_parsers(sub, env)
    _name_choices(parser)
    return parser


def _name_choices(parser: argparse.ArgumentParser) -> None:
    """Give every sub-command level the metavar `{a,b,...}` of its choices, recursively.

    argparse names a missing sub-command by its `dest` ("the following arguments are
    required: redis_command"), a word the user never typed and cannot act on; with the
    metavar it lists what may follow ("required: {ban,unban,...}"). The usage line is the
    same as argparse's own.
    """
    for action in parser._actions:  # argparse has no public walk of its sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            action.metavar = "{" + ",".join(action.choices) + "}"
            for child in dict.fromkeys(action.choices.values()):
                _name_choices(child)


def _validate(args: argparse.Namespace) -> None:
    """Normalise the audit arguments in place; ConfigError naming the flag otherwise."""
    if not args.kafka_bootstrap:
        raise ConfigError("--kafka-bootstrap (or QIM_KAFKA_BOOTSTRAP) is required")
    try:
        args.shard_count = Env({"QIM_MAILBOX_SHARD_COUNT": args.shard_count or ""}).shard_count()
    except ConfigError as exc:
        raise ConfigError(f"--shard-count / {exc}") from None
    if args.timeout <= 0:
        raise ConfigError("--timeout must be positive")
    addrs = tuple(a.strip() for a in (args.redis_addr or "").split(",") if a.strip())
    if not addrs and not args.no_wait:
        raise ConfigError("--redis-addr (or QIM_REDIS_ADDR) is required unless --no-wait")
    for addr in addrs:
        try:
            parse_addr(addr)
        except ValueError as exc:
            raise ConfigError(f"--redis-addr: {exc}") from None
    if len(addrs) == 1:
        # the home of a deployment of several instances: the commit buckets are on every
        # core instance (decision 0096), each read by a store of its own
        addrs = redis_layout("--redis-addr", addrs[0], getattr(args, "environ", os.environ)).core
    args.redis_addr = addrs


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point (`qimctl`); returns the process exit code."""
    try:
        # the parser's defaults read QIM_* variables: a bad one is a ConfigError naming it
        args = build_parser().parse_args(argv)
        if args.command == "audit" and args.audit == "dispatch":
            _validate(args)
        return args.func(args)
    except (ConfigError, EngineError) as exc:
        print(f"qimctl: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
