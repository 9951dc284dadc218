"""The gateway's writer failover state (qim/services/gateway/failover.py; decision 0079):
a failed writer goes last for DEMOTE_S, one WARNING per episode, every failed attempt
counted; its first answer ends the episode. (The behaviour under a real SIGSTOP is
tests/e2e/test_writer_failover.py.)"""

from __future__ import annotations

import logging

from qim.services.gateway import failover as fo


def test_a_failed_node_goes_last_until_it_answers_and_logs_once_per_episode(caplog, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(fo.time, "monotonic", lambda: now[0])
    counted: list[tuple[str, str]] = []
    f = fo.Failover("writer", ["a:1", "b:2", "c:3"], lambda backend, reason: counted.append((backend, reason)))
    assert f.order([1, 0, 2]) == [1, 0, 2]
    with caplog.at_level(logging.WARNING, logger=fo.__name__):
        f.failed(1, "timeout", "b:2 did not answer in 3.0s")
        f.failed(1, "unfit", "node unfit: writer clock window not held")
        assert f.order([1, 0, 2]) == [0, 2, 1] and f.demoted(1)
        now[0] += fo.DEMOTE_S + 0.1  # tried first again once the demotion ran out
        assert f.order([1, 0, 2]) == [1, 0, 2] and not f.demoted(1)
        f.failed(1, "timeout", "b:2 did not answer in 3.0s")  # the same episode: no second line
        f.answered(1)
        f.answered(1)
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if "writer b:2 failed" in m]) == 1, lines
    assert [m for m in lines if "answers again" in m] == ["writer b:2 answers again after 3 failed attempt(s)"]
    assert counted == [("writer", "timeout"), ("writer", "unfit"), ("writer", "timeout")]
    assert f.order([1, 0, 2]) == [1, 0, 2]
