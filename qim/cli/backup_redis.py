"""Redis half of `qimctl backup` / `qimctl restore` (docs/operations.md "Backup and restore";
docs/decisions/0037-ops-backups.md): engine-native steps only.

- `snapshot(addr, path)`: a point-in-time RDB of the running commit Redis, fetched over
  the replication protocol (`redis-cli --rdb`): the server forks and streams the
  snapshot, nothing pauses, AOF stays as it is.
- `restore(addr, path, workdir)`: the RDB into an EMPTY running Redis (refused otherwise):
  a temporary `redis-server` on a loopback port serves the file, the target replicates
  from it (`REPLICAOF`), then stands alone again (`REPLICAOF NO ONE`); the target's own
  AOF is rewritten by the sync. Keys keep their expiry times. Run it on the Redis host
  (the target dials the temporary server on 127.0.0.1).

- `move_shard_epochs(r, shard_count, now_s)`: after the restore, every MailboxShard to
  one new shard_epoch (docs/decisions/0075): a device cursor of the life that went on
  after the backup point is then recognisably of another life (CURSOR_EXPIRED: the
  device REBUILDs) even once the restored log hands out its offsets again.

EngineError (one line) for anything that fails; the temporary server is stopped by its pid.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from qim.consts import MAILBOX_EPOCH_MAX
from qim.errors import EngineError
from qim.stores.redis.keys import wm_key
from qim.wire.addr import parse_addr

SYNC_TIMEOUT_S = 300.0


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise EngineError(f"{name} is not on PATH (Debian package redis-tools / redis-server)")
    return path


def snapshot(addr: str, path: Path, timeout: float = SYNC_TIMEOUT_S) -> int:
    """Write the RDB of the Redis at `addr` to `path`; its size in bytes."""
    host, port = parse_addr(addr)
    r = subprocess.run([_tool("redis-cli"), "-h", host, "-p", str(port), "--rdb", str(path)],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0 or not path.exists():
        raise EngineError(f"redis-cli --rdb from {addr} failed: {(r.stderr or r.stdout).strip()[-300:]}")
    return path.stat().st_size


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(check, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise EngineError(f"{what} not done within {timeout:.0f}s")
        time.sleep(0.1)


def _lasting(r: redis.Redis) -> int:
    """Keys without an expiry time, over every database (INFO keyspace: keys - expires)."""
    return sum(int(db["keys"]) - int(db.get("expires", 0)) for db in r.info("keyspace").values())


def restore(addr: str, rdb: Path, workdir: Path, timeout: float = SYNC_TIMEOUT_S) -> int:
    """Load `rdb` into the empty Redis at `addr` (module doc); the number of keys."""
    host, port = parse_addr(addr)
    target = redis.Redis(host=host, port=port, socket_timeout=30)
    try:
        if target.dbsize():
            raise EngineError(f"the Redis at {addr} is not empty: restore only into an empty stack")
        workdir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rdb, workdir / "dump.rdb")
        temp_port = _free_port()
        temp = subprocess.Popen([_tool("redis-server"), "--port", str(temp_port), "--bind", "127.0.0.1",
                                 "--dir", str(workdir), "--dbfilename", "dump.rdb", "--appendonly", "no",
                                 "--save", "", "--protected-mode", "no"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir)
        try:
            source = redis.Redis(host="127.0.0.1", port=temp_port, socket_timeout=30)

            def up() -> bool:
                try:
                    if not source.ping():
                        return False
                    # the port was chosen free, not reserved: a server that answers on it
                    # must be ours, or the restore would copy another Redis's data
                    if int(source.info("server")["process_id"]) != temp.pid:
                        raise EngineError(f"127.0.0.1:{temp_port} answers for another process: "
                                          "the temporary redis-server could not take it; run the restore again")
                    return source.info("persistence").get("loading") == 0
                except redis.exceptions.ConnectionError:
                    if temp.poll() is not None:
                        raise EngineError(f"the temporary redis-server exited ({temp.returncode})") from None
                    return False

            _wait(up, timeout, "loading the RDB")
            keys, lasting = int(source.dbsize()), _lasting(source)
            target.replicaof("127.0.0.1", temp_port)

            def synced() -> bool:
                info = target.info("replication")
                return info.get("master_link_status") == "up" and not info.get("master_sync_in_progress")

            _wait(synced, timeout, f"{addr} replicating the RDB")
            target.replicaof("NO", "ONE")
            # keys without an expiry cannot vanish: their count must match; a key whose
            # expiry time passed during the restore (a presence entry) is gone on either side
            if _lasting(target) != lasting:
                raise EngineError(f"{addr} holds {_lasting(target)} keys without an expiry after the sync, "
                                  f"the RDB {lasting}")
            return keys
        finally:
            temp.terminate()
            try:
                temp.wait(30)
            except subprocess.TimeoutExpired:
                temp.kill()
                temp.wait(10)
    except redis.exceptions.RedisError as exc:
        raise EngineError(f"redis at {addr}: {exc}") from None
    finally:
        target.close()


def move_shard_epochs(r: redis.Redis, shard_count: int, now_s: float) -> int:
    """Write one new shard_epoch into the watermark HASH of every shard 0..shard_count-1
    (created with only that field where the snapshot has none: a shard first written
    after the backup point has device cursors too); returns it.

    The epoch is 1 + the restore's minute modulo MAILBOX_EPOCH_MAX, stepped past every
    epoch the snapshot holds: it differs from the backup's life and from the life that
    went on after it, and two restores of the same backup at different minutes less than
    22 days apart get different epochs (a device that synced in the first restored life
    is recognised in the second), unless the step of one lands on the other's minute.
    EngineError when the snapshot holds every epoch; RedisError from the client (the
    caller reports it)."""
    keys = [wm_key(s) for s in range(shard_count)]
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.hget(key, "epoch")
    held = {int(e or 1) for e in pipe.execute()}  # a missing epoch field reads as 1 (load_watermark)
    if len(held) >= MAILBOX_EPOCH_MAX:
        raise EngineError("every shard_epoch is taken by the snapshot: no new life for the mailbox shards")
    epoch = 1 + int(now_s // 60) % MAILBOX_EPOCH_MAX
    while epoch in held:
        epoch = epoch % MAILBOX_EPOCH_MAX + 1
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.hset(key, "epoch", epoch)
    pipe.execute()
    return epoch
