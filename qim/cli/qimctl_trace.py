"""`qimctl trace MESSAGE_ID` (docs/operations.md "Tracing"): where one message is on its way.

    committed     its Outbox record (offset, conversation, conversation_seq, sender,
                  audience) and its trace id: grep the services' logs for `trace=<id>`
    dispatched    each dispatch record (shard, offset, recipients), found in every
                  partition of qim.dispatch from a minute before the message's id time
    materialized  per shard: the DispatchProgress of the record (mailbox_seq, state) and
                  the shard's watermark W (materialized when W >= its offset)
    cursor        with `--cursor USER=SEQ` (a device's mailbox cursor as its app reports
                  it; cursors live on devices, the server keeps none): whether the entry
                  is below (delivered to that device) or above it (still to pull)

Reads only (Kafka by static assign, Redis GET/HMGET); nothing is committed or written.
A shard's DispatchProgress and watermark are read on its mailbox instance
(QIM_REDIS_MAILBOX_ADDRS, docs/decisions/0096; --redis-addr is the home), or with
QIM_MAILBOX_STORE=cql from the CQL MailboxStore (qim/cli/trace_cql.py).
Every Redis instance is checked (form, then a PING) before Kafka is tried; every broker call and
a read that makes no progress are bounded by --timeout (5 s), librdkafka's own log lines
are kept off stderr (qim/cli/topic_read.py QUIET_CLIENT).
Exit codes: 0 found, 1 not in the Outbox (not committed, or older than its retention),
2 a bad argument or an unreachable engine (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional

import redis
from confluent_kafka import Consumer, KafkaException, TopicPartition
from redis.backoff import NoBackoff
from redis.retry import Retry

from qim._core import ids, watermark
from qim._core.mailbox_seq import from_bytes as mseq_from_bytes
from qim.cli.envargs import check_addr, redis_layout, shard_count_arg, shard_count_default
from qim.cli.topic_read import QUIET_CLIENT, high_watermarks, read_topic
from qim.consts import DISPATCH_TOPIC, OUTBOX_TOPIC
from qim.errors import ConfigError, EngineError
from qim.proto.v1 import internal_pb2
from qim.stores.redis.keys import dp_key, wm_key
from qim.wire import dispatch as dispatch_codec
from qim.wire import outbox as outbox_codec

LOOKBACK_MS = 60_000  # the id's time is its commit time; the broker's append time is a little later
TRACE_TIMEOUT_S = 5.0  # an interactive command: an unreachable engine is told within seconds


def add_parsers(sub, env) -> None:
    """Register `trace`."""
    p = sub.add_parser("trace", help="where one message is: committed, dispatched, materialized")
    p.add_argument("message_id", help="32 hex digits")
    p.add_argument("--cursor", action="append", default=[], metavar="USER=SEQ",
                   help="a device's mailbox cursor as its app reports it (repeatable)")
    p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"), help="commit Redis (default $QIM_REDIS_ADDR)")
    p.add_argument("--kafka-bootstrap", default=env.get("QIM_KAFKA_BOOTSTRAP"))
    p.add_argument("--shard-count", type=shard_count_arg, default=shard_count_default(env),
                   help="dispatch partitions (default $QIM_MAILBOX_SHARD_COUNT, else 64)")
    p.add_argument("--timeout", type=float, default=TRACE_TIMEOUT_S,
                   help=f"seconds per engine call and per read stall (default {TRACE_TIMEOUT_S:g})")
    p.set_defaults(func=run_trace, environ=env)


def _start(consumer: Consumer, topic: str, parts: int, ms: int, timeout_s: float) -> dict[int, tuple[int, int]]:
    marks = high_watermarks(consumer, topic, parts, timeout_s)
    found = consumer.offsets_for_times([TopicPartition(topic, p, ms) for p in range(parts)], timeout=timeout_s)
    return {tp.partition: (tp.offset if tp.offset >= 0 else marks[tp.partition][1], marks[tp.partition][1])
            for tp in found}


def _find(bootstrap: str, mid: bytes, shard_count: int,
          timeout_s: float) -> tuple[Optional[tuple[int, internal_pb2.OutboxRecord]], list]:
    since = ids.split_message_id(mid)[0] - LOOKBACK_MS
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "qimctl-trace", "enable.auto.commit": False,
                         "enable.partition.eof": True, **QUIET_CLIENT})
    outbox: list[tuple[int, internal_pb2.OutboxRecord]] = []
    dispatches: list = []
    try:
        def on_outbox(p: int, offset: int, value: Optional[bytes]) -> None:
            rec = outbox_codec.decode(value or b"")
            if rec.record.message_id == mid:
                outbox.append((offset, rec))

        def on_dispatch(p: int, offset: int, value: Optional[bytes]) -> None:
            d = dispatch_codec.decode(value or b"")
            if d.coord.message_id == mid:
                dispatches.append((p, offset, d))

        read_topic(consumer, OUTBOX_TOPIC, _start(consumer, OUTBOX_TOPIC, 1, since, timeout_s), on_outbox, timeout_s)
        read_topic(consumer, DISPATCH_TOPIC, _start(consumer, DISPATCH_TOPIC, shard_count, since, timeout_s),
                   on_dispatch, timeout_s)
    except KafkaException as exc:
        raise EngineError(f"kafka at {bootstrap}: {exc}") from None
    finally:
        consumer.close()
    return (outbox[0] if outbox else None), dispatches


def run_trace(args: argparse.Namespace, out=sys.stdout) -> int:
    """Print the message's way (module doc)."""
    try:
        mid = bytes.fromhex(args.message_id)
    except ValueError:
        raise ConfigError(f"MESSAGE_ID {args.message_id!r} is not hex: 32 hex digits of a message id") from None
    try:
        ids.split_message_id(mid)  # IdError (a ValueError) for anything a writer never made
    except ValueError as exc:
        raise ConfigError(f"MESSAGE_ID {args.message_id} is not a message id a writer makes: {exc}") from None
    try:
        cursors = {int(u): int(s) for u, s in (c.split("=", 1) for c in args.cursor)}
    except ValueError:
        raise ConfigError(f"--cursor {args.cursor}: each is USER=SEQ (two integers)") from None
    if not args.kafka_bootstrap or not args.redis_addr:
        raise ConfigError("--kafka-bootstrap and --redis-addr (or their variables) are required")
    if not args.timeout > 0:
        raise ConfigError(f"--timeout {args.timeout:g} must be positive")
    layout = redis_layout("--redis-addr", args.redis_addr, args.environ, args.shard_count)
    clients: dict[str, redis.Redis] = {}
    try:
        for addr in dict.fromkeys(layout.mailbox):
            host, port = check_addr("--redis-addr", addr)
            # no retries: redis-py's default backoff would spend seconds on a refused connection
            clients[addr] = redis.Redis(host=host, port=port, socket_timeout=args.timeout,
                                        socket_connect_timeout=args.timeout, retry=Retry(NoBackoff(), 0))
            _ping(clients[addr], addr)  # Redis first: it answers (or not) at once, Kafka only after its timeout

        def shard_redis(shard: int) -> tuple[str, redis.Redis]:
            addr = layout.mailbox[layout.mailbox_index(shard)]
            return addr, clients[addr]

        if args.environ.get("QIM_MAILBOX_STORE") == "cql":  # the CQL MailboxStore (docs/decisions/0102)
            from qim.cli.trace_cql import cql_progress

            return _report(args, mid, cursors, lambda items: cql_progress(args.environ, items, args.timeout), out)
        return _report(args, mid, cursors, lambda items: _redis_progress(shard_redis, items), out)
    finally:
        for c in clients.values():
            c.close()


