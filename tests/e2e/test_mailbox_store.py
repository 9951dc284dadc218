"""Mailbox store behaviour on real engines (docs/design.md §5.4–5.5).

Retention and CURSOR_EXPIRED, a digest conflict stopping only its shard, DispatchProgress
GC (only when configured), and shards split over two mailbox processes.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import urllib.error
import urllib.request

import pytest
import redis
from confluent_kafka import Producer

from qim._core import ids
from qim._core import mailbox_seq as mseq
from qim._core.types import MessageCoord
from qim.consts import DISPATCH_TOPIC
from qim.errors import ErrorCode
from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode
from qim.wire.dispatch import Dispatch
from tests.e2e.chaos import Conversation, delivered_once
from tests.e2e.rawclient import RawClient
from tests.fixtures import running_stack

SHARDS = 8


@pytest.fixture(scope="module")
def store_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("mbx")) as st:
        yield st


def inject(stack, d: Dispatch) -> int:
    """Produce a dispatch straight into the log (as a buggy or old fanout would)."""
    out = []
    p = Producer({"bootstrap.servers": stack.engines.kafka_bootstrap, "acks": "all"})
    p.produce(DISPATCH_TOPIC, d.encode(), key=d.dispatch_id, partition=d.target_shard,
              on_delivery=lambda err, msg: out.append((err, msg)))
    p.flush(10)
    (err, msg), = out
    assert err is None, err
    return msg.offset()


def dispatch_for(user: int, created_at_ms: int, body: bytes, dispatch_id: bytes | None = None) -> Dispatch:
    shard = ids.mailbox_shard(0, user, SHARDS)
    mid = os.urandom(16)
    coord = MessageCoord(mid, ids.conversation_id_direct(0, user, user + 1), 1, user + 1, created_at_ms, 1, b"")
    return Dispatch(tenant=0, dispatch_id=dispatch_id or ids.dispatch_id(mid, shard), coord=coord,
                    target_shard=shard, client_message_id=os.urandom(16), recipients=(user,), body=body)


async def pull(stack, user: int, cursor: int):
    client = await RawClient.login(stack, user, device=random.getrandbits(31) + 1)
    op, reply = await client.request(Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(cursor=cursor).SerializeToString())
    await client.close()
    return op, reply


async def test_retention_trims_old_days_and_expires_cursors_below_the_boundary(store_stack):
    st = store_stack
    a = random.getrandbits(40) + 1
    b = a + 1
    conv = Conversation(st, a, b)
    await conv.send(b"before")
    await delivered_once(st, b, [b"before"])  # its dispatch is in the log before the injected one
    ten_days_ago = time.time_ns() // 1_000_000 - 10 * 86_400_000
    old_offset = inject(st, dispatch_for(b, ten_days_ago, b"too old"))
    await conv.send(b"after")
    entries = await delivered_once(st, b, [b"before", b"after"])
    assert b"too old" not in [e.body for e in entries]  # removed by retention on read
    first, last = entries[0].mailbox_seq, entries[-1].mailbox_seq
    assert mseq.split(first)[1] < old_offset < mseq.split(last)[1]
    op, err = await pull(st, b, first)  # this device never saw the removed entry
    assert op == Opcode.ERROR and err.code == ErrorCode.CURSOR_EXPIRED
    op, batch = await pull(st, b, last)  # past the boundary: fine, nothing new
    assert op == Opcode.MAILBOX_BATCH and list(batch.entries) == [] and batch.next_cursor == last
    op, batch = await pull(st, b, 0)  # a zero cursor never expires
    assert op == Opcode.MAILBOX_BATCH and [e.body for e in batch.entries] == [b"before", b"after"]


def test_dispatch_progress_is_kept_without_gc_configuration(store_stack):
    r = redis.Redis(*store_stack.engines.redis_addr.split(":"))
    assert len(list(r.scan_iter("qim:dp:*", count=1000))) > 0


async def test_digest_conflict_stops_only_its_shard(store_stack):
    st = store_stack
    a = random.getrandbits(40) + 1
    b = next(u for u in range(a + 1, a + 100) if ids.mailbox_shard(0, u, SHARDS) != ids.mailbox_shard(0, a, SHARDS))
    conv = Conversation(st, a, b)
    await conv.send(b"genuine")
    entries = await delivered_once(st, b, [b"genuine"])
    shard = ids.mailbox_shard(0, b, SHARDS)
    forged = dispatch_for(b, entries[0].created_at_ms, b"forged", dispatch_id=ids.dispatch_id(entries[0].message_id, shard))
    inject(st, forged)
    for _ in range(100):
        op, reply = await pull(st, b, 0)
        if op == Opcode.ERROR:
            break
        await asyncio.sleep(0.1)
    assert op == Opcode.ERROR and reply.code == ErrorCode.MAILBOX_DIRTY
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(f"http://{st.metrics['mailbox']}/healthz", timeout=2)
    assert exc.value.code == 503 and f"shard {shard}" in exc.value.read().decode()
    op, batch = await pull(st, a, 0)  # the sender's shard is another one: still served
    assert op == Opcode.MAILBOX_BATCH and [e.body for e in batch.entries] == [b"genuine"]


@pytest.fixture(scope="module")
def split_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("split"), mailboxes=2,
                       extra_env={"QIM_DISPATCH_PROGRESS_GC_SAFETY_MS": "300"}) as st:
        yield st


async def test_two_mailbox_processes_split_the_shards_and_gc_runs(split_stack):
    st = split_stack
    base = random.getrandbits(40) + 1
    users = list(range(base, base + 12))
    assert len({ids.mailbox_shard(0, u, SHARDS) % 2 for u in users}) == 2  # both nodes involved
    convs = [Conversation(st, u, users[(i + 1) % len(users)]) for i, u in enumerate(users)]
    for c in convs:
        await c.send(f"hello from {c.sender}".encode())
    for c in convs:
        await delivered_once(st, c.peer, [f"hello from {c.sender}".encode()])
    r = redis.Redis(*st.engines.redis_addr.split(":"))
    for _ in range(100):  # W passed every dispatch and the 300 ms safety window elapsed
        if not list(r.scan_iter("qim:dp:*", count=1000)):
            break
        await asyncio.sleep(0.1)
    assert list(r.scan_iter("qim:dp:*", count=1000)) == []
    for c in convs:  # entries survive their DispatchProgress
        await delivered_once(st, c.peer, [f"hello from {c.sender}".encode()])
