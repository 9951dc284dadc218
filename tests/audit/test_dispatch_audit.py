"""`qimctl audit dispatch` (docs/design.md §12 "zero orphans", seed 000 orphan 独立审计).

Three layers:
- unit: the pure comparison (qim.services.audit.dispatch_audit) on constructed records,
  one case per orphan kind, plus agreement with the fanout planner;
- integration: the CLI against PRIVATE topics on the session `engines` broker (unique
  names; the shared qim.* topics are never touched), a consistent set → all zero, each
  injected orphan → its counter non-zero; the drain waits on a private Redis;
- e2e: real messages through a QIM stack of this module's own, then the CLI against the
  real topics with draining → all four zero. (The `stack` fixture lives in
  tests/e2e/conftest.py and is invisible here; importing it would start a second
  session stack on the shared engines, two fanouts and two mailboxes on one log.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from qim._core import ids
from qim._core.types import MessageCoord
from qim.proto.v1 import internal_pb2, message_pb2
from qim.protocol import Opcode
from qim.services.audit import audit
from qim.services.fanout.plan import parse_outbox, plan
from qim.stores.redis.keys import inflight_key
from qim.wire.dispatch import Dispatch
from tests.fixtures import TEST_SHARD_COUNT, running_stack

N = TEST_SHARD_COUNT
REPO = Path(__file__).resolve().parents[2]
COUNTERS = ("committed_without_dispatch", "dispatch_without_commit", "coordinate_mismatch", "wrong_partition")


# --- constructed records ----------------------------------------------------------
def outbox(sender: int, peer: int, cseq: int = 1, body: bytes = b"hello", inline: bool = True,
           shard_count: int = N, mid: bytes | None = None) -> internal_pb2.OutboxRecord:
    """A direct-message Outbox record as the writer freezes it (recipients sorted, distinct)."""
    rec = message_pb2.MessageRecord(
        tenant_id=bytes(16), message_id=mid or ids.compose_message_id(1_700_000_000_000 + cseq, cseq, 0, 1),
        conversation_id=ids.conversation_id_direct(0, sender, peer), conversation_seq=cseq, sender_id=sender,
        sender_device_id=1, client_message_id=os.urandom(16), message_type=1, body=body,
        created_at_ms=1_700_000_000_000 + cseq)
    return internal_pb2.OutboxRecord(record=rec, recipients=sorted({sender, peer}), inline_body=inline,
                                     shard_count=shard_count)


def dispatches(ob: internal_pb2.OutboxRecord, **over) -> list[tuple[int, Dispatch]]:
    """[(partition, Dispatch)] built field by field from the record (not through plan())."""
    m, by_shard = ob.record, {}
    for u in ob.recipients:
        by_shard.setdefault(ids.mailbox_shard(0, u, N), []).append(u)
    out = []
    for shard, users in sorted(by_shard.items()):
        fields = dict(tenant=0, dispatch_id=ids.dispatch_id(m.message_id, shard),
                      coord=MessageCoord(m.message_id, m.conversation_id, m.conversation_seq, m.sender_id,
                                         m.created_at_ms, m.message_type, m.custom_type)._replace(
                          **{k: v for k, v in over.items() if k in MessageCoord._fields}),
                      target_shard=shard, client_message_id=m.client_message_id,
                      recipients=tuple(sorted(users)), body=m.body if ob.inline_body else None)
        fields.update({k: v for k, v in over.items() if k not in MessageCoord._fields})
        out.append((shard, Dispatch(**fields)))
    return out


def split_pair() -> tuple[int, int]:
    """Two users on different shards (so a direct message has two dispatches)."""
    a = random.getrandbits(40) + 1
    b = a + 1
    while ids.mailbox_shard(0, b, N) == ids.mailbox_shard(0, a, N):
        b += 1
    return a, b


def consistent_set(n: int = 6):
    """(outbox [(offset, bytes)], dispatch [(partition, offset, bytes)], records): fanout-shaped."""
    recs = [outbox(*split_pair(), cseq=i + 1, inline=i % 2 == 0) for i in range(n)]
    obx = [(i, r.SerializeToString()) for i, r in enumerate(recs)]
    offsets, dsp = {}, []
    for r in recs:
        for p, d in dispatches(r):
            dsp.append((p, offsets.setdefault(p, 0), d.encode()))
            offsets[p] += 1
    return obx, dsp, recs


def counters(result) -> dict[str, int]:
    return {k: getattr(result, k) for k in COUNTERS}


def nonzero_only(result, *names) -> None:
    got = counters(result)
    assert all(got[k] > 0 for k in names) and all(v == 0 for k, v in got.items() if k not in names), got


# --- unit ------------------------------------------------------------------------
def test_consistent_set_with_replays_is_clean():
    obx, dsp, _ = consistent_set()
    # a republished Outbox record and replayed dispatches converge: not orphans
    res = audit(obx + [(len(obx), obx[0][1])], dsp + [(p, 100 + o, v) for p, o, v in dsp[:3]], N)
    assert res.clean and not res.errors, res.counters_line()
    assert (res.outbox_records, res.committed_messages, res.expected_dispatches) == (7, 6, 12)


def test_agrees_with_the_fanout_planner():
    obx, _, _ = consistent_set()
    dsp = [(shard, 0, d.encode()) for _, v in obx for shard, d in plan(parse_outbox(v, N), N)]
    assert audit(obx, dsp, N).clean


def test_missing_dispatch_is_committed_without_dispatch():
    obx, dsp, _ = consistent_set()
    res = audit(obx, dsp[1:], N)
    nonzero_only(res, "committed_without_dispatch")
    assert res.committed_without_dispatch == 1 and "committed_without_dispatch" in res.details[0]


def test_dispatch_of_an_unknown_message_is_dispatch_without_commit():
    obx, dsp, _ = consistent_set()
    stray = outbox(*split_pair(), cseq=99)
    res = audit(obx, dsp + [(p, 50, d.encode()) for p, d in dispatches(stray)], N)
    nonzero_only(res, "dispatch_without_commit")
    assert res.dispatch_without_commit == 2


@pytest.mark.parametrize("field,value", [("sender_id", 12345), ("conversation_seq", 77), ("created_at_ms", 1),
                                         ("message_type", 3), ("client_message_id", b"\x01" * 16),
                                         ("body", b"other body"), ("custom_type", b"x")])
def test_changed_coordinate_is_a_mismatch(field, value):
    obx, dsp, recs = consistent_set(1)
    p, d = dispatches(recs[0], **{field: value})[0]
    # the altered dispatch replaces the good one of its shard
    rest = [x for x in dsp if x[0] != p]
    res = audit(obx, rest + [(p, 0, d.encode())], N)
    assert res.coordinate_mismatch == 1 and res.committed_without_dispatch == 1, res.counters_line()
    assert res.dispatch_without_commit == 0 and res.wrong_partition == 0


def test_dispatch_id_and_recipients_must_match_the_audience():
    obx, dsp, recs = consistent_set(1)
    p, d = dispatches(recs[0], dispatch_id=b"\x07" * 16)[0]
    assert audit(obx, dsp + [(p, 9, d.encode())], N).coordinate_mismatch == 1
    # a recipient of the same shard that is not in the frozen audience
    extra = next(u for u in range(10**6, 10**7) if ids.mailbox_shard(0, u, N) == p)
    p, d = dispatches(recs[0], recipients=tuple(sorted(d.recipients + (extra,))))[0]
    nonzero_only(audit(obx, dsp + [(p, 9, d.encode())], N), "coordinate_mismatch")


def test_duplicate_outbox_with_other_content_is_a_mismatch():
    obx, dsp, recs = consistent_set(2)
    twin = internal_pb2.OutboxRecord()
    twin.CopyFrom(recs[0])
    twin.record.body = b"rewritten"
    nonzero_only(audit(obx + [(2, twin.SerializeToString())], dsp, N), "coordinate_mismatch")


def test_dispatch_in_another_partition_is_wrong_partition():
    obx, dsp, recs = consistent_set()
    p, o, v = dsp[0]
    res = audit(obx, dsp[1:] + [((p + 1) % N, 40, v)], N)
    nonzero_only(res, "wrong_partition", "committed_without_dispatch")  # its own shard lacks it
    # target_shard and partition agree, but the recipients live elsewhere
    q, d = dispatches(recs[0])[0]
    moved = dataclasses.replace(d, target_shard=(q + 1) % N,
                                dispatch_id=ids.dispatch_id(d.coord.message_id, (q + 1) % N))
    res = audit(obx, dsp + [((q + 1) % N, 41, moved.encode())], N)
    assert res.wrong_partition == 1 and res.dispatch_without_commit == 0, res.counters_line()
    # recipients belong to the partition it sits in, but its target_shard names another
    relabelled = dataclasses.replace(d, target_shard=(q + 1) % N)
    assert audit(obx, dsp + [(q, 42, relabelled.encode())], N).wrong_partition == 1


def test_undecodable_and_unplannable_records_are_counted_with_their_offset():
    obx, dsp, recs = consistent_set(2)
    res = audit(obx + [(2, b"\xff\xff not protobuf")], dsp + [(3, 17, b"\x01 not a dispatch")], N)
    assert res.committed_without_dispatch == 1 and res.dispatch_without_commit == 1
    assert any("outbox@2" in e for e in res.errors) and any("dispatch[3]@17" in e for e in res.errors)
    other = outbox(*split_pair(), shard_count=N * 2)
    res = audit(obx + [(2, other.SerializeToString())], dsp, N)
    assert res.committed_without_dispatch == 1 and "shard_count" in res.errors[0]


# --- integration: the CLI on private topics ------------------------------------------
def run_cli(bootstrap: str, *args: str, env: dict | None = None) -> tuple[int, dict[str, int], str]:
    """(exit code, the four counters (empty if absent), stdout+stderr)."""
    proc = subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "audit", "dispatch", "--kafka-bootstrap",
                           bootstrap, "--shard-count", str(N), *args], capture_output=True, text=True,
                          timeout=180, cwd=REPO, env={**os.environ, **(env or {})})
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    found = dict(re.findall(r"(\w+)=(\d+)", last)) if last.startswith("audit: ") else {}
    return proc.returncode, {k: int(v) for k, v in found.items()}, proc.stdout + proc.stderr


@pytest.fixture
def topics(engines):
    """(outbox, dispatch) private topics of this test: 1 and N partitions."""
    admin = AdminClient({"bootstrap.servers": engines.kafka_bootstrap})
    name = uuid.uuid4().hex[:12]
    pair = (f"t-audit-outbox-{name}", f"t-audit-dispatch-{name}")
    for fut in admin.create_topics([NewTopic(pair[0], 1, 1), NewTopic(pair[1], N, 1)]).values():
        fut.result(30)
    yield pair
    admin.delete_topics(list(pair))


def produce(bootstrap: str, topic: str, records) -> None:
    """records: [(partition, value)], written in order, durable before return."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for partition, value in records:
        p.produce(topic, value, partition=partition)
    assert p.flush(30) == 0


