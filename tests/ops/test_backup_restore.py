"""Backups that restore (docs/operations.md "Backup and restore"): on a real stack with
traffic still flowing, `qimctl backup`; then the stack and its engines are wiped, a new
empty set of engines gets `qimctl restore`, services start on it, and

- `qimctl audit dispatch` reports zeros (no orphan either way, no mismatch);
- every message acknowledged before the backup started is readable through the SDK
  (a new install's history of each conversation) and in each recipient's mailbox once
  and in order (raw frame client, tests/e2e/chaos.py);
- the restored stack takes new sends in the same conversations (conversation_seq goes
  on after the restored ones: a left-out post-backup reservation is not reused twice);
- devices that synced past the backup point REBUILD once and then show exactly the
  server's messages, told of what left them (tests/ops/rewind.py, docs/decisions/0075).
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys

from qim.consts import MAX_MESSAGE_BODY
from qim.dev.stack import stack_up
from tests.e2e.chaos import Conversation, delivered_once, run_audit
from tests.e2e.sdkclient import client
from tests.fixtures import start_private_stack, start_test_engines
from tests.ops.rewind import Rewind


def _qimctl(st_env: dict, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **st_env}
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", *args], env=env, capture_output=True, text=True,
                          timeout=300)


async def _keep_sending(conv: Conversation, stop: asyncio.Event) -> None:
    i = 0
    while not stop.is_set():
        await conv.send(f"during-{i}".encode())
        i += 1


async def test_backup_wipe_restore_audit_zeros_and_history_readable(tmp_path):
    a = start_private_stack(tmp_path / "a")
    base = random.getrandbits(40) + 1
    convs = [Conversation(a, base + 2 * i, base + 2 * i + 1) for i in range(3)]
    backup = tmp_path / "backup"
    rewind = Rewind(tmp_path)
    try:
        await rewind.before_backup(a)
        before = {i: [f"before-{i}-{n}".encode() for n in range(15)] for i in range(len(convs))}
        before[0].insert(7, b"before-0-" + b"x" * (MAX_MESSAGE_BODY - 9))  # the largest body: a record > 1 MB
        for i, conv in enumerate(convs):
            for body in before[i]:
                await conv.send(body)
        for i, conv in enumerate(convs):  # delivered before the backup point too
            await delivered_once(a, conv.peer, before[i])
        stop = asyncio.Event()
        noise = asyncio.create_task(_keep_sending(Conversation(a, base + 100, base + 101), stop))
        r = await asyncio.to_thread(_qimctl, a.engines.env(), "backup", "--to", str(backup))
        stop.set()
        await noise
        assert r.returncode == 0 and "backup:" in r.stdout, r.stdout + r.stderr
        await rewind.after_backup(a)
    finally:
        for conv in convs:
            if conv.client is not None:
                await conv.client.close()
        a.down()
        a.engines.down()  # the wipe: every engine directory of stack a is gone with it
    es = start_test_engines(tmp_path / "b" / "engines")
    try:
        r = await asyncio.to_thread(_qimctl, es.env(), "restore", "--from", str(backup))
        assert r.returncode == 0 and "restore:" in r.stdout, r.stdout + r.stderr
        b = stack_up(tmp_path / "b" / "stack", es.env(), die_with_parent=True)
        b.engines = es
        try:
            await rewind.after_restore(b)
            audit = await asyncio.to_thread(run_audit, b)
            assert audit.returncode == 0, audit.stdout + audit.stderr
            for i, conv in enumerate(convs):
                conv.stack, conv.client = b, None
                await delivered_once(b, conv.peer, before[i])  # once, in order, for the recipient
                reader = await client(b, tmp_path, conv.peer, device=77)  # a new install: history via the SDK
                try:
                    await reader.connect()
                    got = [m.body for m in await reader.messages(reader.direct_id(conv.sender), limit=200)]
                    assert [m for m in got if m.startswith(b"before-")] == before[i]
                finally:
                    await reader.close()
                await conv.send(f"after-{i}".encode())  # the conversation goes on
                assert conv.acks[f"after-{i}".encode()].conversation_seq > conv.acks[before[i][-1]].conversation_seq
                await delivered_once(b, conv.peer, [*before[i], f"after-{i}".encode()])
                await conv.client.close()
            audit = await asyncio.to_thread(run_audit, b)
            assert audit.returncode == 0, audit.stdout + audit.stderr
            again = await asyncio.to_thread(_qimctl, es.env(), "restore", "--from", str(backup))  # not empty now
            assert again.returncode == 2 and again.stderr.count("\n") == 1 and "not empty" in again.stderr, \
                again.stderr
        finally:
            b.down()
    finally:
        es.down()
