"""The whole stack on three standalone Redis instances (issue 35 section 1, decisions 0096
and 0098): engines as `qim-dev engines up --redis-instances 3` starts them (core = the
three, mailbox = the three rotated by one, 8 MailboxShards), every service kind (one node
each; no archive tier), clients through the gateway.

Direct and group messages are delivered once and in order, the session list and its
unread counts are exact, a mark read is listed; and each key family sits on the instance
the placement rules say (qim/stores/redis/topology.py), looked at with each instance's own
client: a conversation's commit keys on its commit bucket's core instance, a user's
mailbox and session state on the instance of the user's MailboxShard, nowhere else.
"""

from __future__ import annotations

import random

import pytest

from qim.dev.redis_instances import layout_of
from qim.stores.redis.keys import CommitKeys, convs_key, days_key, read_key
from tests.e2e.sdkclient import client, close_all, server_list
from tests.fixtures import running_stack
from tests.sdk.realstack import eventually

TENANT = 0  # the development tokens' tenant
DIRECT, GROUP = 12, 8  # messages of each kind


@pytest.fixture(scope="module")
def stack3(tmp_path_factory):
    """A private stack whose engines run three Redis instances."""
    with running_stack(tmp_path_factory.mktemp("redis3"), engines_kw={"redis_instances": 3}) as st:
        assert len(st.engines.redises) == 3
        yield st


def _users_on_every_instance(layout) -> list[int]:
    """Three fresh users whose MailboxShards live on three different mailbox instances."""
    base, found = random.getrandbits(40) + 1, {}
    for user in range(base, base + 10_000):
        found.setdefault(layout.mailbox_index(layout.user_shard(TENANT, user)), user)
        if len(found) == 3:
            return [found[i] for i in sorted(found)]
    raise AssertionError("no user of some mailbox instance within 10,000 ids")


def _holders(instances, key: str) -> list[str]:
    """The addresses of the instances holding `key` (each asked with its own client)."""
    return [addr for addr, c in instances.items() if c.exists(key)]


def _seqs(c, conv: bytes) -> list[int]:
    return [m.conversation_seq for m in c.told.messages(conv)]


async def test_messages_sessions_and_reads_over_three_instances_with_keys_where_the_rules_say(stack3, tmp_path):
    es = stack3.engines
    layout = layout_of(es.redis_addrs, es.shard_count)
    instances = {r.addr: r.client() for r in es.redises}
    a, b, c = _users_on_every_instance(layout)
    ca, cb, cc = [await client(stack3, tmp_path, u) for u in (a, b, c)]
    try:
        for x in (ca, cb, cc):
            await x.connect()
        direct = (await ca.open_direct(b)).conversation_id
        acks = [await ca.send_text(direct, f"direct {i}") for i in range(DIRECT)]
        group = (await ca.create_group([b, c])).conversation_id
        gacks = [await ca.send_text(group, f"group {i}") for i in range(GROUP)]

        # delivered once, in order, whole, to each recipient
        await eventually(lambda: len(cb.told.messages(direct)) >= DIRECT, what="b's direct messages", timeout=60)
        for x in (cb, cc):
            await eventually(lambda x=x: len(x.told.messages(group)) >= GROUP, what="the group messages", timeout=60)
        assert _seqs(cb, direct) == [k.conversation_seq for k in acks]
        assert [m.body for m in cb.told.messages(direct)] == [f"direct {i}".encode() for i in range(DIRECT)]
        for x in (cb, cc):
            assert [m.message_id for m in x.told.messages(group)] == [k.message_id for k in gacks]

        # the session list and its unread, as the server lists them
        async def listed(x, conv, unread):
            entry = (await server_list(x)).get(conv)
            return entry is not None and entry.unread == unread and entry.unread_exact
        for x, conv, unread in ((cb, direct, DIRECT), (cb, group, GROUP), (cc, group, GROUP)):
            await eventually(lambda x=x, conv=conv, unread=unread: listed(x, conv, unread),
                             what="an exact unread in the session list", timeout=60)
        head = (await server_list(ca))[direct].last_message
        assert (head.message_id, head.conversation_seq) == (acks[-1].message_id, acks[-1].conversation_seq)

        # mark read: b read the direct conversation up to the 5th message
        await cb.mark_read(direct, acks[4].conversation_seq)
        await eventually(lambda: listed(cb, direct, DIRECT - 5), what="the read position listed", timeout=60)
        assert (await server_list(cb))[direct].read_conversation_seq == acks[4].conversation_seq

        # each key on the instance the placement rules say, and nowhere else
        commit_keys = CommitKeys(TENANT, direct)
        assert _holders(instances, commit_keys.seq()) == [layout.core[layout.core_index(commit_keys.bucket)]]
        gkeys = CommitKeys(TENANT, group)
        assert _holders(instances, gkeys.group_members()) == [layout.core[layout.core_index(gkeys.bucket)]]
        for user in (a, b, c):
            home = layout.mailbox[layout.mailbox_index(layout.user_shard(TENANT, user))]
            assert _holders(instances, convs_key(TENANT, user)) == [home], f"user {user}'s conversation set"
            if user != a:  # the recipients have mailboxes
                assert _holders(instances, days_key(TENANT, user)) == [home], f"user {user}'s mailbox days"
        assert _holders(instances, read_key(TENANT, b)) == [layout.mailbox[layout.mailbox_index(
            layout.user_shard(TENANT, b))]]
        per_instance = {addr: cl.dbsize() for addr, cl in instances.items()}
        assert all(n > 0 for n in per_instance.values()), per_instance  # all three hold keys
    finally:
        await close_all(ca, cb, cc)
        for cl in instances.values():
            cl.close()
