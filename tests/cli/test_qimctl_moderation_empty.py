"""`qimctl moderation reports` and `qimctl moderation log` on a deployment with nothing in
them say so in one line (as `mutes` says "no mutes in force") instead of printing nothing,
which an operator cannot tell from a command that read nowhere (a newcomer's first try
after `make demo`); on a real Redis."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _qimctl(redis_addr: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qim.cli.qimctl", "moderation", *argv, "--redis-addr", redis_addr],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [(("reports",), "no reports"), (("reports", "--open"), "no open reports"), (("log",), "no moderation actions")],
)
def test_nothing_to_list_is_said(private_redis, argv, said) -> None:
    done = _qimctl(private_redis.addr, *argv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == said, done.stdout
