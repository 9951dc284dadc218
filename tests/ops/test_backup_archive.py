"""Backups that restore, with the archive tier (docs/operations.md "Backup and restore";
qim/cli/backup_cql.py): a stack with qim-archiver and a 1 s hot window archives a
conversation and trims it from Redis; `qimctl backup` takes Redis, Kafka and the CQL
keyspace; the engines and the keyspace are wiped; `qimctl restore` into new engines
and an empty keyspace, services started on them, and

- the history is readable through the SDK (a new install's store, and PULL_HISTORY pages,
  which the restored Redis cannot serve: its hot floor is above every message, so the
  rows come from the restored archive);
- `qimctl audit archive` and `qimctl audit dispatch` report zeros;
- the conversation goes on (the next conversation_seq follows the restored ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import subprocess
import sys

from qim.dev.stack import stack_up
from qim.sdk.requests import pull_history
from qim.stores.errors import StorageError, StoreUnavailable
from tests.e2e.archive import TINY_HOT_WINDOW, direct, drop_keyspace, floor_of, qimctl, wait_floor
from tests.e2e.chaos import Conversation, run_audit
from tests.e2e.sdkclient import client
from tests.fixtures import running_stack, start_test_engines

ZEROS = "missing=0 index_missing=0 mismatched=0 seq_conflicts=0"


async def test_archived_history_survives_backup_wipe_restore(tmp_path, shared_cassandra):
    sender = 7_100_000 + secrets.randbelow(10**5) * 2
    peer = sender + 1
    conv_id = direct(sender, peer)
    bodies = [f"archived-{n}".encode() for n in range(12)]
    backup = tmp_path / "backup"
    ka = f"qim_backup_{secrets.token_hex(4)}"
    try:
        with running_stack(tmp_path / "a", extra_env={**shared_cassandra.env(ka), **TINY_HOT_WINDOW}) as a:
            last = await _take(a, sender, peer, bodies, backup)
    except BaseException:
        with contextlib.suppress(StorageError):  # cleanup of a shared node must not hide the failure
            _drop(shared_cassandra, ka)
        raise
    _drop(shared_cassandra, ka)  # the wipe: stack a's engines are gone, its keyspace too
    es = start_test_engines(tmp_path / "b" / "engines")
    keyspace = f"qim_restore_{secrets.token_hex(4)}"
    env = {**es.env(), **shared_cassandra.env(keyspace)}
    try:
        r = await asyncio.to_thread(_restore, env, backup)
        assert r.returncode == 0 and "archive " in r.stdout, r.stdout + r.stderr
        b = stack_up(tmp_path / "b" / "stack", env, die_with_parent=True)
        b.engines = es
        try:
            assert floor_of(b, conv_id) >= last  # Redis has none of these bodies: only the archive has
            reader = await client(b, tmp_path, peer, device=77)
            try:
                await reader.connect()
                got = [m.body for m in await reader.messages(reader.direct_id(sender), limit=200)]
                assert got == bodies  # the new install's store (its mailbox carries the bodies inline)
                page = await pull_history(reader.runtime, conv_id, sender, anchor_seq=0, newer=True, limit=50)
                assert [i.body for i in page.items] == bodies and not page.has_more  # the history: the archive's
            finally:
                await reader.close()
            audit = await asyncio.to_thread(qimctl, b, "audit", "archive", "--timeout", "60")
            assert audit.returncode == 0 and audit.stdout.strip().splitlines()[-1].endswith(ZEROS), \
                audit.stdout + audit.stderr
            again = Conversation(b, sender, peer)
            await again.send(b"after the restore")
            assert again.acks[b"after the restore"].conversation_seq == last + 1
            await again.client.close()
            audit = await asyncio.to_thread(run_audit, b)
            assert audit.returncode == 0, audit.stdout + audit.stderr
        finally:
            b.down()
    finally:
        es.down()
        with contextlib.suppress(StorageError):  # cleanup only
            _drop(shared_cassandra, keyspace)


async def _take(a, sender: int, peer: int, bodies: list[bytes], backup) -> int:
    """Send `bodies`, wait until the archive has them and Redis trimmed them, back up;
    the last conversation_seq."""
    conv = Conversation(a, sender, peer)
    for body in bodies:
        await conv.send(body)
    last = conv.acks[bodies[-1]].conversation_seq
    await wait_floor(a, direct(sender, peer), last)  # archived, then trimmed from Redis
    await conv.client.close()
    r = await asyncio.to_thread(qimctl, a, "backup", "--to", str(backup), timeout=300)
    taken = re.search(r" archive=(\d+) rows", r.stdout)
    assert r.returncode == 0 and taken and int(taken.group(1)) >= 2 * len(bodies), r.stdout + r.stderr
    return last


def _drop(cassandra, keyspace: str) -> None:
    """DROP KEYSPACE, tried again while a loaded node times out (idempotent)."""
    for attempt in range(3):
        try:
            return drop_keyspace(cassandra, keyspace)
        except StoreUnavailable:
            if attempt == 2:
                raise


def _restore(env: dict, backup) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "restore", "--from", str(backup)],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
