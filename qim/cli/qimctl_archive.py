"""qimctl commands of the archive tier (docs/decisions/0023; docs/operations.md "The archive tier").

    qimctl audit archive [--kafka-bootstrap H:P] [--redis-addr H:P] [--scylla-addrs H:P[,...]]
                         [--keyspace K] [--no-wait] [--timeout S]
    qimctl retention set --conversation HEX32 --class default|ephemeral_24h|compliance_hold [--tenant T]
    qimctl retention get --conversation HEX32 [--tenant T]

`audit archive`: unless --no-wait, waits (each step bounded by --timeout) until no commit
is in flight and the HistoryArchiver's position reached the Outbox high watermark; then
reads the Outbox from its low to its high watermark (static assign, nothing committed)
and compares every message with its two archived rows
(qim/services/audit/archive_audit.py). Prints up to 20 detail lines, then exactly
`audit archive: outbox_messages=N archived=A expired=E missing=0 index_missing=0
mismatched=0 seq_conflicts=0`. Exit 0 when the four orphan counters are 0, 1 otherwise,
2 when it cannot run (engine unreachable, wait timeout, an undecodable record).

`retention set` stores a conversation's retention class in Redis, where the archiver
(row TTL of what it archives from now on) and the writer's trimmer (hot window) read it;
rows archived before keep their TTL. Defaults from QIM_REDIS_ADDR, QIM_KAFKA_BOOTSTRAP,
QIM_SCYLLA_*, QIM_TENANT_ID, QIM_DEFAULT_HISTORY_RETENTION_DAYS. With several Redis
instances (QIM_REDIS_CORE_ADDRS / QIM_REDIS_MAILBOX_ADDRS, docs/decisions/0096) every
key is read and written on its instance; --redis-addr is the home (the first core).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid

from qim.cli.envargs import redis_layout, tenant_arg, tenant_default
from qim.cli.qimctl_schema import add_scylla_args, scylla_from
from qim.cli.topic_read import high_watermarks, read_topic
from qim.config import Env
from qim.config.tier import TierConfig
from qim.consts import KAFKA_MAX_RECORD_BYTES, OUTBOX_TOPIC, RETENTION_CLASSES
from qim.errors import ConfigError, EngineError
from qim.services.audit.archive_audit import ArchiveAudit
from qim.stores.errors import StorageError

READ_CHUNK = 256
POLL_S = 0.2


def add_audit_parser(audit_sub, env) -> None:
    """Register `audit archive` under qimctl's `audit` subcommands."""
    a = audit_sub.add_parser("archive", help="Outbox against the archived rows: four orphan counters")
    a.add_argument("--kafka-bootstrap", default=env.get("QIM_KAFKA_BOOTSTRAP"))
    a.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
    add_scylla_args(a)
    a.add_argument("--no-wait", action="store_true", help="skip waiting for commits and the archiver")
    a.add_argument("--timeout", type=float, default=60.0, help="seconds per wait step / read stall (default 60)")
    a.set_defaults(func=audit_archive, environ=env)


def add_parsers(sub, env) -> None:
    """Register `retention set|get` under the qimctl subcommands."""
    p = sub.add_parser("retention", help="a conversation's history retention class")
    actions = p.add_subparsers(dest="action", required=True)
    for action in ("set", "get"):
        a = actions.add_parser(action)
        a.add_argument("--conversation", required=True, help="conversation_id, 32 hex")
        if action == "set":
            a.add_argument("--class", dest="retention_class", required=True, choices=RETENTION_CLASSES)
        a.add_argument("--tenant", type=tenant_arg, default=tenant_default(env))
        a.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
        a.set_defaults(func=run_retention, environ=env)


def run_retention(args: argparse.Namespace, out=None) -> int:
    """`qimctl retention set|get`; returns the exit code."""
    out = out or sys.stdout
    from qim.stores.redis.archive import RedisArchiveState
    from qim.stores.redis.topology import topology_of

    try:
        conv = bytes.fromhex(args.conversation)
    except ValueError:
        conv = b""
    if len(conv) != 16 or not any(conv):
        raise ConfigError("--conversation must be 32 hex digits of a non-zero conversation_id")
    layout = redis_layout("--redis-addr", args.redis_addr, args.environ)

    async def run() -> str:
        topology = topology_of(layout)  # the class is on the conversation's core instance
        try:
            state = RedisArchiveState(topology)
            if args.action == "set":
                await state.set_retention(args.tenant, conv, args.retention_class)
            return (await state.retention_classes(args.tenant, [conv]))[0]
        finally:
            await topology.aclose()

    print(f"retention: conversation={conv.hex()} class={asyncio.run(run())}", file=out)
    return 0


