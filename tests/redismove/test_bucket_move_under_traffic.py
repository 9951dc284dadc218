"""A commit bucket moved to another core Redis instance under traffic (docs/decisions/0113;
`make test-redis-move`, not in `make test`: the stack of three Redis instances takes
minutes to start on a busy machine; the stack: tests/redismove/conftest.py).

Traffic the whole time, in conversations of the moving bucket B and of another one:
raw senders (each message retried with its client_message_id until ACKed: a CONFLICT
or any refusal a client does not retry fails the test) of two direct conversations
and one group conversation of B and one direct conversation elsewhere, each receiver
pulling from its own cursor; and an SDK client sending direct and group messages of B
to an SDK client (the app's view). Meanwhile `qimctl redis move-bucket --bucket B --to
<another core instance>` runs as an operator would run it, and exits 0.

Then: a send ACKed before the move and repeated after it is answered with its first
ACK; every ACKed message delivered to every recipient exactly once and in conversation
order (running cursors, a pull from 0, the SDK app), conversation_seq and message ids
only forward, `qimctl audit dispatch` at zero, every key of B on the target and none
on the source, every service healthy with the same process.
"""

from __future__ import annotations

import asyncio
import random
import time

from qim._core import ids
from qim.dev.redis_instances import layout_of
from qim.protocol import Opcode
from qim.sdk import direct_conversation
from qim.sdk.requests import create_group
from qim.stores.redis.bucketmove import bucket_keys
from qim.stores.redis.keys import CommitKeys
from tests.e2e.instancegate import audit_at_zero, direct_to, served_all, to_group, until
from tests.e2e.instancetraffic import Puller, Sender
from tests.e2e.rawclient import RawClient
from tests.e2e.test_groups import create
from tests.redismove.movekit import move_under_traffic, qimctl_move
from tests.sdk.realstack import runtime, shutdown

TENANT = 0
SEND_DEADLINE_S = 120.0
HEAL_S = 120.0


def _bucket(conv: bytes) -> int:
    return CommitKeys(TENANT, conv).bucket


def _pair(bucket: int, inside: bool) -> tuple[int, int]:
    """Two users whose direct conversation is (or is not) in commit bucket `bucket`."""
    while True:
        a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
        if (_bucket(ids.conversation_id_direct(TENANT, a, b)) == bucket) == inside:
            return a, b


def _gid(bucket: int) -> int:
    while True:
        gid = random.getrandbits(40) + 1
        if _bucket(ids.conversation_id_group(TENANT, gid)) == bucket:
            return gid


def ids_forward(puller: Puller, sender: Sender) -> None:
    """The message ids `sender` was ACKed only go forward (a check for served_all)."""
    mids = [sender.acks[b][0] for b in sender.order]
    assert mids == sorted(mids), f"{sender.name}: a message id went backwards across the move"


