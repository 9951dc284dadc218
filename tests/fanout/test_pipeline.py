"""The FanoutCoordinator's pipelined batches and its direct producer (docs/decisions/0162):
a direct record read while an earlier group batch awaits its deliveries is produced at
once, on its own producer; positions advance only over delivered batches, in order; a
failed batch is re-read from its first record even when a later batch was delivered;
the window bounds how far the fanout reads ahead; a batch still in flight when its
partition was given up never moves the position of a later tenure (decision 0163). The Outbox consumer and the producers
are stand-ins that hold each delivery until the test decides it (the real Kafka path of
the same coordinator: tests/fanout/test_commit.py and every e2e test)."""

from __future__ import annotations

import asyncio
import gc
import os

from qim._core import ids
from qim.errors import EngineError
from qim.faults import FaultPoints
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.fanout.coordinator import FanoutCoordinator
from tests.fanout.test_commit import OutboxMessage
from tests.fixtures import TEST_SHARD_COUNT


def record(offset: int, group: bool) -> OutboxMessage:
    """An Outbox record at `offset` of a group (members 1..3) or a direct conversation."""
    conversation = ids.conversation_id_group(0, 7) if group else ids.conversation_id_direct(0, 1, 2)
    rec = message_pb2.MessageRecord(
        tenant_id=bytes(16), message_id=os.urandom(16), conversation_id=conversation,
        conversation_seq=offset + 1, sender_id=1, created_at_ms=1_700_000_000_000, client_message_id=os.urandom(16),
        message_type=1, body=b"hi")
    raw = internal_pb2.OutboxRecord(record=rec, recipients=[1, 2, 3] if group else [2, 1],
                                    shard_count=TEST_SHARD_COUNT, inline_body=True)
    return OutboxMessage(offset, raw.SerializeToString())


class HeldProducer:
    """Stands in for AsyncProducer: every produce returns a future the test resolves."""

    def __init__(self) -> None:
        self.held: list[asyncio.Future] = []

    def produce(self, topic, value, key=None, partition=None, headers=None) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.held.append(fut)
        return fut

    def deliver(self, error: str = "") -> None:
        for fut in self.held:
            if not fut.done():
                fut.set_exception(EngineError(error)) if error else fut.set_result((0, 0))


class Outbox:
    """Stands in for the Outbox consumer: hands out the batches queued, records seeks."""

    def __init__(self) -> None:
        self.batches: asyncio.Queue = asyncio.Queue()
        self.reads = 0
        self.seeks: list[dict] = []
        self.start = 0  # the committed position add_partition reads

    async def consume(self, n: int, wait: float) -> list:
        try:
            batch = await asyncio.wait_for(self.batches.get(), 0.05)
        except asyncio.TimeoutError:
            return []
        self.reads += 1
        return batch

    async def committed(self, topic, partitions) -> dict:
        return {p: self.start for p in partitions}

    async def add_partitions(self, topic, starts) -> None:
        pass

    async def remove_partitions(self, topic, partitions) -> None:
        pass

    async def assign(self, topic, starts) -> None:
        self.seeks.append(dict(starts))

    async def commit(self, topic, partition, offset) -> None:
        pass


