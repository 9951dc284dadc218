"""`qim-dev engines up --redis-instances N` (qim/dev/redis_instances.py, decisions 0096
and 0098): N standalone Redis instances, each its own port, directory and pid, AOF
always and noeviction, the layout in engines.env as the services read it, stopped by
pid; a bad count is one error line, and a recorded set is never re-laid out."""

from __future__ import annotations

import json
import subprocess
import sys

import redis

from qim.config.common import CommonConfig
from qim.config.env import Env
from qim.dev._proc import pid_alive
from qim.dev.engines import EngineSet


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qim.dev.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def _env_file(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def test_a_bad_instance_count_is_one_error_line(tmp_path):
    for bad in ("0", "17"):
        r = _cli("engines", "up", "--dir", str(tmp_path / "eng"), "--without-cassandra", "--redis-instances", bad)
        assert r.returncode == 2
        assert r.stderr.strip() == f"qim-dev: error: --redis-instances must be 1..16, got {bad}"
    assert not (tmp_path / "eng" / "state.json").exists()  # refused before anything started


def test_three_instances_up_laid_out_in_the_env_and_stopped_by_pid(tmp_path):
    d = tmp_path / "eng"
    r = _cli("engines", "up", "--dir", str(d), "--shard-count", "2", "--without-cassandra", "--redis-instances", "3")
    try:
        assert r.returncode == 0, r.stderr
        state = json.loads((d / "state.json").read_text())
        instances = state["redis_instances"]
        assert [i["name"] for i in instances] == ["redis", "redis2", "redis3"]
        assert instances[0] == state["redis"]  # the first is the one a one-instance set has
        pids = [i["pid"] for i in instances]
        assert len(set(pids)) == 3 and all(pid_alive(p) for p in pids)
        assert len({i["dir"] for i in instances}) == 3 and len({i["addr"] for i in instances}) == 3
        addrs = [i["addr"] for i in instances]
        for addr in addrs:  # each its own standalone, durable instance
            c = redis.Redis(host="127.0.0.1", port=int(addr.rsplit(":", 1)[1]), decode_responses=True)
            assert c.config_get("appendonly") == {"appendonly": "yes"}
            assert c.config_get("appendfsync") == {"appendfsync": "always"}
            assert c.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
            assert c.info("replication")["role"] == "master" and c.info("cluster")["cluster_enabled"] == 0
            c.close()

        env = _env_file(d / "engines.env")
        assert env["QIM_REDIS_ADDR"] == addrs[0]
        assert env["QIM_REDIS_CORE_ADDRS"] == ",".join(addrs)
        assert env["QIM_REDIS_MAILBOX_ADDRS"] == ",".join(addrs[1:] + addrs[:1])
        layout = CommonConfig.from_env(Env(env)).redis_layout  # what every service reads
        assert layout.core == tuple(addrs) and layout.mailbox == tuple(addrs[1:] + addrs[:1])
        assert layout.shard_count == 2

        # idempotent: the same three processes (no Cassandra asked: a JVM start under CI
        # load costs 30-40 s and nothing here looks at it)
        again = _cli("engines", "up", "--dir", str(d), "--without-cassandra")
        assert again.returncode == 0, again.stderr
        assert [i["pid"] for i in json.loads((d / "state.json").read_text())["redis_instances"]] == pids
        other = _cli("engines", "up", "--dir", str(d), "--redis-instances", "2")  # never re-laid out
        assert other.returncode == 2 and "created with 3 Redis instance(s), not 2" in other.stderr

        down = _cli("engines", "down", "--dir", str(d))
        assert down.returncode == 0, down.stderr
        assert not any(pid_alive(p) for p in pids)
        assert not (d / "engines.env").exists()
    finally:
        es = EngineSet.load(d)
        if es is not None:
            es.down(timeout=5)