async def test_a_commit_bucket_moves_to_another_core_instance_under_traffic(stack3, tmp_path):
    st, es = stack3, stack3.engines
    st.wait_ready()
    pids = dict(st.pids)
    layout = layout_of(es.redis_addrs, es.shard_count)
    gid = random.getrandbits(40) + 1
    bucket = _bucket(ids.conversation_id_group(TENANT, gid))
    source = layout.core[layout.core_index(bucket)]
    target = next(a for a in layout.core if a != source)
    pairs = [_pair(bucket, True), _pair(bucket, True), _pair(bucket, False)]
    members = [random.getrandbits(40) + 1 for _ in range(3)]
    creator = await RawClient.login(st, members[0])
    try:
        op, reply = await create(creator, gid, members[1:])
        assert op == Opcode.GROUP_OK, reply
        # one send ACKed before the move, repeated after it (same client_message_id)
        a0, b0 = pairs[0]
        early = await RawClient.login(st, a0, device=3)
        try:
            first = await early.send_text(b0, b"before the move", cmid=b"m" * 16)
        finally:
            await early.close()
        assert first[0] == Opcode.SEND_ACK, first
    finally:
        await creator.close()
    senders = [Sender(st, a, f"d{k}", direct_to(b), conv=ids.conversation_id_direct(TENANT, a, b))
               for k, (a, b) in enumerate(pairs)]
    gsender = Sender(st, members[0], "g", to_group(gid), conv=ids.conversation_id_group(TENANT, gid))
    senders.append(gsender)
    pullers = {b: Puller(st, b) for _, b in pairs}
    pullers.update({m: Puller(st, m) for m in members[1:]})
    # the app's view: an SDK client sending direct and group messages of bucket B to another
    sa, sb = _pair(bucket, True)
    dconv = direct_conversation(TENANT, sa, sb)
    ra, rb = runtime(st, tmp_path, sa), runtime(st, tmp_path, sb)
    await ra.connect(), await rb.connect()
    gconv = (await create_group(ra, _gid(bucket), [sb])).conversation_id
    sdk_acks: dict[bytes, list] = {dconv: [], gconv: []}

    async def sdk_send(stop: asyncio.Event) -> None:
        i = 0
        while not stop.is_set():
            for conv, peer in ((dconv, sb), (gconv, 0)):
                ack = await ra.send_message(conv, peer, b"sdk %d" % i)  # the SDK retries what it may
                sdk_acks[conv].append((b"sdk %d" % i, ack.message_id, ack.conversation_seq))
            i += 1
            await asyncio.sleep(0.1)

    moved, took = await move_under_traffic(senders, pullers, sdk_send, lambda: min(map(len, sdk_acks.values())),
                                           lambda: qimctl_move(st, "move-bucket", "--bucket", bucket, target),
                                           SEND_DEADLINE_S, HEAL_S)
    refusals = {s.name: (len(s.refused), s.dropped) for s in senders}
    print(f"\nmove of commit bucket {bucket} {source} -> {target}: {took:.1f} s; acked "
          f"{[len(s.order) for s in senders]} + sdk {[len(v) for v in sdk_acks.values()]}; refusals {refusals}; "
          f"e.g. {next((s.refused[0] for s in senders if s.refused), None)}\n{moved.stdout}")
    assert any(refusals[n][0] for n in ("d0", "d1", "g")), f"no send of bucket {bucket} was refused: {refusals}"

    # the send ACKed before the move, repeated now: its first ACK (no CONFLICT, no new seq)
    early = await RawClient.login(st, a0, device=3)
    try:
        again = await early.send_text(b0, b"before the move", cmid=b"m" * 16)
    finally:
        await early.close()
    assert again[0] == Opcode.SEND_ACK and (again[1].message_id, again[1].conversation_seq) == (
        first[1].message_id, first[1].conversation_seq), again

    # every ACKed message to every recipient once and in order, ids and seqs only forward
    final = [(pullers[b], s) for (_, b), s in zip(pairs, senders)] + [(pullers[m], gsender) for m in members[1:]]
    await served_all(st, final, HEAL_S, ids_forward)
    for conv, acks in sdk_acks.items():
        await until(lambda conv=conv, acks=acks: len(rb.told.messages(conv)) >= len(acks), "the SDK app told all", HEAL_S)
        told = [(m.body, m.message_id, m.conversation_seq) for m in rb.told.messages(conv)]
        assert [t for t in told if t[0].startswith(b"sdk ")] == acks
        assert [m for _, m, _ in acks] == sorted(m for _, m, _ in acks)
    await shutdown(ra, rb)

    await audit_at_zero(st)

    # the bucket's keys on the target only, placed there by the map
    clients = {r.addr: r.client() for r in es.redises}
    for addr, expect in ((target, True), (source, False)):
        keys = sorted(clients[addr].scan_iter(match=b"qim:*{b%03d}*" % bucket, count=1000))
        assert bool(keys) == expect, (addr, keys[:5])
    from qim.infra.redis.client import connect
    c = connect(target)
    try:
        assert await bucket_keys(c, bucket)
    finally:
        await c.aclose()
    assert clients[es.redises[0].addr].hget("qim:placement", f"bucket:{bucket}") == target.encode()

    end = time.monotonic() + HEAL_S
    while (sick := {n: h for n in st.names if (h := st.healthz(n))[0] != 200}):
        assert time.monotonic() < end, f"not healthy again within {HEAL_S} s: {sick}"
        await asyncio.sleep(1.0)
    assert dict(st.pids) == pids and all(st.alive(n) for n in st.names)
