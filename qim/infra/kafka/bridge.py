"""confluent-kafka through a thread bridge: the producer and the metadata calls (the
consumer: qim/infra/kafka/consumer.py).

Blocking librdkafka calls never run on the event loop. The producer is polled by one
daemon thread and resolves asyncio futures with `call_soon_threadsafe`.
Idle cost and batching settings: qim/consts.py (docs/decisions/0053-kafka-idle-and-batching.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from typing import Any, Optional

from confluent_kafka import KafkaError, KafkaException, Producer

from qim.consts import (
    KAFKA_MAX_RECORD_BYTES,
    KAFKA_PRODUCER_IN_FLIGHT,
    KAFKA_PRODUCER_LINGER_MS,
    KAFKA_PRODUCER_POLL_S,
)
from qim.errors import EngineError, TopicWithoutId
from qim.infra.kafka.debug import with_debug

logger = logging.getLogger(__name__)


class AsyncProducer:
    """Idempotent producer with acks=all (docs/design.md §5.2).

    `await produce(topic, value, key, partition)` -> (partition, offset) once the record
    is durable on the broker; raises EngineError on delivery failure, and at once after
    `close()`.

    Per-message cost (docs/perf-profile.md): the delivery reports of one poll are handed to the event
    loop in ONE `call_soon_threadsafe` (one self-pipe wake-up per poll, not per record).
    Batching: `linger.ms` stays small (an idle send leaves at once) and one request is
    in flight per connection, so under load the records enqueued while a request is in
    flight leave together in the next one (one append, one flush per partition, one
    fetch answer for every consumer) instead of as requests queued behind it.
    """

    def __init__(self, bootstrap: str, extra: Optional[dict[str, Any]] = None) -> None:
        conf = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": KAFKA_PRODUCER_LINGER_MS,
            "max.in.flight.requests.per.connection": KAFKA_PRODUCER_IN_FLIGHT,
            "message.max.bytes": KAFKA_MAX_RECORD_BYTES,
            "compression.type": "none",
        }
        conf.update(extra or {})
        self._producer = Producer(with_debug(conf))
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        # (future, result) of deliveries reported by the current poll, handed over at its end
        self._reported: list[tuple[asyncio.Future, Any]] = []
        self._closed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="qim-kafka-producer", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(KAFKA_PRODUCER_POLL_S)
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the event loop every delivery reported so far, in one wake-up."""
        with self._lock:
            reported, self._reported = self._reported, []
        if reported and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(_resolve_all, reported)
            except RuntimeError:  # the loop is closed: nobody awaits these any more
                pass

    def produce(self, topic: str, value: Optional[bytes], key: Optional[bytes] = None,
                partition: Optional[int] = None, timestamp_ms: Optional[int] = None,
                headers: Optional[list[tuple[str, bytes]]] = None) -> asyncio.Future:
        """Enqueue one record (value None: a tombstone of `key` in a compacted topic);
        the returned future yields (partition, offset).
        `timestamp_ms`: the record's CreateTime (default: librdkafka reads the host's
        clock); QIM topics are LogAppendTime, so the broker replaces it with its own.
        `headers`: the record's Kafka headers (a traced message's traceparent, decision 0140).
        Must be called on the event loop thread. BufferError from a full local queue is
        raised as EngineError (back-pressure is the caller's)."""
        if self._closed:
            raise EngineError(f"kafka produce to {topic} refused: the producer is closed")
        loop = self._loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def on_delivery(err: Optional[KafkaError], msg: Any) -> None:  # on the poll thread
            if err is not None:
                result: Any = EngineError(f"kafka delivery to {topic} failed: {err.str()}")
            else:
                result = (msg.partition(), msg.offset())
            with self._lock:
                self._reported.append((fut, result))

        kwargs: dict[str, Any] = {"value": value, "on_delivery": on_delivery}
        if key is not None:
            kwargs["key"] = key
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        if headers:
            kwargs["headers"] = headers
        try:
            self._producer.produce(topic, **kwargs)
        except (BufferError, KafkaException) as exc:
            raise EngineError(f"kafka produce to {topic} refused: {exc}") from exc
        return fut

    async def close(self, timeout: float = 10.0) -> None:
        """Flush what is queued (up to `timeout` s, off the event loop), stop the poll
        thread, then destroy the librdkafka handle, so that its broker threads stop and
        stop reconnecting (a handle only garbage collection would free kept dialling a
        broker long gone). A record still queued after the flush is purged: its future
        fails with EngineError. A second call does nothing."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._producer.flush, timeout)
        self._stop.set()
        await loop.run_in_executor(None, self._thread.join)  # poll() returns within KAFKA_PRODUCER_POLL_S
        self._producer.purge()  # never blocks; the purged records' reports come with the poll below
        self._producer.poll(0)
        await loop.run_in_executor(None, self._producer.close)  # nothing queued: no flush wait
        self._hand_over()  # reports served by flush() and poll() off the poll thread


def _resolve_all(reported: list[tuple[asyncio.Future, Any]]) -> None:
    for fut, result in reported:
        if fut.done():  # the awaiting task was cancelled
            continue
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)


async def topic_partitions(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """Partition count of `topic` from broker metadata; EngineError when absent/unreachable."""
    from confluent_kafka.admin import AdminClient

    def fetch() -> int:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=timeout)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise EngineError(f"topic {topic} missing on {bootstrap}: {t.error if t else 'absent'}")
        return len(t.partitions)

    try:
        return await asyncio.get_running_loop().run_in_executor(None, fetch)
    except KafkaException as exc:
        raise EngineError(f"kafka metadata from {bootstrap} failed: {exc}") from exc


async def topic_identity(bootstrap: str, topic: str, timeout: float = 10.0) -> tuple[str, str, int]:
    """(cluster_id, topic_id, partition count) of `topic` from the broker (KIP-516 topic
    ids), for checkpoints that must notice a different cluster or a re-created topic.
    EngineError when unreachable, absent, or without a cluster id or non-zero topic id."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    def fetch() -> tuple[str, str, int]:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        cluster = admin.describe_cluster(request_timeout=timeout).result(timeout).cluster_id
        desc = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic].result(timeout)
        uuid = desc.topic_id
        if uuid is None or (uuid.get_most_significant_bits() == 0 and uuid.get_least_significant_bits() == 0):
            raise TopicWithoutId(f"topic {topic} has no topic id (broker without KIP-516)")
        if not cluster:
            raise TopicWithoutId("broker reports no cluster id")
        return str(cluster), str(uuid), len(desc.partitions)

    try:
        return await asyncio.get_running_loop().run_in_executor(None, fetch)
    except (KafkaException, concurrent.futures.TimeoutError) as exc:
        raise EngineError(f"kafka metadata of {topic} from {bootstrap} failed: {exc}") from exc
