"""The client port's file-descriptor limit: one descriptor per connection, so the
listener raises the soft RLIMIT_NOFILE to the hard limit before it listens (a systemd
default soft limit of 1,024 would refuse the 1,021st device)."""

from __future__ import annotations

import resource

from qim.services.gateway.listener import raise_nofile_limit


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard > 512, "the test needs a hard limit above 512"
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
    try:
        assert raise_nofile_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
