"""Read the Outbox topic in tests: which records of a conversation it holds, in order."""

from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, TopicPartition

from qim.consts import OUTBOX_TOPIC
from qim.proto.v1 import internal_pb2


def outbox_end(bootstrap: str) -> int:
    """The Outbox's next offset (read from here to see only what comes after)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-" + os.urandom(4).hex()})
    try:
        return consumer.get_watermark_offsets(TopicPartition(OUTBOX_TOPIC, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def outbox_records(bootstrap: str, start: int, conversation_id: bytes, until, timeout: float = 30.0) -> list:
    """MessageRecords of `conversation_id` in Outbox order from offset `start`, read until
    `until(records)` holds or `timeout` passes (then whatever was read)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-" + os.urandom(4).hex(),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(OUTBOX_TOPIC, 0, start)])
    records: list = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not until(records):
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    rec = internal_pb2.OutboxRecord.FromString(m.value()).record
                    if rec.conversation_id == conversation_id:
                        records.append(rec)
    finally:
        consumer.close()
    return records


def first_occurrences(records: list) -> list:
    """Records in the order their message_id first appears (a replayed publication may
    repeat a record later; fanout and mailbox dedupe it by dispatch_id)."""
    seen, out = set(), []
    for rec in records:
        if rec.message_id not in seen:
            seen.add(rec.message_id)
            out.append(rec)
    return out
