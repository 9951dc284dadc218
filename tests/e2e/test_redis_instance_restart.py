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
import random
import time
from collections import Counter

import pytest

from qim._core import ids
from qim.dev.redis_instances import layout_of
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from qim.stores.redis.keys import CommitKeys
from tests.e2e.chaos import delivered_once, run_audit
from tests.e2e.instancetraffic import Puller, Sender
from tests.e2e.rawclient import RawClient, call
from tests.e2e.sessionclient import entry_when
from tests.e2e.test_groups import create
from tests.e2e.test_session_redis_restart import OUTAGE_S
from tests.fixtures import running_stack

TENANT = 0  # the development tokens' tenant
SEND_DEADLINE_S = 120.0  # one message's retries (the outage plus the leases moving back)
HEAL_S = 120.0


@pytest.fixture(scope="module")
def stack3(tmp_path_factory):
    """Three Redis instances, every service kind, two mailbox and two session nodes."""
    with running_stack(tmp_path_factory.mktemp("redis3restart"), engines_kw={"redis_instances": 3},
                       nodes={"mailbox": 2, "session": 2}) as st:
        assert len(st.engines.redises) == 3
        yield st


def _pairs(layout) -> list[tuple[int, int]]:
    """(sender, receiver) per instance k: the direct conversation's commit bucket on core
    instance k and the receiver's MailboxShard on mailbox instance k."""
    out = {}
    while len(out) < len(layout.core):
        a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
        k = layout.core_index(CommitKeys(TENANT, ids.conversation_id_direct(TENANT, a, b)).bucket)
        if k not in out and layout.mailbox[layout.mailbox_index(layout.user_shard(TENANT, b))] == layout.core[k]:
            out[k] = (a, b)
    return [out[k] for k in sorted(out)]


def _group(layout, killed: str) -> tuple[int, list[int]]:
    """A group id whose commit bucket is on the killed instance, and three members (the
    sender first) whose MailboxShards are on the three mailbox instances."""
    while True:
        gid = random.getrandbits(40) + 1
        if layout.core[layout.core_index(CommitKeys(TENANT, ids.conversation_id_group(TENANT, gid)).bucket)] == killed:
            break
    found: dict[int, int] = {}
    while len(found) < 3:
        u = random.getrandbits(40) + 1
        found.setdefault(layout.mailbox_index(layout.user_shard(TENANT, u)), u)
    return gid, [found[i] for i in sorted(found)]


def _direct(peer: int):
    async def build(client: RawClient, body: bytes, cmid: bytes):
        return await client.send_text(peer, body, cmid=cmid)
    return build


def _to_group(gid: int):
    async def build(client: RawClient, body: bytes, cmid: bytes):
        return await call(client, Opcode.SEND_MESSAGE, message_pb2.SendMessage(
            client_message_id=cmid, conversation_id=ids.conversation_id_group(TENANT, gid), message_type=1, body=body))
    return build


async def _until(cond, what: str, timeout: float = HEAL_S) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.3)


