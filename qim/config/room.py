"""RoomConfig: qim-room (RoomWriter; docs/decisions/0045-rooms-phase-one-in-process-ring.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from qim.config.env import Env
from qim.config.moderation import WebhookConfig
from qim.config.tls import service_tls
from qim.consts import (
    ROOM_IDLE_S_DEFAULT,
    ROOM_RING_BYTES_DEFAULT,
    ROOM_RING_BYTES_MAX,
    ROOM_RING_EVENTS_DEFAULT,
    ROOM_RING_EVENTS_MAX,
)
from qim.net.tls import TlsFiles
from qim.topology import ROOM, service


@dataclass(frozen=True)
class RoomConfig:
    """qim-room (RoomWriter). Node i of n serves the room shards s with s mod n == i; n
    is the length of QIM_ROOM_ADDRS, the list the gateway routes by, so they agree by
    construction. The ring of each room holds at most `ring_events` events and
    `ring_bytes` encoded bytes (QIM_ROOM_RING_EVENTS, QIM_ROOM_RING_BYTES); a room
    without members for `idle_s` seconds is dropped (QIM_ROOM_IDLE_S). Redis
    (QIM_REDIS_ADDR, the instance of the commit facts) holds only the epoch counter."""

    redis_addr: str
    allow_unsafe_dev: bool
    tenant: int
    listen: str
    metrics_listen: str
    node_index: int
    node_count: int
    max_body: int
    ring_events: int = ROOM_RING_EVENTS_DEFAULT
    ring_bytes: int = ROOM_RING_BYTES_DEFAULT
    idle_s: int = ROOM_IDLE_S_DEFAULT
    internal_tls: Optional[TlsFiles] = None  # QIM_INTERNAL_* (qim/config/tls.py); None: plaintext development
    send_policy: str = ""  # QIM_SEND_POLICY module:callable ("" = accept all; loaded at start: qim/policy)
    moderation: WebhookConfig = WebhookConfig()  # QIM_MODERATION_* (qim/policy/webhook.py, decision 0114)

    @classmethod
    def from_env(cls, env: Env) -> "RoomConfig":
        """Read and validate every variable; ConfigError naming the first bad one."""
        listen = env.listen("QIM_ROOM_LISTEN")
        node_count = len(env.addrs(service(ROOM).addrs_var, listen))
        cfg = cls(
            redis_addr=env.addr("QIM_REDIS_ADDR"),
            allow_unsafe_dev=env.flag("QIM_REDIS_ALLOW_UNSAFE_DEV"),
            tenant=env.tenant(),
            listen=listen,
            metrics_listen=env.metrics_listen(ROOM),
            node_index=env.integer("QIM_ROOM_NODE_INDEX", 0, 0, node_count - 1),
            node_count=node_count,
            max_body=env.max_body(),
            ring_events=env.integer("QIM_ROOM_RING_EVENTS", ROOM_RING_EVENTS_DEFAULT, 1, ROOM_RING_EVENTS_MAX),
            ring_bytes=env.integer("QIM_ROOM_RING_BYTES", ROOM_RING_BYTES_DEFAULT, 1024, ROOM_RING_BYTES_MAX),
            idle_s=env.integer("QIM_ROOM_IDLE_S", ROOM_IDLE_S_DEFAULT, 1, 7 * 86_400),
            send_policy=env.raw("QIM_SEND_POLICY").strip(),
            moderation=WebhookConfig.from_env(env),
        )
        return replace(cfg, internal_tls=service_tls(env, ROOM, cfg.listen, {}))
