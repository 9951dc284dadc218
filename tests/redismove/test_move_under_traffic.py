"""A MailboxShard moved to another Redis instance under traffic (docs/decisions/0104;
`make test-redis-move`, not in `make test`: the stack of three Redis instances takes
minutes to start on a busy machine).

The stack: three Redis instances (core = the three, mailbox = the three rotated by one,
8 MailboxShards), every service kind, two mailbox and two session nodes. Traffic the
whole time: raw senders (each message retried with its client_message_id until ACKed)
to two receivers of the moving shard S and one of another shard, each receiver pulling
from its own cursor; and an SDK client sending to an SDK client of shard S (the app's
view). Meanwhile `qimctl redis move-shard --shard S --to <another mailbox instance>`
runs as an operator would run it, and exits 0.

Then: every ACKed message delivered to every recipient exactly once and in
conversation order (on the running cursors, on a pull from 0 by a new device, and as
the SDK app was told it), no cursor went back, `qimctl audit dispatch` at zero, every
key of shard S on the target and none on the source, the shard served again by a
mailbox node and a session node under a higher owner_epoch, the session lists exact,
every service healthy with the same process, and every refusal one a client retries.
"""

from __future__ import annotations

import asyncio
import random

from qim._core import ids
from qim.dev.redis_instances import layout_of
from qim.sdk import direct_conversation
from qim.stores.redis.shardkeys import shard_keys
from tests.e2e.instancegate import (
    audit_at_zero,
    cursors_forward,
    direct_to,
    healthy_again,
    lists_exact,
    served_all,
    until,
)
from tests.e2e.instancetraffic import Puller, Sender
from tests.redismove.movekit import move_under_traffic, qimctl_move
from tests.sdk.realstack import runtime, shutdown

TENANT = 0
SEND_DEADLINE_S = 120.0
HEAL_S = 120.0


def _user_in(layout, shard: int, inside: bool) -> int:
    while True:
        u = random.getrandbits(40) + 1
        if (layout.user_shard(TENANT, u) == shard) == inside:
            return u


def _owners(st, shard: int) -> dict[str, tuple[str, int]]:
    c = st.engines.redises[0].client()  # the registry is on the home
    return {k: (c.hget(f"qim:reg:shard:{k}:{shard}", "node").decode(),
                int(c.hget(f"qim:reg:shard:{k}:{shard}", "epoch") or 0)) for k in ("mailbox", "session")}


async def test_a_mailbox_shard_moves_to_another_instance_under_traffic(stack3, tmp_path):
    st, es = stack3, stack3.engines
    st.wait_ready()
    pids = dict(st.pids)
    layout = layout_of(es.redis_addrs, es.shard_count)
    shard = layout.user_shard(TENANT, _user_in(layout, 0, False))  # any shard
    source = layout.mailbox[layout.mailbox_index(shard)]
    target = next(a for a in layout.mailbox if a != source)
    inside = [_user_in(layout, shard, True) for _ in range(2)]
    outside = _user_in(layout, shard, False)
    pairs = [(_user_in(layout, shard, False), b) for b in (*inside, outside)]
    senders = [Sender(st, a, f"d{k}", direct_to(b), conv=ids.conversation_id_direct(TENANT, a, b))
               for k, (a, b) in enumerate(pairs)]
    pullers = {b: Puller(st, b) for _, b in pairs}
    # the app's view: an SDK client sending to an SDK client of the moving shard
    sa, sb = _user_in(layout, shard, False), _user_in(layout, shard, True)
    conv = direct_conversation(TENANT, sa, sb)
    ra, rb = runtime(st, tmp_path, sa), runtime(st, tmp_path, sb)
    await ra.connect(), await rb.connect()
    sdk_acks: list = []

    async def sdk_send(stop: asyncio.Event) -> None:
        i = 0
        while not stop.is_set():
            ack = await ra.send_message(conv, sb, b"sdk %d" % i)  # the SDK retries what it may
            sdk_acks.append((b"sdk %d" % i, ack.message_id, ack.conversation_seq))
            i += 1
            await asyncio.sleep(0.1)

    before_owners = _owners(st, shard)
    moved, took = await move_under_traffic(senders, pullers, sdk_send, lambda: len(sdk_acks),
                                           lambda: qimctl_move(st, "move-shard", "--shard", shard, target),
                                           SEND_DEADLINE_S, HEAL_S)
    print(f"\nmove of shard {shard} {source} -> {target}: {took:.1f} s; acked "
          f"{[len(s.order) for s in senders]} + sdk {len(sdk_acks)}; refusals "
          f"{[(s.name, len(s.refused), s.dropped) for s in senders]}; pull refusals "
          f"{[len(p.refused) for p in pullers.values()]}\n{moved.stdout}")

    # every ACKed message to every recipient once and in order, cursors never back
    final = [(pullers[b], s) for (_, b), s in zip(pairs, senders)]
    await served_all(st, final, HEAL_S, cursors_forward)
    # the SDK app was told every ACKed message once, in conversation order
    await until(lambda: len(rb.told.messages(conv)) >= len(sdk_acks), "the SDK receiver told every message", HEAL_S)
    told = rb.told.messages(conv)
    assert [(m.body, m.message_id, m.conversation_seq) for m in told] == sdk_acks
    await shutdown(ra, rb)

    await audit_at_zero(st)

    # the shard's keys on the target only; served again under higher owner_epochs
    clients = {r.addr: r.client() for r in es.redises}
    from qim.infra.redis.client import connect
    for addr, expect in ((target, True), (source, False)):
        c = connect(addr)
        try:
            keys = await shard_keys(c, shard, layout.user_shard)
        finally:
            await c.aclose()
        assert bool(keys) == expect, (addr, keys[:5])
    assert clients[es.redises[0].addr].hget("qim:placement", f"shard:{shard}") == target.encode()
    owners = _owners(st, shard)
    for kind, (node, epoch) in owners.items():
        assert node and node != "qimctl-move" and epoch >= before_owners[kind][1] + 2, (kind, before_owners, owners)

    await healthy_again(st, pids, HEAL_S)
    await lists_exact(st, final, HEAL_S)
