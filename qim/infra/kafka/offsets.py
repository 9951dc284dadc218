"""Broker offset queries on a client of their own (docs/decisions/0060-offsets-off-the-fetch-connection.md).

A consumer's own watermark query (librdkafka's get_watermark_offsets) is one request per
partition on the consumer's broker connection, and the broker answers the requests of a
connection in order: each waits behind the long-polling fetch ahead of it
(KAFKA_CONSUMER_FETCH_WAIT_MS when the log is idle), on the consumer's only thread, so a
node taking four shards waited two seconds for four watermarks and a lag probe over 64
idle partitions held the consumer's thread for half a minute. An AdminClient asks for
every partition in one ListOffsets request, on its own connection, and answers through
futures: nothing of ours waits on a thread, and the consumer's reads go on meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Optional

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from qim.consts import KAFKA_OFFSETS_ATTEMPT_S, KAFKA_OFFSETS_TIMEOUT_S
from qim.errors import EngineError
from qim.infra.kafka.debug import with_debug

OFFSETS_RETRY_PAUSE_S = 0.1  # before the second attempt (a new client each), doubling up to
OFFSETS_RETRY_PAUSE_MAX_S = 1.0  # this: not a tight loop of our own
# librdkafka's local codes of a broker gone or slow, not always marked retriable
_RETRY_CODES = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.FENCED_LEADER_EPOCH}


class OffsetReader:
    """Low and high watermarks of a topic's partitions, read committed (what a QIM consumer
    can reach). Its calls never block the event loop. Every method raises EngineError when
    the broker cannot answer within `timeout` s or a partition does not exist.

    Within that budget a query is tried in attempts, the first of at most
    KAFKA_OFFSETS_ATTEMPT_S and each next one twice as long, 0.1 s apart doubling up to
    1 s; a failed attempt drops its client, so the next one starts a new AdminClient with
    fresh metadata. A failure librdkafka does not call retriable (an unknown topic, a
    malformed request) is an EngineError at once; the error after the last attempt names
    the budget (the last wait may overrun it by up to 1 s: a lost answer's guard). librdkafka's admin ListOffsets kept the leader epoch it had cached, so
    after a broker restart every query failed with FENCED_LEADER_EPOCH (CI: twelve minutes
    of "could not start serving"); and while a killed broker is still the leader it names,
    its admin client reconnects to that broker with no backoff for as long as the request
    waits (docs/decisions/0066-offsets-query-timeout.md): short attempts bound that spin.
    `factory` makes the client (tests give a fake)."""

    def __init__(self, bootstrap: str, factory: Optional[Callable[[dict], Any]] = None) -> None:
        self._bootstrap = bootstrap
        self._factory = factory or AdminClient
        self._admin: Any = None
        self.attempts_failed = 0  # attempts that failed and were tried again or reported

    def _client(self) -> Any:
        if self._admin is None:
            self._admin = self._factory(with_debug({"bootstrap.servers": self._bootstrap}))
        return self._admin

    async def _offsets(self, topic: str, partitions: list[int], spec: OffsetSpec, timeout: float) -> dict[int, int]:
        if not partitions:
            return {}
        deadline = time.monotonic() + timeout
        attempt_s, pause_s = KAFKA_OFFSETS_ATTEMPT_S, OFFSETS_RETRY_PAUSE_S
        while True:
            client = self._client()
            try:
                return await self._attempt(client, topic, partitions, spec,
                                           max(0.1, min(attempt_s, deadline - time.monotonic())))
            except _Retryable as exc:
                if self._admin is client:  # a new client next time (see the class doc); not a
                    self._admin = None     # newer one that a concurrent query already made
                self.attempts_failed += 1
                if deadline - time.monotonic() < pause_s + KAFKA_OFFSETS_ATTEMPT_S / 4:
                    raise EngineError(f"{exc} (gave up after {timeout:.1f} s)") from exc.__cause__
            await asyncio.sleep(pause_s)
            # longer attempts after the first: a new client that needs more than one attempt's
            # length (a busy host) still gets its answer within the budget
            attempt_s, pause_s = attempt_s * 2, min(pause_s * 2, OFFSETS_RETRY_PAUSE_MAX_S)

    async def _attempt(self, client: Any, topic: str, partitions: list[int], spec: OffsetSpec,
                       timeout: float) -> dict[int, int]:
        try:
            futures = client.list_offsets({TopicPartition(topic, p): spec for p in partitions},
                                          isolation_level=IsolationLevel.READ_COMMITTED,
                                          request_timeout=timeout)
        except (KafkaException, ValueError, TypeError) as exc:  # a malformed request: no retry helps
            raise EngineError(f"kafka offsets of {topic} could not be asked for: {exc}") from exc
        keyed = {tp.partition: asyncio.wrap_future(f) for tp, f in futures.items()}
        try:
            # the request's own timeout answers first; this bound only guards against a lost answer
            results = await asyncio.wait_for(_all(keyed.values()), timeout=timeout + 1.0)
        except KafkaException as exc:
            if self._admin is client:
                self._admin = None  # whatever it was, this client's metadata is suspect
            if not _retriable(exc):  # e.g. an unknown topic: asking again does not help
                raise EngineError(f"kafka offsets of {topic} failed: {exc}") from exc
            raise _Retryable(f"kafka offsets of {topic} failed: {exc}") from exc
        except asyncio.TimeoutError:
            raise _Retryable(f"kafka offsets of {topic}: no answer in {timeout:.1f} s") from None
        finally:
            for fut in keyed.values():
                fut.cancel()  # a no-op once done; else nobody waits for it any more
        bad = sorted(p for p, info in zip(keyed, results) if info.offset < 0)
        if bad:
            # librdkafka's "invalid offset" (-1001) while a leader moves: not a log end. Taken
            # as one, it put a checkpoint "past the log end" and failed the session's
            # durable projection closed for good (CI, a broker killed under traffic).
            raise _Retryable(f"kafka offsets of {topic}: no valid offset for partitions {bad}")
        return {p: info.offset for p, info in zip(keyed, results)}

    async def highs(self, topic: str, partitions: list[int], timeout: float = KAFKA_OFFSETS_TIMEOUT_S) -> dict[int, int]:
        """partition -> high watermark (the next offset to be written)."""
        return await self._offsets(topic, partitions, OffsetSpec.latest(), timeout)

    async def ranges(self, topic: str, partitions: list[int], timeout: float = KAFKA_OFFSETS_TIMEOUT_S) -> dict[int, tuple[int, int]]:
        """partition -> (low, high): the first retained offset and the next to be written."""
        # both awaited to the end: no failure left unretrieved
        lows, highs = await _all([self._offsets(topic, partitions, OffsetSpec.earliest(), timeout),
                                  self.highs(topic, partitions, timeout)])
        return {p: (lows[p], highs[p]) for p in partitions}


def _retriable(exc: KafkaException) -> bool:
    """Whether librdkafka calls the failure retriable (a moved leader, a lost connection,
    a timeout); an exception without a KafkaError counts as not."""
    err = exc.args[0] if exc.args else None
    return bool(isinstance(err, KafkaError) and (err.retriable() or err.code() in _RETRY_CODES))


class _Retryable(Exception):
    """An attempt's failure that a new client may not meet (a moved leader, a lost answer)."""


async def _all(futures) -> list:
    """Every future's result in order, or the first failure once all of them are done (a
    per-partition error fails every partition of a request alike; none is left unretrieved)."""
    results = await asyncio.gather(*futures, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results
