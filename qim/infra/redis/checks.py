"""Redis deployment checks at service start (docs/design.md §8).

Refuses: Redis older than 7.0, Redis Cluster, no AOF, appendfsync other than `always`
or no-appendfsync-on-rewrite other than `no` on instances holding commit facts, and any
maxmemory-policy other than `noeviction`. `QIM_REDIS_ALLOW_UNSAFE_DEV=1` relaxes the
persistence checks (appendonly, appendfsync, no-appendfsync-on-rewrite) for loopback
addresses only. Each refusal names the setting.
"""

from __future__ import annotations

import ipaddress
import socket

from qim.errors import EngineError
from qim.wire.addr import parse_addr


class RedisDeploymentError(EngineError):
    """The Redis instance is not safe for the data it would hold; the message names why."""


def is_loopback(addr: str) -> bool:
    """Whether every address 'host:port' resolves to is a loopback address (False when it does not resolve)."""
    host, _ = parse_addr(addr)
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def deployment_problems(info_server: dict, info_cluster: dict, config: dict, commit_facts: bool,
                        relax_persistence: bool) -> list[str]:
    """Problems found in INFO/CONFIG answers (pure logic; empty list when safe)."""
    problems = []
    version = tuple(int(p) for p in str(info_server.get("redis_version", "0")).split(".")[:2])
    if version < (7, 0):
        problems.append(f"redis_version {info_server.get('redis_version')} is older than 7.0")
    if str(info_server.get("redis_mode", "")) != "standalone" or int(info_cluster.get("cluster_enabled", 0)):
        problems.append("redis_mode must be standalone (Redis Cluster is refused)")
    if config.get("maxmemory-policy") != "noeviction":
        problems.append(f"maxmemory-policy is {config.get('maxmemory-policy')!r}, must be 'noeviction'")
    if not relax_persistence:
        if config.get("appendonly") != "yes":
            problems.append(f"appendonly is {config.get('appendonly')!r}, must be 'yes'")
        if commit_facts and config.get("appendfsync") != "always":
            problems.append(f"appendfsync is {config.get('appendfsync')!r}, must be 'always' on commit-fact instances")
        if commit_facts and config.get("no-appendfsync-on-rewrite") != "no":
            problems.append(f"no-appendfsync-on-rewrite is {config.get('no-appendfsync-on-rewrite')!r}, must be 'no'")
    return problems


async def check_deployment(client, addr: str, commit_facts: bool, allow_unsafe_dev: bool) -> None:
    """Raise RedisDeploymentError listing every problem of the instance at `addr`.
    `allow_unsafe_dev` is honoured only when `addr` is loopback."""
    info_server = await client.info("server")
    info_cluster = await client.info("cluster")
    config = {}
    for name in ("appendonly", "appendfsync", "no-appendfsync-on-rewrite", "maxmemory-policy"):
        got = await client.config_get(name)
        config[name] = _text(got.get(name) if name in got else got.get(name.encode()))
    relax = allow_unsafe_dev and is_loopback(addr)
    problems = deployment_problems(info_server, info_cluster, config, commit_facts, relax)
    if allow_unsafe_dev and not relax:
        problems.append("QIM_REDIS_ALLOW_UNSAFE_DEV=1 is accepted only for loopback Redis addresses")
    if problems:
        raise RedisDeploymentError(f"redis at {addr} refused: " + "; ".join(problems))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
