"""Three Kafka brokers (docs/design.md §13 "Brokers"; qim/dev/kafka_cluster.py): a KRaft
cluster on loopback whose QIM topics have replication factor 3 and min.insync.replicas
2, producers acks=all. SIGKILL of one broker under traffic, then its restart: every
acknowledged message reaches its recipient once and in order, and the independent audit
finds no orphan. Two Outbox partitions (docs/decisions/0041-scale-outbox-partitions.md)."""

from __future__ import annotations

import asyncio
import random

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from qim.consts import DISPATCH_TOPIC, OUTBOX_TOPIC
from tests.e2e.chaos import run_audit
from tests.e2e.test_shard_takeover import Traffic
from tests.fixtures import running_stack


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("brokers"), engines_kw={"brokers": 3, "outbox_partitions": 2}) as st:
        yield st


def test_the_topics_are_replicated_three_times_with_two_in_sync(three_brokers):
    es = three_brokers.engines
    assert len(es.kafkas) == 3 and es.kafka_bootstrap.count(",") == 2
    admin = AdminClient({"bootstrap.servers": es.kafka_bootstrap})
    md = admin.list_topics(timeout=10)
    assert len(md.brokers) == 3
    assert len(md.topics[OUTBOX_TOPIC].partitions) == 2
    for topic in (OUTBOX_TOPIC, DISPATCH_TOPIC):
        assert {len(p.replicas) for p in md.topics[topic].partitions.values()} == {3}
        config = admin.describe_configs([ConfigResource("topic", topic)])
        (resource,) = config.values()
        assert resource.result(10)["min.insync.replicas"].value == "2"


async def test_a_broker_killed_under_traffic_loses_doubles_and_reorders_nothing(three_brokers):
    st = three_brokers
    pairs = [(random.getrandbits(40) + 1, random.getrandbits(40) + 1) for _ in range(4)]
    traffic = Traffic(st, pairs)
    await asyncio.sleep(2)
    victim = st.engines.kafkas[1]
    victim.kill()
    await asyncio.sleep(6)  # traffic goes on with two of three replicas in sync
    await asyncio.get_running_loop().run_in_executor(None, victim.restart)
    await asyncio.sleep(2)
    await traffic.stop_and_check()
    audit = run_audit(st)
    assert audit.returncode == 0, audit.stdout + audit.stderr
