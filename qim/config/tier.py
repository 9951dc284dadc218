"""Configuration of the archive tier: ScyllaDB (Cassandra 5.0 stands in on development
machines, docs/decisions/0015), the hot window and retention; qim-archiver's own
settings are in qim/config/archiver.py.

Read through qim.config.Env like every other QIM_* variable; an invalid value raises
ConfigError naming the variable (docs/design.md §11). docs/operations.md ("The archive tier")
lists them with their defaults; docs/decisions/0023-archive-tier.md says why.

| variable | default | read by |
|---|---|---|
| QIM_SCYLLA_ADDRS | unset (no archive tier) | writer, mailbox, session, archiver, qimctl |
| QIM_SCYLLA_KEYSPACE | qim | same |
| QIM_SCYLLA_LOCAL_DC | datacenter1 | same (DC-aware routing, NetworkTopologyStrategy) |
| QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV | 0 | qimctl schema apply (RF 1), every CQL client |
| QIM_MESSAGE_STORE_BACKEND | tiered with QIM_SCYLLA_ADDRS, else redis | writer, mailbox, session |
| QIM_MAILBOX_STORE | redis (cql: the CQL MailboxStore, needs QIM_SCYLLA_ADDRS) | mailbox, session |
| QIM_DISPATCH_LOG_RETENTION_MS | 7 days (the qim.dispatch topic's retention.ms) | mailbox, session |
| QIM_HISTORY_HOT_WINDOW_MS | 7 days | writer (trimmer) |
| QIM_DEFAULT_HISTORY_RETENTION_DAYS | 30 (1..3650) | writer (trimmer), archiver |
| QIM_OUTBOX_RETENTION_MS | 7 days (the recovery window) | writer (trimmer) |
| QIM_HISTORY_TRIM_SLACK_MS | 60000 | writer (trimmer) |
| QIM_HISTORY_TRIM_PERIOD_MS | 5000 | writer (trimmer) |
| QIM_ARCHIVER_BATCH_SIZE | 512 | archiver |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from qim.config.env import Env
from qim.consts import (
    DAY_MS,
    DISPATCH_LOG_RETENTION_MS_DEFAULT,
    DISPATCH_REPLAY_WINDOW_MS,
    HISTORY_HOT_WINDOW_MS_DEFAULT,
    HISTORY_RETENTION_DAYS_DEFAULT,
    HISTORY_RETENTION_DAYS_MAX,
    HISTORY_TRIM_PERIOD_MS_DEFAULT,
    HISTORY_TRIM_SLACK_MS_DEFAULT,
    MAILBOX_IDENTITY_TTL_MS,
    OUTBOX_RECOVERY_WINDOW_MS_DEFAULT,
    SCYLLA_KEYSPACE_DEFAULT,
)
from qim.errors import ConfigError
from qim.wire.addr import parse_addr

BACKENDS = ("redis", "tiered")
MAILBOX_STORES = ("redis", "cql")
_KEYSPACE_RE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
_DC_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class ScyllaConfig:
    """Where the CQL tier is: contact points (one port for all: the driver reaches the
    nodes it discovers on the contact port), keyspace, local datacenter, and whether a
    single-node keyspace (SimpleStrategy RF 1) is allowed (docs/design.md §8: only with
    QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1)."""

    hosts: tuple[str, ...]
    port: int
    keyspace: str = SCYLLA_KEYSPACE_DEFAULT
    local_dc: str = "datacenter1"
    allow_single_node_dev: bool = False

    @classmethod
    def from_env(cls, env: Env) -> Optional["ScyllaConfig"]:
        """None when QIM_SCYLLA_ADDRS is unset; ConfigError naming the variable otherwise."""
        if not env.raw("QIM_SCYLLA_ADDRS"):
            return None
        addrs = env.addrs("QIM_SCYLLA_ADDRS")
        parsed = [parse_addr(a) for a in addrs]
        ports = {p for _, p in parsed}
        if len(ports) != 1:
            raise ConfigError("QIM_SCYLLA_ADDRS: every contact point must use the same port")
        keyspace = env.text("QIM_SCYLLA_KEYSPACE", SCYLLA_KEYSPACE_DEFAULT)
        if not _KEYSPACE_RE.match(keyspace):
            raise ConfigError(f"QIM_SCYLLA_KEYSPACE={keyspace!r} must match {_KEYSPACE_RE.pattern}")
        dc = env.text("QIM_SCYLLA_LOCAL_DC", "datacenter1")
        if not _DC_RE.match(dc):
            raise ConfigError(f"QIM_SCYLLA_LOCAL_DC={dc!r} is not a datacenter name")
        return cls(tuple(h for h, _ in parsed), ports.pop(), keyspace, dc,
                   env.flag("QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV"))

    @property
    def loopback(self) -> bool:
        """Every contact point is a loopback address (development)."""
        return all(h in ("127.0.0.1", "localhost", "::1") for h in self.hosts)


@dataclass(frozen=True)
class TierConfig:
    """The MessageStore backend of a process and the archive rules it follows.

    `backend`: "redis" (history only in Redis, nothing archived or trimmed) or "tiered"
    (Redis above each conversation's hot floor, CQL below; needs `scylla`). Times in ms.
    """

    backend: str = "redis"
    scylla: Optional[ScyllaConfig] = None
    hot_window_ms: int = HISTORY_HOT_WINDOW_MS_DEFAULT
    default_retention_days: int = HISTORY_RETENTION_DAYS_DEFAULT
    recovery_window_ms: int = OUTBOX_RECOVERY_WINDOW_MS_DEFAULT
    trim_slack_ms: int = HISTORY_TRIM_SLACK_MS_DEFAULT
    trim_period_ms: int = HISTORY_TRIM_PERIOD_MS_DEFAULT
    mailbox_store: str = "redis"  # QIM_MAILBOX_STORE (docs/decisions/0102)
    dispatch_log_retention_ms: int = DISPATCH_LOG_RETENTION_MS_DEFAULT

    @property
    def tiered(self) -> bool:
        """Whether reads go through the TieredMessageStore."""
        return self.backend == "tiered"

    @classmethod
    def from_env(cls, env: Env) -> "TierConfig":
        """Read and validate every variable of the table above; ConfigError naming it."""
        scylla = ScyllaConfig.from_env(env)
        backend = env.raw("QIM_MESSAGE_STORE_BACKEND") or ("tiered" if scylla else "redis")
        if backend not in BACKENDS:
            raise ConfigError(f"QIM_MESSAGE_STORE_BACKEND={backend!r} must be one of {', '.join(BACKENDS)}")
        if backend == "tiered" and scylla is None:
            raise ConfigError("QIM_MESSAGE_STORE_BACKEND=tiered needs QIM_SCYLLA_ADDRS")
        mailbox_store = env.raw("QIM_MAILBOX_STORE") or "redis"
        if mailbox_store not in MAILBOX_STORES:
            raise ConfigError(f"QIM_MAILBOX_STORE={mailbox_store!r} must be one of {', '.join(MAILBOX_STORES)}")
        if mailbox_store == "cql" and scylla is None:
            raise ConfigError("QIM_MAILBOX_STORE=cql needs a CQL cluster: set QIM_SCYLLA_ADDRS (and run "
                              "`qimctl schema apply`)")
        log_ms = env.integer("QIM_DISPATCH_LOG_RETENTION_MS", DISPATCH_LOG_RETENTION_MS_DEFAULT, 1000,
                             HISTORY_RETENTION_DAYS_MAX * DAY_MS)
        if mailbox_store == "cql" and log_ms + DISPATCH_REPLAY_WINDOW_MS >= MAILBOX_IDENTITY_TTL_MS:
            # a record replayed after its dispatch identity row expired would be FRESH again: doubled
            raise ConfigError(f"QIM_DISPATCH_LOG_RETENTION_MS={log_ms} plus the {DISPATCH_REPLAY_WINDOW_MS} ms replay "
                              f"window reaches the CQL mailbox's 31-day dispatch identity TTL: shorten the "
                              "qim.dispatch retention (docs/decisions/0102)")
        return cls(
            backend=backend, scylla=scylla,
            hot_window_ms=env.integer("QIM_HISTORY_HOT_WINDOW_MS", HISTORY_HOT_WINDOW_MS_DEFAULT, 1000,
                                      HISTORY_RETENTION_DAYS_MAX * DAY_MS),
            default_retention_days=env.integer("QIM_DEFAULT_HISTORY_RETENTION_DAYS", HISTORY_RETENTION_DAYS_DEFAULT,
                                               1, HISTORY_RETENTION_DAYS_MAX),
            recovery_window_ms=env.integer("QIM_OUTBOX_RETENTION_MS", OUTBOX_RECOVERY_WINDOW_MS_DEFAULT, 1000,
                                           HISTORY_RETENTION_DAYS_MAX * DAY_MS),
            trim_slack_ms=env.integer("QIM_HISTORY_TRIM_SLACK_MS", HISTORY_TRIM_SLACK_MS_DEFAULT, 0, 3_600_000),
            trim_period_ms=env.integer("QIM_HISTORY_TRIM_PERIOD_MS", HISTORY_TRIM_PERIOD_MS_DEFAULT, 100, 600_000),
            mailbox_store=mailbox_store, dispatch_log_retention_ms=log_ms,
        )
