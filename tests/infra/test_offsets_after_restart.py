"""Offset queries go on after the broker restarts (qim/infra/kafka/offsets.py): the
restart moves every partition's leader epoch, and a reader that kept its AdminClient
failed every later query with FENCED_LEADER_EPOCH, so a shard that had to start again
never did. A failed query now drops the client; the next one succeeds."""

from __future__ import annotations

from qim.consts import DISPATCH_TOPIC
from qim.errors import EngineError
from qim.infra.kafka.offsets import OffsetReader


async def test_offsets_are_read_again_after_a_broker_restart(private_kafka):
    reader = OffsetReader(private_kafka.bootstrap)
    partitions = list(range(private_kafka.topics[DISPATCH_TOPIC]))
    assert set(await reader.highs(DISPATCH_TOPIC, partitions, 10.0)) == set(partitions)
    private_kafka.restart(hard=True)
    failures = []
    for _ in range(3):  # at most one failure: the query that finds the old epoch
        try:
            highs = await reader.highs(DISPATCH_TOPIC, partitions, 10.0)
            break
        except EngineError as exc:
            failures.append(str(exc))
    else:
        raise AssertionError(f"offsets never read again after the restart: {failures}")
    assert set(highs) == set(partitions) and len(failures) <= 1, failures
