"""QIM_MAILBOX_RETENTION_MS end to end (docs/design.md §5.5): a stack whose
mailbox keeps entries for 3 s. Through the public protocol: a cursor behind an entry
that expired gets CURSOR_EXPIRED, a zero cursor reads exactly what is retained, a
cursor past the expired entries keeps reading. A bad value stops qim-mailbox at start
with a message naming the variable.

Observed before the fix: retention was a constant 7 days; the variable was ignored and
every entry was served.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time

import pytest

from qim.consts import DAY_MS
from qim.errors import ErrorCode
from qim.proto.v1 import mailbox_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.fixtures import running_stack

RETENTION_MS = 3_000


@pytest.fixture(scope="module")
def short_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("ret"), extra_env={"QIM_MAILBOX_RETENTION_MS": str(RETENTION_MS)}) as st:
        yield st


async def pull(client: RawClient, cursor: int, **kw):
    return await client.request(Opcode.PULL_MAILBOX, mailbox_pb2.PullMailbox(cursor=cursor, **kw).SerializeToString())


async def test_short_retention_expires_cursors_and_a_zero_cursor_reads_what_is_retained(short_stack):
    st = short_stack
    if (time.time_ns() // 1_000_000) % DAY_MS > DAY_MS - 30_000:
        await asyncio.sleep(31)  # keep the test inside one UTC day bucket
    a, b = random.getrandbits(40) + 1, random.getrandbits(40) + 1
    sender = await RawClient.login(st, a)
    for body in (b"m1", b"m2"):
        op, _ = await sender.send_text(b, body)
        assert op == Opcode.SEND_ACK
    device = await RawClient.login(st, b, device=2)
    assert [e.body for e in await wait_for_entries(device, 2)] == [b"m1", b"m2"]
    op, first = await pull(device, 0, max_entries=1)
    assert op == Opcode.MAILBOX_BATCH and [e.body for e in first.entries] == [b"m1"]
    _, both = await pull(device, 0)
    await asyncio.sleep(RETENTION_MS / 1000 + 0.5)
    op, _ = await sender.send_text(b, b"m3")
    assert op == Opcode.SEND_ACK
    entries = await wait_for_entries(device, 1)
    assert [e.body for e in entries] == [b"m3"]  # m1 and m2 are past the retention
    op, err = await pull(device, first.next_cursor)  # this device never got m2
    assert op == Opcode.ERROR and err.code == ErrorCode.CURSOR_EXPIRED and err.request_opcode == Opcode.PULL_MAILBOX
    op, rest = await pull(device, both.next_cursor)  # this one had m1 and m2
    assert op == Opcode.MAILBOX_BATCH and [e.body for e in rest.entries] == [b"m3"]
    await sender.close()
    await device.close()


def test_a_bad_retention_stops_the_mailbox_at_start_naming_the_variable(short_stack):
    env = {**os.environ, **short_stack.env, **short_stack.instance_env["mailbox"], "QIM_MAILBOX_RETENTION_MS": "7d"}
    proc = subprocess.run([sys.executable, "-m", "qim.app", "mailbox"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "QIM_MAILBOX_RETENTION_MS" in proc.stderr, (proc.returncode, proc.stderr)
