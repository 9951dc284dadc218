"""What `qim-dev stack up` takes from its environment and the recorded engines: the send
policy (docs/decisions/0099, docs/operations.md "A send policy (QIM_SEND_POLICY)"):
QIM_SEND_POLICY reaches the services, and a running stack with another policy (or none)
is restarted with it, saying why, instead of answering "stack already up" while the
policy is not installed; and engines made without Cassandra stay without it."""

from __future__ import annotations

from typing import Any, cast

from qim.dev.stack_cli import POLICY, cassandra_for, policy_differs, restart_words


class Running:
    """A recorded stack as restart_words reads it (its node counts and environment)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    @classmethod
    def stack(cls, env: dict[str, str]) -> Any:
        """One, typed as restart_words's Stack."""
        return cast(Any, cls(env))

    def count(self, service: str) -> int:
        return 1


def test_a_policy_asked_for_on_a_stack_without_one_differs():
    assert policy_differs({"QIM_REDIS_ADDR": "x"}, {POLICY: "wordpolicy:check"})
    assert policy_differs({POLICY: "a:b"}, {POLICY: "wordpolicy:check"})
    assert policy_differs({POLICY: "a:b"}, {})  # dropped: the stack goes back to accepting all
    assert not policy_differs({POLICY: "a:b", "QIM_REDIS_ADDR": "x"}, {POLICY: "a:b"})
    assert not policy_differs({}, {"QIM_HISTORY_HOT_WINDOW_MS": "5000"})


def test_stack_up_says_it_restarts_for_another_send_policy():
    line = restart_words(Running.stack({}), {}, {POLICY: "wordpolicy:check"})
    assert line.startswith("stack: restarting every service for another send policy "
                           "(QIM_SEND_POLICY none -> wordpolicy:check)"), line
    line = restart_words(Running.stack({POLICY: "wordpolicy:check", "QIM_HISTORY_HOT_WINDOW_MS": "5000"}), {}, {})
    assert "archive-tier settings (QIM_HISTORY_HOT_WINDOW_MS 5000 -> default)" in line, line
    assert "another send policy (QIM_SEND_POLICY wordpolicy:check -> none)" in line, line


def test_stack_up_keeps_engines_made_without_cassandra_without_it(engines, tmp_path, monkeypatch):
    """Engines made without Cassandra (`engines up --without-cassandra`; the fixture's real
    Redis and Kafka) stay without it when `stack up` runs on them: before, `stack up`
    started a Cassandra node beside them unless QIM_DEV_WITH_CASSANDRA=0 was given too."""
    monkeypatch.delenv("QIM_DEV_WITH_CASSANDRA", raising=False)
    assert engines.cassandra is None
    assert cassandra_for(engines.dir) is False
    assert cassandra_for(tmp_path / "no-engines-yet") is True  # new engines: with it, as `engines up`
    monkeypatch.setenv("QIM_DEV_WITH_CASSANDRA", "1")  # asked for: the variable decides
    assert cassandra_for(engines.dir) is True
