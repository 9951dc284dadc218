"""Reading a Kafka topic between snapshotted watermarks, for the audits of qimctl
(`audit dispatch`, `audit archive`): static assign, never a group subscription,
nothing committed; every broker call bounded (KAFKA_CALL_TIMEOUT_S)."""

from __future__ import annotations

import time
from typing import Callable, Optional

from confluent_kafka import Consumer, KafkaError, TopicPartition

from qim.errors import EngineError

KAFKA_CALL_TIMEOUT_S = 10.0
# librdkafka's own log lines (one per reconnect attempt, to stderr) are kept out of a
# command's output: a failure surfaces once, as the EngineError of the call that needed
# the broker (docs/operations.md: one line, exit 2)
QUIET_CLIENT = {"log_level": 0}

Sink = Callable[[int, int, Optional[bytes]], None]


def high_watermarks(consumer: Consumer, topic: str, partitions: int,
                    timeout_s: float = KAFKA_CALL_TIMEOUT_S) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)} straight from the broker (never cached), each call bounded
    by timeout_s seconds (KafkaException past it)."""
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s, cached=False)
            for p in range(partitions)}


def read_topic(consumer: Consumer, topic: str, marks: dict[int, tuple[int, int]], sink: Sink,
               stall_s: float) -> None:
    """Feed every record of `topic` between the given (low, high) marks to sink(partition,
    offset, value), partition by partition in offset order. Static assign; nothing committed.

    EngineError on a broker error or when no progress happens for stall_s seconds.
    """
    todo = {p: hi for p, (lo, hi) in marks.items() if hi > lo}
    if not todo:
        return
    consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in todo])
    last_progress = time.monotonic()
    while todo:
        for m in consumer.consume(1000, 0.5):
            err, p, offset = m.error(), m.partition(), m.offset()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if p in todo and offset is not None and offset >= todo[p]:
                        del todo[p]
                    continue
                raise EngineError(f"reading {topic}[{p}]: {err.str()}")
            if p not in todo or offset is None or offset >= todo[p]:
                continue  # written after the snapshot (a record always has an offset)
            sink(p, offset, m.value())
            last_progress = time.monotonic()
            if offset + 1 >= todo[p]:
                del todo[p]
        for tp in consumer.position([TopicPartition(topic, p) for p in todo]):
            if tp.offset >= todo[tp.partition]:  # offsets without a record (markers) at the end
                del todo[tp.partition]
        if todo and time.monotonic() - last_progress > stall_s:
            where = ", ".join(f"{topic}[{p}] below {hi}" for p, hi in sorted(todo.items()))
            raise EngineError(f"read stalled for {stall_s:g}s: {where}")
    consumer.unassign()
