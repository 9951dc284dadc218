"""The development broker's warm-up (qim/dev/kafka_warmup.py, docs/decisions/0159) on a
real broker: it produces to every partition of a topic of its own and fetches the
records back, leaves no topic behind, touches no QIM topic, and a bad
QIM_KAFKA_WARMUP_S stops the `up` with the reason."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from qim.consts import DISPATCH_TOPIC
from qim.dev import kafka_warmup
from qim.dev.kafka_topics import admin_client
from qim.errors import EngineError


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-offsets"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        c.close()


def test_the_warm_up_serves_every_partition_and_leaves_nothing(private_kafka):
    addr, parts = private_kafka.addr, private_kafka.topics[DISPATCH_TOPIC]
    before = _end_offsets(addr, DISPATCH_TOPIC, parts)
    got = kafka_warmup.warm_broker(addr, parts, 2.0)
    assert got["seconds"] >= 2.0
    # wide requests (every partition) and narrow ones: more records than requests, and
    # at least one request reached every partition
    assert got["requests"] >= 2 and got["records"] >= got["requests"] + parts - 1
    assert 0 < got["fetched"] <= got["records"]
    topics = admin_client(addr).list_topics(timeout=10).topics
    assert kafka_warmup.WARMUP_TOPIC not in topics  # deleted
    assert _end_offsets(addr, DISPATCH_TOPIC, parts) == before  # no QIM topic touched


@pytest.mark.parametrize("raw", ["ten", "-1", "121", "2.5"])
def test_a_bad_warm_up_setting_is_refused_with_the_reason(monkeypatch, raw):
    monkeypatch.setenv("QIM_KAFKA_WARMUP_S", raw)
    with pytest.raises(EngineError, match="QIM_KAFKA_WARMUP_S must be whole seconds 0..120"):
        kafka_warmup.warm_started("127.0.0.1:1", 4, 1)


def test_zero_skips_the_warm_up_without_touching_the_broker(monkeypatch):
    monkeypatch.setenv("QIM_KAFKA_WARMUP_S", "0")
    kafka_warmup.warm_started("127.0.0.1:1", 4, 1)  # an address nothing listens on: not dialled


def test_engines_up_warms_a_broker_it_started_and_not_one_already_running(tmp_path, monkeypatch):
    from qim.dev.engines import EngineSet
    calls: list[tuple[str, int]] = []
    real = kafka_warmup.warm_broker

    def spy(bootstrap, partitions, seconds, replicas=1):
        calls.append((bootstrap, partitions))
        return real(bootstrap, partitions, seconds, replicas)
    monkeypatch.setattr(kafka_warmup, "warm_broker", spy)
    monkeypatch.setenv("QIM_KAFKA_WARMUP_S", "1")
    es = EngineSet.up(tmp_path / "e", 4, die_with_parent=True)
    try:
        assert calls == [(es.kafka_bootstrap, 4)]  # every partition count of qim.dispatch
        assert kafka_warmup.WARMUP_TOPIC not in admin_client(es.kafka_bootstrap).list_topics(timeout=10).topics
        EngineSet.up(tmp_path / "e")  # already running: its JVM is warm
        assert len(calls) == 1
    finally:
        es.down(timeout=5)
