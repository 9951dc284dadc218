"""Kafka half of `qimctl backup` / `qimctl restore` (docs/decisions/0037-ops-backups.md):
the Outbox (`qim.outbox`) and the dispatch log (`qim.dispatch`) record by record, and the
FanoutCoordinator's committed Outbox position. Nothing else in Kafka is state: the
mailbox, session and archiver positions live in Redis.

`export(bootstrap, dir, shard_count)`: every record between each partition's low and high
watermark (taken when the export starts: the dispatch log's first, then the Outbox's) into `dir/<topic>-<partition>.rec` (per record:
offset u64, key length u32 (0: keys are not kept, no consumer reads them; partitions are
explicit), value length u32, value; big-endian) and `dir/kafka.json` (watermarks, the
fanout position).

`import_(bootstrap, dir, keep)`: into EMPTY topics of a new broker, partition by
partition in offset order, the records `keep(topic, partition, offset, value)` accepts.
A partition whose backup starts at offset L > 0 (retention removed the head) is padded
with L empty records that are then deleted (DeleteRecords), so every kept record before
the first dropped one has its old offset: the offsets Redis holds (watermarks,
checkpoints, OUTBOXED evidence) point at the same records. Returns {(topic, partition):
[(old offset, new offset)]} of the kept records.

EngineError (one line) for a broker that cannot be reached, a topic that is not empty
or a file that does not read back.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Callable, Optional

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from qim.cli.topic_read import KAFKA_CALL_TIMEOUT_S, high_watermarks, read_topic
from qim.consts import DISPATCH_TOPIC, KAFKA_MAX_RECORD_BYTES, OUTBOX_TOPIC
from qim.errors import EngineError
from qim.services.fanout.coordinator import GROUP_ID as FANOUT_GROUP

META = "kafka.json"
_HEAD = struct.Struct(">QI")
_LEN = struct.Struct(">I")
Keep = Callable[[str, int, int, Optional[bytes]], bool]


def _consumer(bootstrap: str, group: str = "qimctl-backup") -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "enable.partition.eof": True, "auto.offset.reset": "earliest"})


def _file(dir: Path, topic: str, p: int) -> Path:
    return dir / f"{topic}-{p}.rec"


def export(bootstrap: str, dir: Path, shard_count: int, stall_s: float = 30.0) -> dict:
    """Write both topics and the fanout position under `dir`; the metadata written."""
    dir.mkdir(parents=True, exist_ok=True)
    consumer = _consumer(bootstrap)
    try:
        topics = {OUTBOX_TOPIC: 1, DISPATCH_TOPIC: shard_count}
        meta: dict = {"topics": {}, "fanout_position": None}
        # the dispatch log's marks first, the Outbox's after: every dispatch taken then has
        # its Outbox record in the backup (a dispatch is produced after its record)
        all_marks = {DISPATCH_TOPIC: high_watermarks(consumer, DISPATCH_TOPIC, shard_count)}
        all_marks[OUTBOX_TOPIC] = high_watermarks(consumer, OUTBOX_TOPIC, 1)
        for topic, parts in topics.items():
            marks = all_marks[topic]
            files = {p: open(_file(dir, topic, p), "wb") for p in range(parts)}
            try:
                def sink(p: int, offset: int, value: Optional[bytes], files=files) -> None:
                    v = value or b""
                    files[p].write(_HEAD.pack(offset, 0) + _LEN.pack(len(v)) + v)

                read_topic(consumer, topic, marks, sink, stall_s)
            finally:
                for f in files.values():
                    f.close()
            meta["topics"][topic] = {"partitions": parts, "marks": {str(p): list(m) for p, m in marks.items()}}
        group = _consumer(bootstrap, FANOUT_GROUP)
        try:
            (tp,) = group.committed([TopicPartition(OUTBOX_TOPIC, 0)], timeout=KAFKA_CALL_TIMEOUT_S)
            meta["fanout_position"] = tp.offset if tp.offset >= 0 else None
        finally:
            group.close()
    except KafkaException as exc:
        raise EngineError(f"kafka at {bootstrap}: {exc}") from None
    finally:
        consumer.close()
    (dir / META).write_text(json.dumps(meta, indent=2))
    return meta


def records(dir: Path, topic: str, p: int):
    """(offset, value) of one backed-up partition, in offset order."""
    data = _file(dir, topic, p).read_bytes()
    at = 0
    while at < len(data):
        offset, keylen = _HEAD.unpack_from(data, at)
        at += _HEAD.size + keylen
        (n,) = _LEN.unpack_from(data, at)
        at += _LEN.size
        yield offset, data[at:at + n]
        at += n


def _check_empty(consumer: Consumer, topic: str, parts: int) -> None:
    for p, (_, hi) in high_watermarks(consumer, topic, parts).items():
        if hi:
            raise EngineError(f"{topic}[{p}] is not empty: restore only into an empty stack")


def check_empty(bootstrap: str, dir: Path) -> None:
    """EngineError when a topic of the backup in `dir` holds records on the target:
    checked before anything is restored, so a refused restore writes nothing."""
    meta = json.loads((dir / META).read_text())
    consumer = _consumer(bootstrap)
    try:
        for topic, info in meta["topics"].items():
            _check_empty(consumer, topic, info["partitions"])
    except KafkaException as exc:
        raise EngineError(f"kafka at {bootstrap}: {exc}") from None
    finally:
        consumer.close()


def import_(bootstrap: str, dir: Path, keep: Keep) -> dict[tuple[str, int], list[tuple[int, int]]]:
    """Produce the kept records of the backup in `dir` (module doc)."""
    meta = json.loads((dir / META).read_text())
    consumer = _consumer(bootstrap)
    # the writer's own limit (qim/infra/kafka/bridge.py): an Outbox record of a 1 MiB body is
    # above librdkafka's default message.max.bytes (1,000,000) and would be refused here
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.max.bytes": KAFKA_MAX_RECORD_BYTES, "compression.type": "none"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    moved: dict[tuple[str, int], list[tuple[int, int]]] = {}
    try:
        for topic, info in meta["topics"].items():
            _check_empty(consumer, topic, info["partitions"])
            for p in range(info["partitions"]):
                low = info["marks"][str(p)][0]
                for _ in range(low):  # the head retention removed: padding, deleted below
                    producer.produce(topic, b"", partition=p)
                    producer.poll(0)
                if low:
                    producer.flush(KAFKA_CALL_TIMEOUT_S * 6)
                    admin.delete_records([TopicPartition(topic, p, low)])[TopicPartition(topic, p, low)].result(
                        KAFKA_CALL_TIMEOUT_S)
                new, pairs = low, []
                for offset, value in records(dir, topic, p):
                    if keep(topic, p, offset, value):
                        producer.produce(topic, value, partition=p)
                        producer.poll(0)
                        pairs.append((offset, new))
                        new += 1
                moved[(topic, p)] = pairs
            if producer.flush(KAFKA_CALL_TIMEOUT_S * 6):
                raise EngineError(f"records of {topic} not delivered")
        for topic, info in meta["topics"].items():  # read back: every partition ends where it must
            for p, (_, hi) in high_watermarks(consumer, topic, info["partitions"]).items():
                want = info["marks"][str(p)][0] + len(moved[(topic, p)])
                if hi != want:
                    raise EngineError(f"{topic}[{p}] ends at {hi} after the restore, expected {want}")
    except KafkaException as exc:
        raise EngineError(f"kafka at {bootstrap}: {exc}") from None
    finally:
        consumer.close()
    return moved


def set_fanout_position(bootstrap: str, position: int) -> None:
    """Commit the FanoutCoordinator's Outbox position (it resumes there: a hint, replays
    are absorbed downstream)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        futures = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(FANOUT_GROUP, [TopicPartition(OUTBOX_TOPIC, 0, position)])])
        for f in futures.values():
            f.result(KAFKA_CALL_TIMEOUT_S)
    except KafkaException as exc:
        raise EngineError(f"kafka at {bootstrap}: fanout position not set: {exc}") from None
