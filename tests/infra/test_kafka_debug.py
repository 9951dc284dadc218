"""QIM_KAFKA_DEBUG passes librdkafka debug contexts to every client a process makes, and a
mistyped context fails the client's creation instead of being ignored."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer

from qim.infra.kafka.debug import DEBUG_ENV, with_debug


def test_unset_leaves_the_configuration_alone(monkeypatch):
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    assert with_debug({"bootstrap.servers": "127.0.0.1:1"}) == {"bootstrap.servers": "127.0.0.1:1"}
    monkeypatch.setenv(DEBUG_ENV, "  ")
    assert "debug" not in with_debug({})


def test_contexts_are_passed_to_librdkafka(monkeypatch):
    monkeypatch.setenv(DEBUG_ENV, " broker,metadata ")
    conf = with_debug({"bootstrap.servers": "127.0.0.1:1"})
    assert conf["debug"] == "broker,metadata"
    Producer(conf).flush(0)  # librdkafka accepts it


def test_a_mistyped_context_fails_at_creation(monkeypatch):
    monkeypatch.setenv(DEBUG_ENV, "brokr")
    with pytest.raises(KafkaException, match="debug"):
        Producer(with_debug({"bootstrap.servers": "127.0.0.1:1"}))
