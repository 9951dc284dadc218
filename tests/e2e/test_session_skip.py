"""The session's durable consumer skips the records the mailbox's low-latency
PROJECTION already registered, end to end on the shared stack (docs/decisions/0167):
the mailbox names each projected record (shard, mailbox_seq), the session remembers
what it wrote, and the durable consumer, reaching those records, moves its checkpoint
past them without writing them again. The list a device reads is exact either way."""

from __future__ import annotations

import asyncio

from qim._core import ids
from tests.e2e.rawclient import RawClient
from tests.e2e.sessionclient import entry_when, new_user, sessions
from tests.e2e.test_session_restart import metric
from tests.e2e.test_sessions import send_n

SKIPPED = "qim_session_durable_skipped_records_total"


async def test_records_the_low_latency_path_registered_are_skipped_by_the_durable_consumer(stack):
    before = metric(stack, "session", SKIPPED)
    me, peer = new_user(), new_user()
    conv = ids.conversation_id_direct(0, me, peer)
    sender = await RawClient.login(stack, peer)
    reader = await RawClient.login(stack, me)
    try:
        acks = await send_n(sender, me, 3)
        await entry_when(reader, conv, lambda e: e.unread == 3)
        # each message has a dispatch record for each member's shard, each projected; the
        # durable consumer reads them within its fetch wait (0.5 s) and skips them
        for _ in range(100):
            if metric(stack, "session", SKIPPED) >= before + 3:
                break
            await asyncio.sleep(0.1)
        assert metric(stack, "session", SKIPPED) >= before + 3
        listed = {e.conversation_id: e for e in await sessions(reader)}
        assert listed[conv].unread == 3 and listed[conv].last_message.message_id == acks[-1].message_id
    finally:
        await sender.close()
        await reader.close()
