"""The fanout's Outbox position commit (qim/services/fanout/coordinator.py):
a batch is finished when every dispatch is delivered, without waiting for the broker's
offset commit; the position is committed afterwards by its own task, never ahead of the
deliveries, and a busy fanout commits at most once per FANOUT_COMMIT_INTERVAL_S.
Real Kafka for the dispatches; the consumer's commit is a stand-in that records calls."""

from __future__ import annotations

import asyncio
import os
import time

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

from qim._core import ids
from qim.consts import FANOUT_COMMIT_INTERVAL_S
from qim.faults import FaultPoints
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.fanout.coordinator import FanoutCoordinator
from tests.fixtures import TEST_SHARD_COUNT


class OutboxMessage:
    """What the coordinator reads of a consumed Outbox record."""

    def __init__(self, offset: int, value: bytes) -> None:
        self._offset, self._value = offset, value
        self._appended_ms = int(time.time() * 1000)  # the broker's LogAppendTime

    def offset(self) -> int:
        return self._offset

    def partition(self) -> int:
        return 0

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_LOG_APPEND_TIME, self._appended_ms


def outbox_record(offset: int) -> OutboxMessage:
    rec = message_pb2.MessageRecord(
        tenant_id=bytes(16), message_id=os.urandom(16), conversation_id=ids.conversation_id_direct(0, 1, 2),
        conversation_seq=offset + 1, sender_id=1, created_at_ms=1_700_000_000_000, client_message_id=os.urandom(16),
        message_type=1, body=b"hi")
    raw = internal_pb2.OutboxRecord(record=rec, recipients=[2, 1], shard_count=TEST_SHARD_COUNT, inline_body=True)
    return OutboxMessage(offset, raw.SerializeToString())


class CommitRecorder:
    """Stands in for AsyncConsumer.commit: records (topic, partition, offset) once `open`."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.open = asyncio.Event()

    async def commit(self, topic: str, partition: int, next_offset: int) -> None:
        await self.open.wait()
        self.calls.append(next_offset)


async def test_a_batch_does_not_wait_for_the_offset_commit(engines):
    coordinator = FanoutCoordinator(engines.env()["QIM_KAFKA_BOOTSTRAP"], TEST_SHARD_COUNT, 512,
                                    FaultPoints("", ("after_dispatch",)), groups=None)  # type: ignore[arg-type]
    real_consumer = coordinator._consumer
    recorder = CommitRecorder()
    coordinator._consumer = recorder  # type: ignore[assignment]
    coordinator.positions, coordinator.committed = {0: 100}, {0: 100}
    committer = asyncio.get_running_loop().create_task(coordinator._commit_loop())
    try:
        # the broker's commit hangs: the batch still finishes once its dispatches are delivered
        await asyncio.wait_for(coordinator._process([outbox_record(100), outbox_record(101)]), 20)
        assert coordinator.positions[0] == 102 and coordinator.committed[0] == 100 and recorder.calls == []
        recorder.open.set()
        for _ in range(100):
            if coordinator.committed[0] == 102:
                break
            await asyncio.sleep(0.01)
        assert recorder.calls == [102]  # the delivered position, once
        # busy (the broker's commit slow again): the batches finished meanwhile share
        # commits instead of one each, and the last delivered position is committed
        recorder.open.clear()
        for offset in range(102, 110):
            await coordinator._process([outbox_record(offset)])
        recorder.open.set()
        for _ in range(100):
            if coordinator.committed[0] == 110:
                break
            await asyncio.sleep(FANOUT_COMMIT_INTERVAL_S / 4)
        assert recorder.calls[-1] == 110 and 2 <= len(recorder.calls) <= 3
        assert recorder.calls == sorted(recorder.calls)
    finally:
        committer.cancel()
        await asyncio.gather(committer, return_exceptions=True)
        coordinator._consumer = real_consumer
        await coordinator.close()
