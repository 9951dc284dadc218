"""Redis deployment checks (docs/design.md §8): pure logic, then a real refusal at start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from qim.infra.redis.checks import deployment_problems, is_loopback

SAFE_INFO = {"redis_version": "7.0.15", "redis_mode": "standalone"}
SAFE_CONFIG = {"appendonly": "yes", "appendfsync": "always", "no-appendfsync-on-rewrite": "no",
               "maxmemory-policy": "noeviction"}


def test_safe_instance_has_no_problem():
    assert deployment_problems(SAFE_INFO, {"cluster_enabled": 0}, SAFE_CONFIG, True, False) == []


@pytest.mark.parametrize("info,cluster,config,needle", [
    ({"redis_version": "6.2.14", "redis_mode": "standalone"}, {}, SAFE_CONFIG, "redis_version"),
    ({"redis_version": "7.2.0", "redis_mode": "cluster"}, {"cluster_enabled": 1}, SAFE_CONFIG, "redis_mode"),
    (SAFE_INFO, {}, {**SAFE_CONFIG, "appendonly": "no"}, "appendonly"),
    (SAFE_INFO, {}, {**SAFE_CONFIG, "appendfsync": "everysec"}, "appendfsync"),
    (SAFE_INFO, {}, {**SAFE_CONFIG, "no-appendfsync-on-rewrite": "yes"}, "no-appendfsync-on-rewrite"),
    (SAFE_INFO, {}, {**SAFE_CONFIG, "maxmemory-policy": "allkeys-lru"}, "maxmemory-policy"),
])
def test_each_refusal_names_the_setting(info, cluster, config, needle):
    problems = deployment_problems(info, cluster, config, True, False)
    assert len(problems) == 1 and problems[0].startswith(needle)


def test_unsafe_dev_relaxes_persistence_only():
    unsafe = {**SAFE_CONFIG, "appendonly": "no", "appendfsync": "no", "maxmemory-policy": "volatile-lru"}
    problems = deployment_problems(SAFE_INFO, {}, unsafe, True, relax_persistence=True)
    assert problems == ["maxmemory-policy is 'volatile-lru', must be 'noeviction'"]


def test_everysec_is_fine_where_no_commit_facts_live():
    cfg = {**SAFE_CONFIG, "appendfsync": "everysec"}
    assert deployment_problems(SAFE_INFO, {}, cfg, commit_facts=False, relax_persistence=False) == []


def test_loopback_detection():
    assert is_loopback("127.0.0.1:6379") and is_loopback("localhost:1")
    assert not is_loopback("192.0.2.10:6379")


def run_writer(redis_addr: str, kafka: str, extra: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "QIM_REDIS_ADDR": redis_addr, "QIM_KAFKA_BOOTSTRAP": kafka, "QIM_MAILBOX_SHARD_COUNT": "8",
           "QIM_WRITER_LISTEN": "127.0.0.1:0", "QIM_WRITER_METRICS_LISTEN": "127.0.0.1:0",
           "QIM_INTERNAL_PLAINTEXT_DEV": "1", **extra}
    return subprocess.run([sys.executable, "-m", "qim.app", "writer"], env=env, capture_output=True, text=True,
                          timeout=60)


def test_writer_refuses_unsafe_redis_and_names_the_setting(private_redis, engines):
    client = private_redis.client()
    client.config_set("appendfsync", "everysec")
    proc = run_writer(private_redis.addr, engines.kafka_bootstrap, {})
    assert proc.returncode == 3, proc.stderr
    assert "appendfsync is 'everysec'" in proc.stderr
    client.config_set("maxmemory-policy", "allkeys-lru")
    proc = run_writer(private_redis.addr, engines.kafka_bootstrap, {"QIM_REDIS_ALLOW_UNSAFE_DEV": "1"})
    assert proc.returncode == 3 and "maxmemory-policy" in proc.stderr and "appendfsync" not in proc.stderr


def test_bad_config_value_names_the_variable(engines):
    proc = run_writer(engines.redis_addr, engines.kafka_bootstrap, {"QIM_MAILBOX_SHARD_COUNT": "12"})
    assert proc.returncode == 2 and "QIM_MAILBOX_SHARD_COUNT=12 is not a power of two" in proc.stderr
    proc = run_writer(engines.redis_addr, engines.kafka_bootstrap, {"QIM_WRITER_FAULT_POINT": "after_record"})
    assert proc.returncode == 2 and "QIM_FAULT_INJECTION" in proc.stderr