def _outbox_consumer(bootstrap: str):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "log_level": 0, "group.id": f"qimctl-audit-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "enable.auto.offset.store": False, "enable.partition.eof": True,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                     "max.partition.fetch.bytes": KAFKA_MAX_RECORD_BYTES, "fetch.max.bytes": 2 * KAFKA_MAX_RECORD_BYTES,
                     "receive.message.max.bytes": 2 * KAFKA_MAX_RECORD_BYTES + 65536})


async def _wait(tier, commits, consumer, timeout_s: float, partitions: int) -> None:
    deadline = time.monotonic() + timeout_s
    while await commits.inflight_count():
        if time.monotonic() > deadline:
            raise EngineError(f"commits still in flight after {timeout_s:g}s")
        await asyncio.sleep(POLL_S)
    deadline = time.monotonic() + timeout_s
    while True:
        marks = await asyncio.to_thread(high_watermarks, consumer, OUTBOX_TOPIC, partitions)
        behind = []
        for p, (_, high) in sorted(marks.items()):
            pos = await tier.state.position(p)
            if (pos or 0) < high:
                behind.append(f"outbox[{p}] offset {pos}, high watermark {high}")
        if not behind:
            return
        if time.monotonic() > deadline:
            raise EngineError(f"archiver at {'; '.join(behind)}, after {timeout_s:g}s")
        await asyncio.sleep(POLL_S)


async def _audit(args: argparse.Namespace, tier_cfg: TierConfig) -> ArchiveAudit:
    from qim.infra.kafka.bridge import topic_partitions
    from qim.stores.open import open_archive_tier, open_stores

    tier = open_archive_tier(args.redis_addr, scylla_from(args, args.environ))
    stores = open_stores(args.redis_addr)
    consumer = _outbox_consumer(args.kafka_bootstrap)
    try:
        await tier.check()
        parts = await topic_partitions(args.kafka_bootstrap, OUTBOX_TOPIC)
        if not args.no_wait:
            await _wait(tier, stores.commits, consumer, args.timeout, parts)
        audit = ArchiveAudit(tier_cfg.default_retention_days, int(time.time() * 1000))
        marks = await asyncio.to_thread(high_watermarks, consumer, OUTBOX_TOPIC, parts)
        await asyncio.to_thread(read_topic, consumer, OUTBOX_TOPIC, marks,
                                lambda _p, o, v: audit.add_outbox(o, v or b""), args.timeout)
        classes = {}
        by_tenant: dict[int, list[bytes]] = {}
        for t, c in audit.conversations():
            by_tenant.setdefault(t, []).append(c)
        for t, convs in by_tenant.items():
            classes.update({(t, c): cls for c, cls in zip(convs, await tier.state.retention_classes(t, convs))})
        want = audit.expected(classes)
        for i in range(0, len(want), READ_CHUNK):
            chunk = want[i:i + READ_CHUNK]
            rows = await asyncio.gather(*(tier.archive.records(int.from_bytes(r.tenant_id, "big"), [r.message_id])
                                          for r in chunk))
            idx = await asyncio.gather(*(tier.archive.history_rows(int.from_bytes(r.tenant_id, "big"),
                                                                   r.conversation_id, [r.conversation_seq])
                                         for r in chunk))
            for r, rec, at in zip(chunk, rows, idx):
                audit.check(r, rec[0], at[r.conversation_seq])
        return audit
    finally:
        consumer.close()
        await stores.close()
        await tier.close()


def audit_archive(args: argparse.Namespace, out=None) -> int:
    """Run the audit described in the module docstring; returns the exit code (0/1/2)."""
    out = out or sys.stdout
    if not args.kafka_bootstrap:
        raise ConfigError("--kafka-bootstrap (or QIM_KAFKA_BOOTSTRAP) is required")
    args.redis_addr = redis_layout("--redis-addr", args.redis_addr, args.environ)
    if args.timeout <= 0:
        raise ConfigError("--timeout must be positive")
    tier_cfg = TierConfig.from_env(Env(dict(args.environ)))
    try:
        audit = asyncio.run(_audit(args, tier_cfg))
    except StorageError as exc:
        if isinstance(exc, EngineError):
            raise
        print(f"qimctl: error: {exc.message}", file=sys.stderr)
        return 2
    result = audit.result
    for line in result.errors:
        print(f"error: {line}", file=out)
    for line in result.details:
        print(f"orphan: {line}", file=out)
    print(result.line(), file=out, flush=True)
    if result.errors:
        return 2
    return 0 if result.clean else 1