def _check_served(puller: Puller, sender: Sender) -> None:
    """The entries of `sender`'s conversation served to `puller`: its ACKed messages,
    each once, in conversation order, with the ACK's coordinates."""
    prefix = sender.name.encode() + b" "
    got = [e for e in puller.texts() if e.body.startswith(prefix)]
    assert [e.body for e in got] == sender.order, (
        f"user {puller.user} from {sender.name}: served {len(got)}, ACKed {len(sender.order)}; "
        f"first difference at {next((i for i, (x, y) in enumerate(zip([e.body for e in got], sender.order)) if x != y), min(len(got), len(sender.order)))}")
    assert [(e.message_id, e.conversation_seq) for e in got] == [sender.acks[b] for b in sender.order]
    seqs = [e.conversation_seq for e in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@pytest.mark.parametrize("killed_index", [0, 1], ids=["home-and-most-buckets", "most-mailbox-shards"])
async def test_traffic_while_one_redis_instance_restarts(stack3, killed_index):
    st, es = stack3, stack3.engines
    st.wait_ready()
    pids = dict(st.pids)
    layout = layout_of(es.redis_addrs, es.shard_count)
    killed = es.redises[killed_index]
    pairs = _pairs(layout)
    gid, members = _group(layout, killed.addr)
    creator = await RawClient.login(st, members[0])
    try:
        op, reply = await create(creator, gid, members[1:])
        assert op == Opcode.GROUP_OK, reply
    finally:
        await creator.close()

    senders = [Sender(st, a, f"d{k}", _direct(b), conv=ids.conversation_id_direct(TENANT, a, b))
               for k, (a, b) in enumerate(pairs)]
    gsender = Sender(st, members[0], "g", _to_group(gid), conv=ids.conversation_id_group(TENANT, gid))
    senders.append(gsender)
    pullers = {b: Puller(st, b) for _, b in pairs}
    pullers.update({m: Puller(st, m) for m in members[1:]})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(s.run(stop, SEND_DEADLINE_S)) for s in senders]
    tasks += [loop.create_task(p.run(stop)) for p in pullers.values()]

    def acked(n: int) -> bool:
        for t in tasks:
            if t.done():
                t.result()  # a failed sender or puller fails the test with its own message
        return all(len(s.order) >= n for s in senders)

    try:
        await _until(lambda: acked(3), "every sender ACKed before the kill")
        before = {s.name: len(s.order) for s in senders}
        t_kill = loop.time()
        await loop.run_in_executor(None, killed.kill)  # SIGKILL by the engine's own pid
        await asyncio.sleep(OUTAGE_S)
        await loop.run_in_executor(None, killed.start, 60)  # replays its AOF
        t_back = loop.time()
        restarted = {s.name: len(s.order) for s in senders}
        await _until(lambda: all(len(s.order) >= restarted[s.name] + 3 for s in senders) and acked(0),
                     "traffic flowing again after the restart")
    finally:
        stop.set()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [d for d in done if isinstance(d, BaseException)]
    assert not failures, failures

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

    # every ACKed message to every recipient once and in order: on the running cursors...
    final = [(pullers[b], s) for (_, b), s in zip(pairs, senders)]
    final += [(pullers[m], gsender) for m in members[1:]]
    for p, s in final:
        end = time.monotonic() + HEAL_S
        while len([e for e in p.texts() if e.body.startswith(s.name.encode() + b" ")]) < len(s.order) \
                and time.monotonic() < end:
            await p.pull_once()
            await asyncio.sleep(0.5)
        await p.close()
        _check_served(p, s)
        assert p.cursors == sorted(p.cursors), f"user {p.user}'s cursor went back"
    # ...and on a pull from 0 by a new device
    for p, s in final:
        await delivered_once(st, p.user, list(s.order), timeout=HEAL_S)

    # the audit at zero
    audit = run_audit(st)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "committed_without_dispatch=0 dispatch_without_commit=0 coordinate_mismatch=0 wrong_partition=0" \
        in audit.stdout, audit.stdout

    # every service healthy again, the same processes (nothing restarted by hand)
    end = time.monotonic() + HEAL_S
    while (sick := {n: h for n in st.names if (h := st.healthz(n))[0] != 200}):
        assert time.monotonic() < end, f"not healthy again within {HEAL_S} s: {sick}"
        await asyncio.sleep(1.0)
    assert dict(st.pids) == pids and all(st.alive(n) for n in st.names)

    # and the session nodes list every conversation with its last message and an exact unread
    for p, s in final:
        c = await RawClient.login(st, p.user, device=9)
        try:
            last = s.acks[s.order[-1]]
            await entry_when(c, s.conv, lambda e, s=s, last=last: e.unread_exact and e.unread == len(s.order)
                             and e.last_message.conversation_seq == last[1], timeout=HEAL_S)
        finally:
            await c.close()
