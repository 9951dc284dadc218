"""Waiting for a topic's identity at start, written once (qim/infra/kafka/identity.py;
issue 36 item 6): errors of a broker still starting are waited out, a broker without
topic ids is refused at once by its type (no match on the message's words)."""

from __future__ import annotations

import pytest

from qim.errors import EngineError, TopicWithoutId
from qim.infra.kafka import identity


async def test_transient_errors_are_waited_out(monkeypatch):
    answers = [EngineError("kafka metadata failed: transport"), EngineError("unknown topic"), ("c", "t", 8)]
    calls = []

    async def fake(bootstrap, topic):
        calls.append(topic)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(identity, "topic_identity", fake)
    assert await identity.wait_topic_identity("b:1", "qim.outbox", wait_s=30, poll_s=0.01) == ("c", "t", 8)
    assert calls == ["qim.outbox"] * 3


async def test_a_topic_without_an_id_is_refused_at_once(monkeypatch):
    calls = []

    async def fake(bootstrap, topic):
        calls.append(topic)
        raise TopicWithoutId("topic qim.dispatch has no topic id (broker without KIP-516)")

    monkeypatch.setattr(identity, "topic_identity", fake)
    with pytest.raises(TopicWithoutId):
        await identity.wait_topic_identity("b:1", "qim.dispatch", wait_s=30, poll_s=0.01)
    assert calls == ["qim.dispatch"]


async def test_the_last_error_after_the_wait(monkeypatch):
    async def fake(bootstrap, topic):
        raise EngineError("still down")

    monkeypatch.setattr(identity, "topic_identity", fake)
    with pytest.raises(EngineError, match="still down"):
        await identity.wait_topic_identity("b:1", "qim.outbox", wait_s=0.05, poll_s=0.01)
