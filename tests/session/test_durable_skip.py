"""The durable consumer skips the records the low-latency path registered (decision
0167), on a real broker and Redis of the test's own: a record is skipped only when its
PROJECTION frame named it (partition and mailbox_seq) and its registrations were
written; one that failed, or one from an older mailbox node without a mailbox_seq, is
written by the durable consumer as before. Either way the lists end the same and the
checkpoint passes every record."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from qim._core import ids
from qim._core import mailbox_seq as mseq
from qim._core.types import MessageCoord
from qim.proto.v1 import projection_pb2
from qim.services.session.feed import ProjectionIntake
from qim.services.session.metrics import SessionMetrics
from qim.services.session.projected import Projected
from qim.stores.errors import StorageError
from qim.stores.redis.keys import convs_key, read_key, session_shard_checkpoint_key
from qim.wire import dispatch as dispatch_record
from tests.session.test_durable import Harness, run_until, stop

PART = 2
SENDER = 9
PEER = {1: 5, 2: 6, 3: 7}  # seq -> the recipient: three conversations, so no registration merges with another
CREATED = 1_700_000_000_000  # + seq


def conv(seq: int) -> bytes:
    return ids.conversation_id_direct(0, PEER[seq], SENDER)


def dispatch(seq: int) -> bytes:
    """Message `seq` of SENDER to PEER[seq], its dispatch record of partition PART."""
    mid = ids.compose_message_id(CREATED + seq, 0, 0, 1)
    return dispatch_record.Dispatch(
        tenant=0, dispatch_id=ids.dispatch_id(mid, PART),
        coord=MessageCoord(mid, conv(seq), seq, SENDER, CREATED + seq, 1, b""),
        target_shard=PART, client_message_id=bytes(range(1, 17)), recipients=(PEER[seq],), body=None).encode()


@pytest.fixture
def harness(private_kafka, private_redis):
    return Harness(private_kafka, private_redis.addr)


def frame(seq: int, mailbox_seq: int) -> bytes:
    """The PROJECTION a mailbox sends for dispatch(seq)."""
    f = projection_pb2.Projection(tenant_id=(0).to_bytes(16, "big"))
    f.messages.add(conversation_id=conv(seq), conversation_seq=seq, created_at_ms=CREATED + seq, sender_id=SENDER,
                   users=[PEER[seq]], shard=PART, mailbox_seq=mailbox_seq)
    return f.SerializeToString()


def count(m: SessionMetrics, path: str) -> float:
    return m.registrations.labels(path=path)._value.get()


async def low_latency(sessions: Any, m: SessionMetrics, projected: Projected, bodies: list[bytes]) -> None:
    """Run a ProjectionIntake over `bodies` until each was written or dropped."""
    intake = ProjectionIntake(sessions, lambda user: True, lambda regs: None, metrics=m, projected=projected)
    for body in bodies:
        intake.offer(body)
    task = asyncio.get_running_loop().create_task(intake.run())

    def settled() -> float:  # two registrations a message written, one count a message dropped
        return count(m, "lowlatency") + 2 * m.projection_dropped.labels(reason="redis")._value.get()
    deadline = asyncio.get_running_loop().time() + 10
    while settled() < 2 * len(bodies):
        assert asyncio.get_running_loop().time() < deadline, "the intake never wrote nor dropped the frames"
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def durable_run(h: Harness, m: SessionMetrics, projected: Projected) -> None:
    proj = h.projector()
    proj._m, proj._projected = m, projected
    await proj.start()
    task = await run_until(proj, lambda: proj.next.get(PART) == 3 and not proj.held)
    await stop(proj, task)


async def lists_hold_all_three(h: Harness) -> None:
    for seq, peer in PEER.items():
        c = conv(seq).hex()
        assert await h.redis.zscore(convs_key(0, peer), c) == CREATED + seq
        assert await h.redis.zscore(convs_key(0, SENDER), c) == CREATED + seq
        assert await h.redis.hget(read_key(0, SENDER), c) == str(seq).encode()  # sending marks read
    assert await h.redis.hget(session_shard_checkpoint_key(PART), "p") == b"3"


async def test_a_record_the_low_latency_path_wrote_is_skipped_and_the_others_are_written(harness):
    h = harness
    for seq in (1, 2, 3):  # offsets 0, 1, 2 of partition PART
        await h.produce(PART, dispatch(seq))
    m, projected = SessionMetrics(), Projected()
    # seq 2 from a node that names its record; seq 3 from an older node: no mailbox_seq
    await low_latency(h.sessions, m, projected, [frame(2, mseq.compose(1, 1)), frame(3, 0)])
    assert count(m, "lowlatency") == 4 and len(projected) == 1
    await durable_run(h, m, projected)
    assert m.durable_skipped._value.get() == 1
    assert count(m, "durable") == 4  # seqs 1 and 3: the recipient and the sender each
    assert len(projected) == 0
    await lists_hold_all_three(h)


async def test_a_write_that_failed_is_not_remembered_and_the_durable_path_writes_it(harness):
    h = harness
    for seq in (1, 2, 3):
        await h.produce(PART, dispatch(seq))

    class Unavailable:
        async def register(self, regs):
            raise StorageError("redis down")

    m, projected = SessionMetrics(), Projected()
    await low_latency(Unavailable(), m, projected, [frame(2, mseq.compose(1, 1))])
    assert m.projection_dropped.labels(reason="redis")._value.get() == 1 and len(projected) == 0
    await durable_run(h, m, projected)
    assert m.durable_skipped._value.get() == 0
    assert count(m, "durable") == 6
    await lists_hold_all_three(h)
