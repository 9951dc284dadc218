"""Writer crash gates (docs/design.md §5.2, §12 reliability).

For each commit state the writer SIGKILLs itself (fault injection), is restarted, and
either the client retries with the same client_message_id or CommitRecovery alone
finishes the commit. Then: one SendAck whose coordinates equal any ACK seen before, the
Outbox holds the message at least once, the recipient's mailbox holds it exactly once,
and no conversation_seq or message_id is ever reused.
"""

from __future__ import annotations

import asyncio
import os
import random

import pytest
from confluent_kafka import Consumer, TopicPartition

from qim.consts import OUTBOX_TOPIC
from qim.errors import ErrorCode
from qim.faults import WRITER_POINTS as POINTS
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.fixtures import running_stack

NO_RECOVERY = {"QIM_COMMIT_RECOVERY_STALE_MS": "3600000"}
FAST_RECOVERY = {"QIM_COMMIT_RECOVERY_STALE_MS": "300"}


@pytest.fixture(scope="module")
def crash_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("crash")) as st:
        yield st


def restart_writer(stack, env: dict) -> None:
    stack.stop_service("writer")
    stack.start_service("writer", env)
    stack.wait_ready(["writer"])


def outbox_count(bootstrap: str, message_id: bytes) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "audit-" + os.urandom(4).hex(),
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(OUTBOX_TOPIC, 0, 0)])
    count = 0
    while True:
        m = consumer.poll(2.0)
        if m is None or (m.error() is not None and m.error().code() == -191):  # partition EOF
            break
        if m.error() is None and m.key() == message_id:
            count += 1
    consumer.close()
    return count


@pytest.mark.parametrize("recovery", ["client_retry", "commit_recovery"])
@pytest.mark.parametrize("point", POINTS)
async def test_writer_crash_at_each_commit_state(crash_stack, point, recovery):
    a_id = random.getrandbits(40) + 1
    b_id = a_id + 1
    a = await RawClient.login(crash_stack, a_id)
    _, before = await a.send_text(b_id, b"before the crash")
    restart_writer(crash_stack, {"QIM_FAULT_INJECTION": "1", "QIM_WRITER_FAULT_POINT": point, **NO_RECOVERY})
    cmid = os.urandom(16)
    op, err = await a.send_text(b_id, b"in flight", cmid=cmid)
    assert op == Opcode.ERROR and err.code == ErrorCode.UNAVAILABLE, err  # no ACK before COMMITTED
    await asyncio.sleep(0.2)
    assert not crash_stack.alive("writer"), "fault injection did not kill the writer"
    b = await RawClient.login(crash_stack, b_id)
    if recovery == "client_retry":
        restart_writer(crash_stack, NO_RECOVERY)
        op, ack = await a.send_text(b_id, b"in flight", cmid=cmid)
        assert op == Opcode.SEND_ACK, ack
    else:
        restart_writer(crash_stack, FAST_RECOVERY)
        entries = await wait_for_entries(b, 2, timeout=30)  # CommitRecovery finished it alone
        assert [e.body for e in entries] == [b"before the crash", b"in flight"]
        op, ack = await a.send_text(b_id, b"in flight", cmid=cmid)
        assert op == Opcode.SEND_ACK, ack
        assert ack.message_id == entries[1].message_id and ack.conversation_seq == entries[1].conversation_seq
    op, again = await a.send_text(b_id, b"in flight", cmid=cmid)  # the ACK is stable
    assert (again.message_id, again.conversation_seq, again.created_at_ms) == \
        (ack.message_id, ack.conversation_seq, ack.created_at_ms)
    _, after = await a.send_text(b_id, b"after the crash")
    entries = await wait_for_entries(b, 3, timeout=30)
    assert [e.body for e in entries] == [b"before the crash", b"in flight", b"after the crash"]
    seqs = [e.conversation_seq for e in entries]
    assert seqs == sorted(set(seqs)) and seqs[1] == ack.conversation_seq
    mids = [before.message_id, ack.message_id, after.message_id]
    assert len(set(mids)) == 3 and [e.message_id for e in entries] == mids
    assert outbox_count(crash_stack.engines.kafka_bootstrap, ack.message_id) >= 1
    await a.close(), await b.close()
