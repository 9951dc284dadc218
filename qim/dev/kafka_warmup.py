"""The development broker's warm-up before the engines report ready (issue 41, "the cold
start"; docs/decisions/0159-the-broker-is-warmed-before-ready.md).

A freshly started broker serves its first seconds of traffic with interpreted code and
compiles the hot paths while it serves them: the stack's first 5 s of traffic read an
E2E P99 of 146-400 ms against about 20 ms once warm, with the broker's JIT threads at
40-50 % of a core for more than ten seconds (docs/perf.md "Round seven: the cold
start"). `warm_broker` gives it that work before any service runs: for `seconds` it
produces small records the way the services do (idempotent, acks=all, linger 1 ms, one
request in flight; mostly one or two partitions per request like the writer's and a
direct message's dispatch, every eighth request to every partition like a group's
fan-out) to a topic of its own, `qim.warmup` (never a QIM topic: no service reads it),
fetches them back read_committed as the consumers do and commits their offsets; then the
topic is deleted. The broker's C2-compiled code stays for the life of its JVM, so only a
broker this `up` started is warmed (QIM_KAFKA_WARMUP_S, 0 skips; the test session sets
0: its brokers live for seconds).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from qim.consts import KAFKA_CONSUMER_FETCH_WAIT_MS, KAFKA_PRODUCER_IN_FLIGHT, KAFKA_PRODUCER_LINGER_MS
from qim.dev import progress
from qim.dev.kafka_topics import admin_client
from qim.errors import EngineError

WARMUP_TOPIC = "qim.warmup"
WARMUP_S_DEFAULT = 10  # QIM_KAFKA_WARMUP_S
RECORD = b"w" * 120  # about a direct message's dispatch record
WIDE_EVERY = 8  # every eighth request goes to every partition (a group's fan-out)

log = logging.getLogger(__name__)
# The warm-up's clients log below ERROR only what librdkafka retries by itself (on a
# broker just started: "Coordinator load in progress" while it loads its transaction
# state): a failure still ends as an EngineError (a record not acknowledged), and `make
# up` does not print a WARNING for a broker that is only starting.
_rdkafka_log = logging.getLogger("qim.dev.librdkafka.warmup")
_rdkafka_log.setLevel(logging.ERROR)


def _create(admin: Any, partitions: int, replicas: int) -> None:
    """The warm-up topic (one left by an interrupted warm-up is reused)."""
    futures = admin.create_topics([NewTopic(WARMUP_TOPIC, num_partitions=partitions, replication_factor=replicas)],
                                  request_timeout=15)
    for fut in futures.values():
        try:
            fut.result()
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise EngineError(f"kafka warm-up: cannot create {WARMUP_TOPIC}: {exc.args[0]}") from None


def _partitions_of(admin: Any, timeout: float) -> int:
    """How many partitions the warm-up topic has once its metadata answers."""
    deadline = time.monotonic() + timeout
    while True:
        topic = admin.list_topics(topic=WARMUP_TOPIC, timeout=5).topics.get(WARMUP_TOPIC)
        if topic is not None and topic.error is None and topic.partitions:
            return len(topic.partitions)
        if time.monotonic() > deadline:
            raise EngineError(f"kafka warm-up: {WARMUP_TOPIC} not in the metadata within {timeout:.0f} s")
        time.sleep(0.1)


def warm_broker(bootstrap: str, partitions: int, seconds: float, replicas: int = 1) -> dict[str, float]:
    """Produce and fetch back small records for `seconds` (module doc), then delete the
    topic. Returns {"requests", "records", "fetched", "seconds"}: what the broker served.
    EngineError when the broker refuses or a record is not acknowledged within 15 s;
    nothing is left behind either way (the topic is deleted, the clients closed)."""
    admin = admin_client(bootstrap)
    _create(admin, partitions, replicas)
    n = _partitions_of(admin, 30.0)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": KAFKA_PRODUCER_LINGER_MS, "logger": _rdkafka_log,
                         "max.in.flight.requests.per.connection": KAFKA_PRODUCER_IN_FLIGHT})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "qim-warmup", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "fetch.wait.max.ms": KAFKA_CONSUMER_FETCH_WAIT_MS,
                         "logger": _rdkafka_log})
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    got = {"requests": 0, "records": 0, "fetched": 0}
    start = time.monotonic()
    try:
        consumer.assign([TopicPartition(WARMUP_TOPIC, p, 0) for p in range(n)])
        while time.monotonic() - start < seconds:
            i = got["requests"]
            targets = range(n) if i % WIDE_EVERY == 0 else {i % n, (i * 7) % n}
            for p in targets:
                producer.produce(WARMUP_TOPIC, RECORD, partition=p, on_delivery=delivered)
            if producer.flush(15.0) or failed:
                raise EngineError(f"kafka warm-up: records not acknowledged: {failed[:1] or 'timed out'}")
            got["requests"] += 1
            got["records"] += len(targets)
            batch = consumer.consume(num_messages=10_000, timeout=0)
            if batch:
                got["fetched"] += len(batch)
                consumer.commit(asynchronous=True)
    finally:
        consumer.close()
        producer.flush(5.0)
        for fut in admin.delete_topics([WARMUP_TOPIC], request_timeout=15).values():
            try:
                fut.result()
            except KafkaException as exc:
                if exc.args[0].name() != "UNKNOWN_TOPIC_OR_PART":  # gone already is what we want
                    raise EngineError(f"kafka warm-up: cannot delete {WARMUP_TOPIC}: {exc.args[0]}") from None
    return {**got, "seconds": round(time.monotonic() - start, 2)}


def warm_started(bootstrap: str, partitions: int, replicas: int) -> None:
    """The warm-up of brokers an `up` just started, for QIM_KAFKA_WARMUP_S seconds (0
    skips), told as progress. EngineError as warm_broker."""
    raw = os.environ.get("QIM_KAFKA_WARMUP_S", "").strip() or str(WARMUP_S_DEFAULT)
    if not raw.isdigit() or int(raw) > 120:
        raise EngineError(f"QIM_KAFKA_WARMUP_S must be whole seconds 0..120, got {raw!r}")
    seconds = int(raw)
    if seconds == 0:
        return
    progress.note(f"warming the broker for {seconds} s (its JIT; QIM_KAFKA_WARMUP_S=0 skips)")
    got = warm_broker(bootstrap, partitions, seconds, replicas)
    log.info("kafka warm-up: %(requests)d produce requests, %(records)d records, %(fetched)d fetched "
             "in %(seconds).1f s", got)
