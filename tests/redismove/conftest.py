"""The stack of `make test-redis-move` (tests/redismove): started once for the session and
shared by the MailboxShard move (decision 0104) and the commit-bucket move (decision
0113), since it takes minutes to start on a busy machine."""

from __future__ import annotations

import pytest

from tests.fixtures import running_stack


@pytest.fixture(scope="session")
def stack3(tmp_path_factory):
    """Three Redis instances, every service kind, two mailbox and two session nodes."""
    with running_stack(tmp_path_factory.mktemp("redismove"), engines_kw={"redis_instances": 3},
                       nodes={"mailbox": 2, "session": 2}) as st:
        yield st
