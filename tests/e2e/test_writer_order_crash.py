"""Outbox order across a writer crash (docs/decisions/0017).

A writer SIGKILLs itself with a send reserved but not published (fault injection). Its
replacement, with CommitRecovery held back, takes a newer send of the same
conversation: the reserve finds the older unpublished reservation and publishes it
first, so the Outbox and the recipient's mailbox keep conversation_seq order; the
client's retry of the older send then gets its original coordinates.
"""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from qim._core import ids
from qim.errors import ErrorCode
from qim.protocol import Opcode
from tests.e2e.outboxread import first_occurrences, outbox_end, outbox_records
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.e2e.test_writer_crash import NO_RECOVERY, crash_stack, restart_writer  # noqa: F401 (fixture)


@pytest.mark.parametrize("point", ["after_reserve", "after_record"])
async def test_an_older_reserved_commit_is_published_before_a_newer_one(crash_stack, point):  # noqa: F811
    a_id, b_id = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    conv = ids.conversation_id_direct(0, a_id, b_id)
    bootstrap = crash_stack.engines.kafka_bootstrap
    a = await RawClient.login(crash_stack, a_id)
    op, before = await a.send_text(b_id, b"before")
    assert op == Opcode.SEND_ACK
    start = outbox_end(bootstrap)
    restart_writer(crash_stack, {"QIM_FAULT_INJECTION": "1", "QIM_WRITER_FAULT_POINT": point, **NO_RECOVERY})
    older_cmid = os.urandom(16)
    op, err = await a.send_text(b_id, b"older", cmid=older_cmid)
    assert op == Opcode.ERROR and err.code == ErrorCode.UNAVAILABLE, err
    await asyncio.sleep(0.2)
    assert not crash_stack.alive("writer"), "fault injection did not kill the writer"
    restart_writer(crash_stack, NO_RECOVERY)  # nobody resumes the older send but the next reserve
    op, newer = await a.send_text(b_id, b"newer")
    assert op == Opcode.SEND_ACK, newer
    published = first_occurrences(outbox_records(bootstrap, start, conv, lambda r: len(first_occurrences(r)) >= 2))
    assert [r.body for r in published] == [b"older", b"newer"]
    older_seq = published[0].conversation_seq
    assert before.conversation_seq < older_seq < newer.conversation_seq
    op, older = await a.send_text(b_id, b"older", cmid=older_cmid)  # the lost ACK, replayed
    assert op == Opcode.SEND_ACK and (older.conversation_seq, older.message_id) == (older_seq, published[0].message_id)
    b = await RawClient.login(crash_stack, b_id)
    entries = await wait_for_entries(b, 3, timeout=30)
    assert [e.body for e in entries] == [b"before", b"older", b"newer"]
    assert len({e.message_id for e in entries}) == 3  # the older one delivered once
    await a.close(), await b.close()