def _ping(r: redis.Redis, addr: str) -> None:
    try:
        r.ping()
    except redis.exceptions.RedisError as exc:
        raise EngineError(f"redis at {addr}: {exc}") from None


def _redis_progress(shard_redis, items) -> dict:
    """(shard, dispatch_id) -> (W blob or None, first mailbox_seq bytes or None, DONE) from
    the shard's mailbox instance; `shard_redis(shard)` is its (address, client)."""
    out = {}
    for shard, dispatch_id in items:
        addr, r = shard_redis(shard)
        try:
            blob = r.hget(wm_key(shard), "blob")
            seq8, state = r.hmget(dp_key(shard, dispatch_id), "seq", "st")
        except redis.exceptions.RedisError as exc:
            raise EngineError(f"redis at {addr}: {exc}") from None
        out[(shard, dispatch_id)] = (blob, seq8, state == b"DONE")
    return out


def _report(args: argparse.Namespace, mid: bytes, cursors: dict[int, int], progress, out) -> int:
    """The report lines; `progress([(shard, dispatch_id)])` reads each record's W and
    DispatchProgress from the deployment's MailboxStore (_redis_progress, cql_progress)."""
    committed, dispatches = _find(args.kafka_bootstrap, mid, args.shard_count, args.timeout)
    if committed is None:
        print(f"not committed: no Outbox record of {mid.hex()} (or older than the Outbox retention)", file=out)
        return 1
    offset, rec = committed
    m = rec.record
    audience = (f"recipients {list(rec.recipients)}" if rec.recipients
                else f"group snapshot version {rec.membership_version}")
    print(f"committed: outbox offset {offset} conversation {m.conversation_id.hex()} seq {m.conversation_seq} "
          f"sender {m.sender_id} {audience} at {time.strftime('%H:%M:%S', time.gmtime(m.created_at_ms / 1000))} "
          f"trace={rec.trace_id.hex() or '-'}", file=out)
    if not dispatches:
        print("dispatched: not yet (fanout behind, see qim_fanout_outbox_lag)", file=out)
    told: set[int] = set()
    found = progress([(shard, d.dispatch_id) for shard, _, d in dispatches])
    for shard, doff, d in sorted(dispatches, key=lambda x: x[:2]):
        told.update(d.recipients)
        print(f"dispatched: shard {shard} offset {doff} recipients {list(d.recipients)}", file=out)
        blob, seq8, done = found[(shard, d.dispatch_id)]
        w = watermark.start_offset(blob) - 1 if blob else -1
        if w >= doff or done:
            seq = mseq_from_bytes(seq8) if isinstance(seq8, bytes) else 0
            print(f"materialized: shard {shard} mailbox_seq {seq} (W={w}) for {list(d.recipients)}", file=out)
            for user in d.recipients:
                if user in cursors:
                    where = "below" if seq <= cursors[user] else "above"
                    print(f"cursor: user {user} cursor {cursors[user]}: entry {seq} is {where} it", file=out)
        else:
            print(f"materialized: not yet on shard {shard} (W={w} < offset {doff})", file=out)
    for user in sorted(set(cursors) - told):  # a cursor nobody could compare: say so, never nothing
        print(f"cursor: user {user} is not among the recipients dispatched so far", file=out)
    return 0
