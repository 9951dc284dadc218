"""`qimctl shards` on a stack without the archive tier (issue 33 item 10: it exited 1, the
archiver's never-held partitions counted as unowned): exit 0, the archiver shown as not
running, every running kind's shards with their owners. A kind of the archive tier that
had owners and lost them is still an error (exit 1): an outage is not an absence."""

from __future__ import annotations

import os
import subprocess
import sys

from qim.cluster.table import render, unowned
from qim.stores.registry import NodeInfo, Owner


def test_qimctl_shards_on_a_stack_without_the_archive_tier(stack):
    assert "QIM_SCYLLA_ADDRS" not in stack.env, "the session stack runs without the archive tier"
    r = subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "shards"], env={**os.environ, **stack.client_env()},
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "archiver: not running" in r.stdout, r.stdout
    assert "mailbox: 1 live node(s)" in r.stdout and "unowned" not in r.stdout, r.stdout


def test_an_archiver_that_lost_its_owners_is_still_unowned():
    held_once = {"archiver": ([], [Owner(0, "archiver@x", 3, -1)])}
    assert unowned(held_once) == 1
    assert render(held_once, now_ms=0)[0] == "archiver: 0 live node(s)"
    never = {"archiver": ([], [Owner(0, "", 0, 0)])}
    assert unowned(never) == 0
    mailbox_never = {"mailbox": ([], [Owner(0, "", 0, 0)])}  # a mailbox kind is never "not running"
    assert unowned(mailbox_never) == 1
    live = {"archiver": ([NodeInfo("archiver", "archiver@x", "i1", "", "", 5000)], [Owner(0, "archiver@x", 1, 5000)])}
    assert unowned(live) == 0 and render(live, now_ms=0)[0] == "archiver: 1 live node(s)"