def fill(bootstrap: str, topics, obx, dsp) -> None:
    produce(bootstrap, topics[0], [(0, v) for _, v in obx])
    produce(bootstrap, topics[1], [(p, v) for p, _, v in dsp])


def test_cli_clean_on_a_consistent_private_set(engines, topics):
    obx, dsp, _ = consistent_set(8)
    fill(engines.kafka_bootstrap, topics, obx, dsp)
    rc, got, out = run_cli(engines.kafka_bootstrap, "--no-wait", "--outbox-topic", topics[0],
                           "--dispatch-topic", topics[1])
    assert rc == 0 and got == dict.fromkeys(COUNTERS, 0), out
    assert "outbox_records=8 " in out and f"dispatch_records={len(dsp)}" in out


def _inject(kind: str, obx, dsp, recs):
    extra = outbox(*split_pair(), cseq=500)
    if kind == "committed_without_dispatch":
        return obx + [(len(obx), extra.SerializeToString())], dsp
    if kind == "dispatch_without_commit":
        return obx, dsp + [(p, 0, d.encode()) for p, d in dispatches(extra)]
    if kind == "coordinate_mismatch":
        return obx, dsp + [(p, 0, d.encode()) for p, d in dispatches(recs[0], sender_id=424242)]
    if kind == "wrong_partition":
        return obx, dsp + [((p + 3) % N, 0, d.encode()) for p, d in dispatches(recs[1])]
    if kind == "undecodable":
        return obx, dsp + [(5, 0, b"\x01\x02 garbage")]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", COUNTERS + ("undecodable",))
