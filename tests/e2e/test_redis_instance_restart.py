"""The instance-restart gate of issue 35 §3 on three standalone Redis instances
(decisions 0096 and 0098): traffic through the whole stack while one Redis instance is
SIGKILLed and restarted on its AOF after longer than the shard lease.

The stack: engines with three Redis instances (core = the three, mailbox = the three
rotated by one, 8 MailboxShards), every service kind, two mailbox and two session nodes.
Two runs on one stack, each killing another instance: the first one (the most commit
buckets, 86 of 256, two MailboxShards and the home keys: shard registry and leases, HLC
clock leases, revocation feed), then the second one (the most MailboxShards, three of 8,
and 85 commit buckets).

Senders of direct conversations (one per core instance, their receivers one per mailbox
instance) and of one group (its commit bucket on the killed instance, members on every
mailbox instance) send through the gateway the whole time, each message retried with
its client_message_id until ACKed; receivers pull from their own cursors the whole time.
Then: every ACKed message is delivered to every recipient exactly once and in
conversation order (on the receivers' running cursors and on a pull from 0), no cursor
went back, `qimctl audit dispatch` is at zero, every service is healthy again with the
same process (nobody restarted one), the session nodes list each conversation with its
last message and an exact unread, and every send refused during the outage was
refused with a code the client retries (its retry then ACKed: nothing lost silently).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from qim.dev.redis_instances import layout_of
from tests.e2e.instancegate import Crowd, healthy_again, lists_exact, until
from tests.e2e.test_session_redis_restart import OUTAGE_S
from tests.fixtures import running_stack

SEND_DEADLINE_S = 120.0  # one message's retries (the outage plus the leases moving back)
HEAL_S = 120.0


@pytest.fixture(scope="module")
def stack3(tmp_path_factory):
    """Three Redis instances, every service kind, two mailbox and two session nodes."""
    with running_stack(tmp_path_factory.mktemp("redis3restart"), engines_kw={"redis_instances": 3},
                       nodes={"mailbox": 2, "session": 2}) as st:
        assert len(st.engines.redises) == 3
        yield st


@pytest.mark.parametrize("killed_index", [0, 1], ids=["home-and-most-buckets", "most-mailbox-shards"])
async def test_traffic_while_one_redis_instance_restarts(stack3, killed_index):
    st, es = stack3, stack3.engines
    st.wait_ready()
    pids = dict(st.pids)
    layout = layout_of(es.redis_addrs, es.shard_count)
    killed = es.redises[killed_index]
    crowd = Crowd(st, layout, killed.addr)
    senders = crowd.senders
    await crowd.start(SEND_DEADLINE_S)
    loop = asyncio.get_running_loop()
    try:
        await until(lambda: crowd.acked(3), "every sender ACKed before the kill", HEAL_S)
        before = {s.name: len(s.order) for s in senders}
        t_kill = loop.time()
        await loop.run_in_executor(None, killed.kill)  # SIGKILL by the engine's own pid
        await asyncio.sleep(OUTAGE_S)
        await loop.run_in_executor(None, killed.start, 60)  # replays its AOF
        t_back = loop.time()
        await crowd.more(3, "traffic flowing again after the restart", HEAL_S)
    finally:
        await crowd.finish()

    # the outage was seen by the clients, and only as refusals a client retries (each
    # retried to an ACK: every body a sender tried is in its ACKed order)
    seen = {s.name: (dict(Counter(s.refused)), s.dropped) for s in senders}
    for name in (f"d{killed_index}", "g"):  # their commit buckets are on the killed instance
        assert seen[name][0] or seen[name][1], f"{name}: no send refused or dropped during the outage: {seen}"
    window = {s.name: (round(s.refused_at[0] - t_kill, 1), round(s.refused_at[-1] - t_kill, 1))
              for s in senders if s.refused_at}
    print(f"\nredis instance {killed.name} restart: acked {[len(s.order) for s in senders]} "
          f"(before the kill {before}), refusals and drops {seen}; first and last refusal "
          f"(s after the kill; back at {t_back - t_kill:.1f} s): {window}")

    # every ACKed message to every recipient once and in order (running cursors, a pull
    # from 0), no cursor back, the audit at zero
    await crowd.check_delivered(HEAL_S)

    # every service healthy again, the same processes (nothing restarted by hand)
    await healthy_again(st, pids, HEAL_S)

    # and the session nodes list every conversation with its last message and an exact unread
    await lists_exact(st, crowd.final, HEAL_S)
