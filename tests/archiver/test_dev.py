"""The archive tier in the development tools: `qim-dev engines up` starts
Cassandra unless told not to (the library and test fixtures only when asked), and
`qim-dev stack up` passes the archive settings of its environment to the services,
restarting a running stack that has others."""

from __future__ import annotations

import pytest

from qim.dev.cli import _parser
from qim.dev.engines import cassandra_wanted
from qim.dev.stack_archive import settings_differ, settings_from
from qim.errors import EngineError


def test_cassandra_is_wanted_by_the_cli_by_default_and_by_the_library_only_when_asked(monkeypatch):
    monkeypatch.delenv("QIM_DEV_WITH_CASSANDRA", raising=False)
    assert cassandra_wanted(default=True) and not cassandra_wanted()
    monkeypatch.setenv("QIM_DEV_WITH_CASSANDRA", "0")
    assert not cassandra_wanted(default=True)
    monkeypatch.setenv("QIM_DEV_WITH_CASSANDRA", "no")
    with pytest.raises(EngineError):
        cassandra_wanted(default=True)
    assert _parser().parse_args(["engines", "up"]).with_cassandra is None
    assert _parser().parse_args(["engines", "up", "--without-cassandra"]).with_cassandra is False
    assert _parser().parse_args(["engines", "up", "--with-cassandra"]).with_cassandra is True


def test_archive_settings_reach_the_stack_and_a_change_restarts_it():
    env = {"QIM_HISTORY_HOT_WINDOW_MS": "5000", "QIM_REDIS_ADDR": "x", "QIM_OUTBOX_RETENTION_MS": ""}
    wanted = settings_from(env)
    assert wanted == {"QIM_HISTORY_HOT_WINDOW_MS": "5000"}
    assert not settings_differ({"QIM_HISTORY_HOT_WINDOW_MS": "5000", "QIM_GATEWAY_LISTEN": "y"}, wanted)
    assert settings_differ({}, wanted)
    assert settings_differ({"QIM_HISTORY_HOT_WINDOW_MS": "5000", "QIM_HISTORY_TRIM_PERIOD_MS": "1000"}, wanted)


def test_the_mailbox_store_reaches_the_stack_and_a_change_restarts_it():
    """`QIM_MAILBOX_STORE=cql make demo` must run the CQL MailboxStore, also when a stack
    with the Redis mailbox is already up (decision 0102)."""
    wanted = settings_from({"QIM_MAILBOX_STORE": "cql"})
    assert wanted == {"QIM_MAILBOX_STORE": "cql"}
    assert settings_differ({}, wanted)
    assert settings_differ({"QIM_MAILBOX_STORE": "redis"}, wanted)
    assert not settings_differ({"QIM_MAILBOX_STORE": "cql"}, wanted)
