"""`qimctl restore` moves every mailbox shard to one new shard_epoch (docs/decisions/0075),
on a real Redis: every shard (also one the snapshot never wrote), an epoch no shard of the
snapshot holds, two restores of one backup an hour apart get different ones (the epoch
comes back only MAILBOX_EPOCH_MAX minutes later); the mailbox reads it back as the
shard's epoch. And a restore never reads from a Redis that is not its temporary one."""

from __future__ import annotations

import pytest
import redis

from qim.cli import backup_redis
from qim.cli.backup_redis import move_shard_epochs
from qim.consts import MAILBOX_EPOCH_MAX
from qim.dev.redis_engine import start_redis
from qim.errors import EngineError
from qim.infra.redis.client import connect
from qim.stores.redis.keys import wm_key
from qim.stores.redis.mailboxes import RedisMailboxStore

SHARDS = 4
MINUTE = 4  # 1 + 4 % MAILBOX_EPOCH_MAX is 5: an epoch of the snapshot, so it steps past 5 and 6


def _snapshot(r: redis.Redis) -> None:
    """Shards 0 and 1 at epochs 5 and 6; shards 2 and 3 never written."""
    r.flushall()
    r.hset(wm_key(0), mapping={"blob": b"x", "layout": 1, "epoch": 5})
    r.hset(wm_key(1), mapping={"blob": b"x", "layout": 1, "epoch": 6})


async def test_every_shard_gets_one_new_epoch_none_of_the_snapshot(private_redis):
    r = redis.Redis(*private_redis.addr.split(":"))
    try:
        _snapshot(r)
        first = move_shard_epochs(r, SHARDS, MINUTE * 60.0)
        assert first == 7
        assert [int(r.hget(wm_key(s), "epoch")) for s in range(SHARDS)] == [7] * SHARDS
        client = connect(private_redis.addr)
        try:
            store = RedisMailboxStore(client)
            assert await store.load_watermark(0) == (b"x", 7)
            assert await store.load_watermark(3) == (None, 7)  # a shard the snapshot never wrote
        finally:
            await client.aclose()
        _snapshot(r)  # the same backup restored an hour later
        second = move_shard_epochs(r, SHARDS, (MINUTE + 60) * 60.0)
        assert second == 65 and second != first
        _snapshot(r)  # 22.75 days (MAILBOX_EPOCH_MAX minutes) after the first: its epoch again
        assert move_shard_epochs(r, SHARDS, (MINUTE + MAILBOX_EPOCH_MAX) * 60.0) == first
    finally:
        r.close()


def test_a_restore_whose_temporary_port_another_redis_answers_is_refused(private_redis, tmp_path, monkeypatch):
    """The temporary redis-server's port is chosen free, not reserved: when another Redis
    answers on it (the temporary one could not bind), the restore stops with EngineError
    instead of copying that Redis's keys into the target."""
    other = start_redis(tmp_path / "other", die_with_parent=True)
    try:
        redis.Redis(*other.addr.split(":")).set("not-the-backup", b"1")
        monkeypatch.setattr(backup_redis, "_free_port", lambda: int(other.addr.rsplit(":", 1)[1]))
        target = redis.Redis(*private_redis.addr.split(":"))
        target.flushall()
        rdb = tmp_path / "dump.rdb"
        rdb.write_bytes(b"")  # never loaded: the temporary server cannot start on a taken port
        with pytest.raises(EngineError, match="answers for another process"):
            backup_redis.restore(private_redis.addr, rdb, tmp_path / "work", timeout=20)
        assert target.dbsize() == 0  # nothing copied
    finally:
        other.stop()
