"""The direct send path end to end on real Redis and Kafka (docs/design.md §5, §12)."""

from __future__ import annotations

import asyncio
import os
import random
import urllib.request

from confluent_kafka import Consumer, TopicPartition

from qim._core import ids, mailbox_seq
from qim.consts import OUTBOX_TOPIC
from qim.errors import ErrorCode
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.stores.redis.keys import CommitKeys
from tests.e2e.rawclient import RawClient, wait_for_entries


def outbox_values(bootstrap: str, message_id: bytes) -> list[bytes]:
    """Every Outbox record keyed by message_id, read from offset 0 to the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-" + os.urandom(4).hex(),
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(OUTBOX_TOPIC, 0, 0)])
    out = []
    try:
        while True:
            m = consumer.poll(5.0)
            assert m is not None, "outbox read stalled"
            if m.error() is not None:
                assert m.error().code() == -191, m.error()  # _PARTITION_EOF: done
                return out
            if m.key() == message_id:
                out.append(m.value())
    finally:
        consumer.close()


def users(n: int) -> list[int]:
    base = random.getrandbits(40) + 1
    return [base + i for i in range(n)]


async def test_online_send_receive_push_and_pull(stack):
    a_id, b_id = users(2)
    a, b = await RawClient.login(stack, a_id), await RawClient.login(stack, b_id)
    cmid = os.urandom(16)
    op, ack = await a.send_text(b_id, "hello, 世界".encode(), cmid=cmid)
    assert op == Opcode.SEND_ACK and ack.client_message_id == cmid and ack.conversation_seq >= 1
    entries = await wait_for_entries(b, 1)
    assert [e.body for e in entries] == ["hello, 世界".encode()]
    assert entries[0].message_id == ack.message_id and entries[0].sender_id == a_id
    assert entries[0].client_message_id == b""  # only the sender's own entry carries it
    own = await wait_for_entries(a, 1)
    assert own[0].client_message_id == cmid and own[0].message_id == ack.message_id
    # the push reached the online recipient as well (best effort, but nothing is lost here)
    for _ in range(50):
        if b.pushes:
            break
        await b.request(Opcode.PING, b"")
        await asyncio.sleep(0.05)
    assert any(op == Opcode.PUSH_EVENTS for op, _ in b.pushes)
    await a.close(), await b.close()


async def test_ack_only_after_commit_and_outbox(stack, engines):
    a_id, b_id = users(2)
    a = await RawClient.login(stack, a_id)
    op, ack = await a.send_text(b_id, b"durable")
    assert op == Opcode.SEND_ACK
    import redis

    host, port = engines.redis_addr.split(":")
    r = redis.Redis(host=host, port=int(port))
    keys = CommitKeys(0, ids.conversation_id_direct(0, a_id, b_id))
    state = r.hgetall(keys.commit(a_id, ack.client_message_id))
    assert state[b"st"] == b"COMMITTED" and state[b"mid"] == ack.message_id
    assert r.pttl(keys.commit(a_id, ack.client_message_id)) > 0  # helper state expires (2 h)
    found = None
    for value in outbox_values(engines.kafka_bootstrap, ack.message_id):
        found = internal_pb2.OutboxRecord.FromString(value)
    assert found is not None and found.record.body == b"durable"
    assert sorted(found.recipients) == sorted([a_id, b_id])
    await a.close()


async def test_duplicate_cmid_replays_one_ack_and_one_delivery(stack):
    a_id, b_id = users(2)
    a, b = await RawClient.login(stack, a_id), await RawClient.login(stack, b_id)
    cmid = os.urandom(16)
    _, first = await a.send_text(b_id, b"once", cmid=cmid)
    _, again = await a.send_text(b_id, b"once", cmid=cmid)
    assert (again.message_id, again.conversation_seq, again.created_at_ms) == \
        (first.message_id, first.conversation_seq, first.created_at_ms)
    _, marker = await a.send_text(b_id, b"marker")
    entries = await wait_for_entries(b, 2)
    assert [e.body for e in entries] == [b"once", b"marker"]


async def test_same_cmid_other_content_is_conflict_and_consumes_no_seq(stack):
    a_id, b_id = users(2)
    a = await RawClient.login(stack, a_id)
    cmid = os.urandom(16)
    _, first = await a.send_text(b_id, b"original", cmid=cmid)
    op, err = await a.send_text(b_id, b"changed", cmid=cmid)
    assert op == Opcode.ERROR and err.code == ErrorCode.CONFLICT
    op, err = await a.send_text(b_id, b"x", custom_type=b"t" * 65)
    assert op == Opcode.ERROR and err.code == ErrorCode.PAYLOAD_TOO_LARGE
    _, nxt = await a.send_text(b_id, b"next")
    assert nxt.conversation_seq == first.conversation_seq + 1


async def test_custom_type_and_unknown_message_type_survive_offline_pull(stack):
    a_id, b_id = users(2)
    a = await RawClient.login(stack, a_id)
    big = os.urandom(9000)  # 2 recipients × 9000 B > 8 KiB: referenced, filled from MessageStore
    op, _ = await a.send_text(b_id, b"custom", message_type=77, custom_type=b"app.card.v2")
    assert op == Opcode.SEND_ACK
    op, _ = await a.send_text(b_id, big)
    assert op == Opcode.SEND_ACK
    b = await RawClient.login(stack, b_id)  # logs in after the sends
    entries = await wait_for_entries(b, 2)
    assert entries[0].message_type == 77 and entries[0].custom_type == b"app.card.v2"
    assert entries[1].body == big


async def test_offline_pull_includes_first_record_of_partition(fresh_stack):
    a_id, b_id = users(2)
    a = await RawClient.login(fresh_stack, a_id)
    for i in range(3):
        op, _ = await a.send_text(b_id, f"m{i}".encode())
        assert op == Opcode.SEND_ACK
    b = await RawClient.login(fresh_stack, b_id)
    entries = await wait_for_entries(b, 3)
    assert [e.body for e in entries] == [b"m0", b"m1", b"m2"]
    # fresh partitions: the first dispatch of b's shard sits at log offset 0
    assert entries[0].mailbox_seq == mailbox_seq.compose(1, 0)
    _, cursor = await b.pull_all(entries[-1].mailbox_seq)
    assert cursor == entries[-1].mailbox_seq  # nothing after the last applied entry


async def test_second_login_of_same_device_is_kicked(stack):
    (u,) = users(1)
    first = await RawClient.login(stack, u, device=7)
    second = await RawClient.login(stack, u, device=7)
    frames = []  # until closed; a wake-up push (PUSH_EVENTS) for its login may come first
    while (item := await asyncio.wait_for(first.stream.read_frame(), 5)) is not None:
        frames.append(item[0])
    assert [op for op in frames if op != Opcode.PUSH_EVENTS] == [Opcode.KICKED], frames  # KICKED, then closed
    op, _ = await second.request(Opcode.PING, b"")
    assert op == Opcode.PONG


def test_every_service_is_healthy_and_exports_qim_metrics(stack):
    for name, addr in stack.metrics.items():
        with urllib.request.urlopen(f"http://{addr}/healthz", timeout=2) as r:
            assert r.status == 200, name
        text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=2).read().decode()
        own = [line for line in text.splitlines() if line.startswith("qim_")]
        assert own, f"{name} exports no qim_ metric"
