"""`qimctl moderation replay --from TIME`: move the ModerationService's consumer group
(`qim-moderation-notify`, qim/services/moderation/notify.py) back to the first Outbox
record at or after TIME on every partition, so the after-send notifications from then on
are delivered again (docs/decisions/0123-moderation-notify.md; docs/operations.md
"Moderation notifications").

Kafka commits a group's offsets from outside only while the group has no member: stop
every qim-moderation node first; with a node running the broker refuses and qimctl exits
2 saying so. A TIME before the retained log start replays from the log start; a TIME
after the last record moves the group to the end (nothing is replayed).
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, TopicPartition

from qim.cli.qimctl_moderation_ban import add_parsers as add_ban_parsers
from qim.cli.qimctl_moderation_mute import add_parsers as add_mute_parsers
from qim.cli.qimctl_moderation_reports import add_parsers as add_report_parsers
from qim.cli.timearg import parse_time
from qim.cli.topic_read import KAFKA_CALL_TIMEOUT_S, QUIET_CLIENT, high_watermarks
from qim.consts import OUTBOX_TOPIC
from qim.errors import ConfigError, EngineError

GROUP_ID = "qim-moderation-notify"  # qim.services.moderation.notify.GROUP_ID (not imported: aiohttp, metrics)


def replay(bootstrap: str, from_ms: int, timeout_s: float = KAFKA_CALL_TIMEOUT_S) -> dict[int, int]:
    """Commit, for the notify group, the first offset at or after `from_ms` on every Outbox
    partition (the high watermark where none is); returns {partition: offset}. EngineError
    when the broker refuses (a qim-moderation node is still a member) or is unreachable."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP_ID, "enable.auto.commit": False, **QUIET_CLIENT}
    )
    try:
        meta = consumer.list_topics(OUTBOX_TOPIC, timeout=timeout_s).topics.get(OUTBOX_TOPIC)
        if meta is None or meta.error is not None or not meta.partitions:
            raise EngineError(f"topic {OUTBOX_TOPIC} not found on {bootstrap}")
        parts = len(meta.partitions)
        marks = high_watermarks(consumer, OUTBOX_TOPIC, parts, timeout_s)
        found = consumer.offsets_for_times(
            [TopicPartition(OUTBOX_TOPIC, p, from_ms) for p in range(parts)], timeout=timeout_s
        )
        offsets = {tp.partition: tp.offset if tp.offset >= 0 else marks[tp.partition][1] for tp in found}
        done = consumer.commit(
            offsets=[TopicPartition(OUTBOX_TOPIC, p, o) for p, o in offsets.items()], asynchronous=False
        )
        bad = [tp for tp in done or [] if tp.error is not None]
        if bad:
            raise EngineError(f"the broker refused the offsets ({bad[0].error}): stop every qim-moderation node first")
        return offsets
    except KafkaException as exc:
        raise EngineError(
            f"the broker refused the offsets ({exc.args[0]}): stop every qim-moderation node first"
        ) from None
    finally:
        consumer.close()


def run_replay(args) -> int:
    """`qimctl moderation replay`: print one line per partition, exit 0 (2 on an error, by main)."""
    if not args.kafka_bootstrap:
        raise ConfigError("--kafka-bootstrap (or QIM_KAFKA_BOOTSTRAP) is required")
    offsets = replay(args.kafka_bootstrap, parse_time(args.from_time))
    for p, o in sorted(offsets.items()):
        print(f"partition {p}: notifications from offset {o}")
    print("start the qim-moderation nodes: they deliver from these offsets")
    return 0


def add_parsers(sub, env) -> None:
    """Register `moderation replay`."""
    p = sub.add_parser(
        "moderation",
        help="the ModerationService: replay notifications, ban and unban users, group mutes, user reports, the log",
    )
    msub = p.add_subparsers(dest="moderation", required=True)
    r = msub.add_parser("replay", help="deliver the notifications again from a time (stop the nodes first)")
    r.add_argument(
        "--from",
        dest="from_time",
        required=True,
        metavar="TIME",
        help="ISO 8601 (2026-12-05T23:00:00Z; UTC when no zone) or unix ms",
    )
    r.add_argument("--kafka-bootstrap", default=env.get("QIM_KAFKA_BOOTSTRAP"))
    r.set_defaults(func=run_replay)
    add_ban_parsers(msub, env)
    add_mute_parsers(msub, env)
    add_report_parsers(msub, env)
