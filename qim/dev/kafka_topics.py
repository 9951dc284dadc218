"""The QIM topics of a private Kafka broker (qim.dev.kafka_engine): `qim.outbox`,
`qim.dispatch` and the compacted `qim.presence`, created with KAFKA_TOPIC_CONFIG (the
record limit, LogAppendTime) or, when they exist, checked and configured the same; and
the AdminClient whose librdkafka log goes to Python logging.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from qim.consts import DISPATCH_TOPIC, KAFKA_TOPIC_CONFIG, OUTBOX_TOPIC, PRESENCE_TOPIC
from qim.errors import EngineError

log = logging.getLogger(__name__)
_rdkafka_log = logging.getLogger("qim.dev.librdkafka")


def admin_client(bootstrap: str, **extra) -> AdminClient:
    """AdminClient whose librdkafka log goes to Python logging, not stderr."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _rdkafka_log,
            "socket.connection.setup.timeout.ms": 2000}
    conf.update(extra)
    return AdminClient(conf)


def create_topics(bootstrap: str, shard_count: int, timeout: float = 60.0, outbox_partitions: int = 1,
                  replicas: int = 1) -> dict[str, int]:
    """Create `qim.outbox` (`outbox_partitions`: 1 by default, docs/decisions/0041),
    `qim.dispatch` (shard_count partitions) and `qim.presence` (shard_count partitions,
    compacted: the PresenceDirectory, docs/decisions/0042).

    All get KAFKA_TOPIC_CONFIG (record limit, LogAppendTime) and replication factor
    `replicas` (3 on a three-broker cluster, with min.insync.replicas 2). Existing topics
    are accepted if their partition count matches; their configuration is set to
    KAFKA_TOPIC_CONFIG (an engines dir from before LogAppendTime). Returns {topic:
    partitions}. Raises EngineError on a mismatch or if the broker refuses.
    """
    want = {OUTBOX_TOPIC: outbox_partitions, DISPATCH_TOPIC: shard_count, PRESENCE_TOPIC: shard_count}
    config = dict(KAFKA_TOPIC_CONFIG)
    if replicas >= 3:
        config["min.insync.replicas"] = "2"
    configs = {t: dict(config) for t in want}
    configs[PRESENCE_TOPIC]["cleanup.policy"] = "compact"
    admin = admin_client(bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10)
        have = {t: len(md.topics[t].partitions) for t in want if t in md.topics}
        bad = {t: n for t, n in have.items() if n != want[t]}
        if bad:
            raise EngineError(f"kafka {bootstrap}: topics exist with other partition counts "
                              f"{bad}, wanted {want}; remove the engines dir to recreate")
        missing = [t for t in want if t not in have]
        if not missing:
            _configure(admin, bootstrap, list(want))
            return want
        new = [NewTopic(t, num_partitions=want[t], replication_factor=replicas, config=configs[t]) for t in missing]
        errors = []
        for topic, fut in admin.create_topics(new, request_timeout=15).items():
            try:
                fut.result()
                log.info("created topic %s (%d partitions)", topic, want[topic])
            except KafkaException as e:
                if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    errors.append(f"{topic}: {e.args[0]}")
        if time.monotonic() > deadline:
            raise EngineError(f"kafka {bootstrap}: topics {missing} not ready within "
                              f"{timeout:.0f}s: {errors or 'not in metadata yet'}")
        # errors: a just-started controller may still be electing itself; no errors:
        # re-read metadata to confirm the partition counts once it has propagated
        time.sleep(0.5 if errors else 0.1)


def _configure(admin: AdminClient, bootstrap: str, topics: list[str]) -> None:
    """Set KAFKA_TOPIC_CONFIG on existing `topics` (incremental: other settings stay).
    EngineError when the broker refuses."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in KAFKA_TOPIC_CONFIG.items()])
        for t in topics]
    for res, fut in admin.incremental_alter_configs(resources, request_timeout=15).items():
        try:
            fut.result()
        except KafkaException as e:
            raise EngineError(f"kafka {bootstrap}: configuring {res.name} refused: {e.args[0]}") from None