def test_cli_reports_each_injected_orphan(engines, topics, kind):
    obx, dsp = _inject(kind, *consistent_set(5))
    fill(engines.kafka_bootstrap, topics, obx, dsp)
    rc, got, out = run_cli(engines.kafka_bootstrap, "--no-wait", "--outbox-topic", topics[0],
                           "--dispatch-topic", topics[1])
    counter = "dispatch_without_commit" if kind == "undecodable" else kind
    assert got[counter] > 0, out
    assert rc == (2 if kind == "undecodable" else 1), out
    if kind == "undecodable":
        assert re.search(r"error: dispatch\[5\]@\d+: undecodable", out), out


def test_cli_waits_for_inflight_commits_and_fanout(engines, topics, private_redis):
    obx, dsp, _ = consistent_set(3)
    fill(engines.kafka_bootstrap, topics, obx, dsp)
    group = f"t-audit-fanout-{uuid.uuid4().hex[:8]}"
    common = ("--outbox-topic", topics[0], "--dispatch-topic", topics[1], "--redis-addr", private_redis.addr,
              "--fanout-group", group, "--timeout", "2")
    r = private_redis.client()
    r.zadd(inflight_key(7), {b"qim:commit:{b007}:pending": 1})
    rc, got, out = run_cli(engines.kafka_bootstrap, *common)
    assert rc == 2 and "1 commits still in flight" in out and not got, out
    r.delete(inflight_key(7))
    rc, got, out = run_cli(engines.kafka_bootstrap, *common)  # the group never read the Outbox
    assert rc == 2 and f"fanout group {group}" in out and "high watermark 3" in out, out
    admin = AdminClient({"bootstrap.servers": engines.kafka_bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topics[0], 0, 3)])
    admin.alter_consumer_group_offsets([req])[group].result(30)
    rc, got, out = run_cli(engines.kafka_bootstrap, *common)
    assert rc == 0 and got == dict.fromkeys(COUNTERS, 0), out


