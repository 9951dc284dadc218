"""The stack of `make test-redis-move` (tests/redismove): started once for the session and
shared by the MailboxShard move (decision 0104) and the commit-bucket move (decision
0113), since it takes minutes to start on a busy machine."""

from __future__ import annotations

import pytest

from tests.fixtures import running_stack


@pytest.fixture(scope="session")
def stack3_apns(tmp_path_factory):
    """A local APNs endpoint for stack3's NotificationService node (tests/notify/servicefakes.py)."""
    from tests.notify.servicefakes import ThreadedApns

    server = ThreadedApns().start(tmp_path_factory.mktemp("apns3"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def stack3(tmp_path_factory, stack3_apns):
    """Three Redis instances, every service kind, two mailbox and two session nodes, one
    qim-notify node sending to `stack3_apns` (alert claims move with a shard: decision 0144)."""
    with running_stack(tmp_path_factory.mktemp("redismove"), engines_kw={"redis_instances": 3},
                       extra_env={**stack3_apns.env, "QIM_NOTIFY_CLAIM_MS": "3000"},
                       nodes={"mailbox": 2, "session": 2, "notify": 1}) as st:
        yield st