async def _until(check, what: str, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


class Rig:
    """A coordinator on partition 0 with stand-ins, running until `stop()`."""

    def __init__(self, bootstrap: str, window: int = 4) -> None:
        self.coordinator = FanoutCoordinator(bootstrap, TEST_SHARD_COUNT, 512, FaultPoints("", ("after_dispatch",)),
                                             groups=None, window=window)  # type: ignore[arg-type]
        self.real = (self.coordinator._producer, self.coordinator._direct, self.coordinator._consumer)
        self.bulk, self.direct, self.outbox = HeldProducer(), HeldProducer(), Outbox()
        self.coordinator._producer, self.coordinator._direct = self.bulk, self.direct  # type: ignore[assignment]
        self.coordinator._consumer = self.outbox  # type: ignore[assignment]
        self.task = asyncio.get_running_loop().create_task(self.coordinator.run())

    async def stop(self) -> None:
        """Stop the coordinator and close its real clients, then free their librdkafka
        handles now: the coordinator sits in a reference cycle through its metrics'
        callback, and a handle left to the collector can outlive the session's broker
        (refused-connection lines at the end of a run)."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        for producer in self.real[:2]:
            await producer.close()
        await self.real[2].close()
        self.real = ()
        del self.coordinator
        gc.collect()

    async def group_then_direct(self) -> None:
        """A group batch (offset 0) held undelivered, then a direct one (offset 1) read
        and produced on the direct producer meanwhile."""
        await self.outbox.batches.put([record(0, group=True)])
        await _until(lambda: self.bulk.held, "the group batch's dispatches")
        await self.outbox.batches.put([record(1, group=False)])
        await _until(lambda: self.direct.held, "the direct record's dispatch")


async def test_a_direct_record_leaves_while_the_group_batch_before_it_awaits_delivery(engines):
    rig = Rig(engines.env()["QIM_KAFKA_BOOTSTRAP"])
    try:
        await rig.group_then_direct()
        assert all(not f.done() for f in rig.bulk.held)
        rig.direct.deliver()
        await asyncio.sleep(0.1)
        assert rig.coordinator.positions[0] == 0  # the group batch below it is undelivered
        rig.bulk.deliver()
        await _until(lambda: rig.coordinator.positions[0] == 2, "both batches settled")
    finally:
        await rig.stop()


async def test_a_failed_batch_is_read_again_though_a_later_one_was_delivered(engines):
    rig = Rig(engines.env()["QIM_KAFKA_BOOTSTRAP"])
    try:
        await rig.group_then_direct()
        rig.direct.deliver()
        rig.bulk.deliver(error="broker gone")
        await _until(lambda: rig.outbox.seeks, "the replay's seek")
        assert rig.outbox.seeks == [{0: 0}] and rig.coordinator.positions[0] == 0
        assert rig.coordinator._m.replays._value.get() == 1
        rig.bulk.held.clear()
        await rig.outbox.batches.put([record(0, group=True), record(1, group=False)])  # the re-read
        await _until(lambda: rig.bulk.held, "the replayed dispatches")
        rig.bulk.deliver()
        rig.direct.deliver()
        await _until(lambda: rig.coordinator.positions[0] == 2, "the replay settled")
    finally:
        await rig.stop()


async def test_the_window_bounds_how_far_the_fanout_reads_ahead(engines):
    rig = Rig(engines.env()["QIM_KAFKA_BOOTSTRAP"], window=1)  # one dispatch record: a batch goes alone
    try:
        for offset in range(5):
            await rig.outbox.batches.put([record(offset, group=True)])
        # the first batch in flight, the second produced and waiting for room: no third read
        await _until(lambda: rig.outbox.reads == 2, "two reads")
        await asyncio.sleep(0.3)
        assert rig.outbox.reads == 2 and rig.coordinator.positions[0] == 0
        while rig.coordinator.positions[0] < 5:
            rig.bulk.deliver()
            await asyncio.sleep(0.02)
        assert rig.outbox.reads == 5
    finally:
        await rig.stop()


async def test_a_batch_from_an_earlier_tenure_never_moves_the_position_of_a_later_one(engines):
    """Paused past its lease (a takeover), then given the partition back: a batch
    produced before never advances the new tenure's position, whose records from the
    committed position on this node has not delivered (a commit of that position and a
    crash would lose them)."""
    rig = Rig(engines.env()["QIM_KAFKA_BOOTSTRAP"])
    try:
        await _until(lambda: rig.coordinator.ready, "positioned")
        await rig.outbox.batches.put([record(5, group=True), record(6, group=True)])
        await _until(lambda: rig.bulk.held, "the stale batch's dispatches")
        await rig.coordinator.remove_partition(0, "lease lost")
        rig.outbox.start = 3  # the other owner delivered everything below 3, and gave it back
        await rig.coordinator.add_partition(0)
        rig.bulk.deliver()
        await asyncio.sleep(0.2)
        assert rig.coordinator.positions[0] == 3 and rig.coordinator.committed[0] == 3
        rig.bulk.held.clear()
        await rig.outbox.batches.put([record(3, group=True)])  # the new tenure's own records advance it
        await _until(lambda: rig.bulk.held, "the new tenure's dispatches")
        rig.bulk.deliver()
        await _until(lambda: rig.coordinator.positions[0] == 4, "the new tenure's batch settled")
    finally:
        await rig.stop()
