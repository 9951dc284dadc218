"""Moving a deployment from the Redis mailbox to the CQL MailboxStore by replaying the
dispatch log (docs/operations.md "The CQL MailboxStore"; docs/decisions/0102): messages
delivered through the Redis mailbox, the mailbox node stopped and started again with
QIM_MAILBOX_STORE=cql, more messages sent; every message, the old ones rebuilt from the
log, is in the CQL mailbox once and in order. Run by `make test-cql3` (on three nodes),
or alone: `pytest tests/cql3/test_mailbox_migration.py` (one node)."""

from __future__ import annotations

import random

from qim.stores.cql.session import CqlSession
from tests.e2e.archive import archive_stack
from tests.e2e.chaos import Conversation, delivered_once


async def test_the_redis_mailbox_moves_to_cql_by_replaying_the_dispatch_log(tmp_path, shared_cassandra):
    with archive_stack(tmp_path, shared_cassandra) as st:
        convs = [Conversation(st, random.getrandbits(40) + 1, random.getrandbits(40) + 1) for _ in range(3)]
        for n in range(10):
            for i, c in enumerate(convs):
                await c.send(b"before-%d-%d" % (i, n))
        for c in convs:  # served by the Redis mailbox
            await delivered_once(st, c.peer, c.order, timeout=60)
        st.stop_service("mailbox")
        st.start_service("mailbox", extra_env={"QIM_MAILBOX_STORE": "cql"})
        for n in range(5):
            for i, c in enumerate(convs):
                await c.send(b"after-%d-%d" % (i, n), deadline_s=90)
        for c in convs:
            if c.client is not None:
                await c.client.close()
        for c in convs:  # from a zero cursor: the replayed ones and the new ones, once, in order
            entries = await delivered_once(st, c.peer, c.order, timeout=90)
            assert [e.message_id for e in entries if e.body in set(c.order)] == [c.acks[b].message_id for b in c.order]
        s = CqlSession(shared_cassandra.scylla(st.keyspace))
        try:
            rows = await s.execute(f"SELECT COUNT(*) FROM {st.keyspace}.mailbox_entry")
        finally:
            await s.close()
        assert rows[0][0] >= sum(len(c.order) for c in convs)  # materialized into CQL (the sender's copies too)
