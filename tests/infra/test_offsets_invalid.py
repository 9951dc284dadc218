"""An offsets query is tried again on a new client, in short attempts, until its budget is
spent (qim/infra/kafka/offsets.py). An invalid offset in a ListOffsets answer (librdkafka's
-1001 while a partition's leader moves) is a failed attempt, never a log end: taken as one,
the session's durable projection found its checkpoint "past the log end -1001" and failed
closed for good. The first attempt's request waits at most KAFKA_OFFSETS_ATTEMPT_S: while a
killed broker is still the leader, librdkafka's admin client spins for as long as one
request waits (docs/decisions/0066-offsets-query-timeout.md)."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from qim.consts import KAFKA_OFFSETS_ATTEMPT_S
from qim.errors import EngineError
from qim.infra.kafka.offsets import OffsetReader


class Admin:
    """One fake AdminClient: every query answers `offsets` (an exception: fails with it)."""

    def __init__(self, offsets, made: list) -> None:
        self.offsets, self.timeouts = offsets, []
        made.append(self)

    def list_offsets(self, request, isolation_level, request_timeout):
        self.timeouts.append(request_timeout)
        out = {}
        for tp in request:
            fut: concurrent.futures.Future = concurrent.futures.Future()
            if isinstance(self.offsets, BaseException):
                fut.set_exception(self.offsets)
            else:
                fut.set_result(SimpleNamespace(offset=self.offsets[tp.partition]))
            out[tp] = fut
        return out


def clients(*answers):
    """A factory handing out one fake client per answer, in order (the last one repeats)."""
    made: list = []

    def factory(conf):
        return Admin(answers[min(len(made), len(answers) - 1)], made)
    return factory, made


async def test_an_invalid_offset_is_asked_again_of_a_new_client():
    factory, made = clients({0: 12, 1: -1001}, {0: 12, 1: 7})
    reader = OffsetReader("127.0.0.1:1", factory)
    assert await reader.highs("qim.dispatch", [0, 1]) == {0: 12, 1: 7}
    assert len(made) == 2 and reader.attempts_failed == 1


async def test_a_failure_that_lasts_the_budget_is_an_engine_error_naming_it():
    factory, made = clients({0: 12, 1: -1001})
    reader = OffsetReader("127.0.0.1:1", factory)
    with pytest.raises(EngineError, match=r"no valid offset for partitions \[1\] \(gave up after 2.0 s\)"):
        await reader.highs("qim.dispatch", [0, 1], timeout=2.0)
    assert len(made) >= 2 and reader.attempts_failed == len(made)


async def test_each_attempt_waits_at_most_the_attempt_length_within_a_longer_budget():
    down = KafkaException(KafkaError(KafkaError._TRANSPORT))
    factory, made = clients(down, down, {0: 3})
    reader = OffsetReader("127.0.0.1:1", factory)
    assert await reader.highs("qim.dispatch", [0], timeout=10.0) == {0: 3}
    waits = [t for client in made for t in client.timeouts]
    assert len(made) == 3 and waits[0] <= KAFKA_OFFSETS_ATTEMPT_S and waits[0] < waits[1] < waits[2], waits


async def test_a_failure_that_is_not_retriable_fails_at_once():
    factory, made = clients(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
    reader = OffsetReader("127.0.0.1:1", factory)
    with pytest.raises(EngineError, match="failed: .*UNKNOWN_TOPIC_OR_PART"):
        await reader.highs("qim.nothing", [0])
    assert len(made) == 1 and reader._admin is None  # and the next query asks a new client


async def test_a_concurrent_query_keeps_the_newer_client_another_one_made():
    """ranges() runs two queries at once: one failing must not drop the client the other
    already replaced."""
    down = KafkaException(KafkaError(KafkaError._TRANSPORT))
    factory, made = clients(down, {0: 4})
    reader = OffsetReader("127.0.0.1:1", factory)
    assert await reader.ranges("qim.dispatch", [0]) == {0: (4, 4)}
    assert len(made) == 2 and reader._admin is made[1]


async def test_a_malformed_request_is_not_tried_again():
    class Refusing:
        def __init__(self, conf) -> None:
            made.append(self)

        def list_offsets(self, *args, **kwargs):
            raise ValueError("bad partition")
    made: list = []
    reader = OffsetReader("127.0.0.1:1", Refusing)
    with pytest.raises(EngineError, match="could not be asked for: bad partition"):
        await reader.highs("qim.dispatch", [0])
    assert len(made) == 1