def test_cli_exits_2_when_the_broker_is_unreachable():
    rc, got, out = run_cli("127.0.0.1:1", "--no-wait", "--timeout", "2")
    assert rc == 2 and not got and "qimctl: error: kafka" in out, out


# --- e2e: real traffic through real services ------------------------------------------
@pytest.fixture(scope="module")
def audit_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("audit")) as st:
        yield st


async def test_audit_after_real_traffic_is_clean(audit_stack):
    from tests.e2e.rawclient import RawClient, wait_for_entries

    a_id, b_id = split_pair()
    c_id = random.getrandbits(40) + 1  # never logs in: offline stash
    a, b = await RawClient.login(audit_stack, a_id), await RawClient.login(audit_stack, b_id)
    sent = 0
    for i in range(3):
        for client, peer in ((a, b_id), (b, a_id), (a, c_id)):
            kw = {"message_type": 3, "custom_type": b"audit.t"} if i == 2 else {}
            op, ack = await client.send_text(peer, f"audit {i}".encode(), **kw)
            assert op == Opcode.SEND_ACK, ack
            sent += 1
    assert len(await wait_for_entries(b, 6)) == 6
    await a.close(), await b.close()
    rc, got, out = await asyncio.to_thread(
        run_cli, audit_stack.engines.kafka_bootstrap, "--timeout", "60", env=audit_stack.engines.env())
    assert rc == 0 and got == dict.fromkeys(COUNTERS, 0), out
    assert f"committed_messages={sent} " in out, out  # this stack carried only these messages
