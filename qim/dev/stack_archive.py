"""The archive tier in the development stack (docs/decisions/0023): when the engines include a CQL
node (QIM_SCYLLA_ADDRS in engines.env), `qim-dev stack up` applies the schema
(qimctl schema apply's code) before any service starts and runs qim-archiver beside the
other services; without one the stack is Redis-only as before."""

from __future__ import annotations

import asyncio
import concurrent.futures

from qim.config import Env
from qim.config.tier import ScyllaConfig
from qim.errors import ConfigError, EngineError
from qim.stores.errors import StorageError

# what qimctl (schema, retention, audit archive) and the demo's history check need from stack.env
CLIENT_VARS = ("QIM_SCYLLA_ADDRS", "QIM_SCYLLA_KEYSPACE", "QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV", "QIM_SCYLLA_LOCAL_DC")
# settings of the CQL tier `qim-dev stack up` passes from its environment to the services
# (the demo's short hot window: Makefile `demo`; `QIM_MAILBOX_STORE=cql make demo` runs the
# CQL MailboxStore, decision 0102); a running stack with other values is restarted
SETTINGS = ("QIM_MESSAGE_STORE_BACKEND", "QIM_HISTORY_HOT_WINDOW_MS", "QIM_OUTBOX_RETENTION_MS",
            "QIM_HISTORY_TRIM_SLACK_MS", "QIM_HISTORY_TRIM_PERIOD_MS", "QIM_DEFAULT_HISTORY_RETENTION_DAYS",
            "QIM_MAILBOX_STORE")


def settings_from(environ) -> dict[str, str]:
    """The archive SETTINGS set in `environ`."""
    return {k: environ[k] for k in SETTINGS if environ.get(k)}


def settings_differ(stack_env: dict[str, str], wanted: dict[str, str]) -> bool:
    """Whether a recorded stack ran with other archive settings than `wanted`."""
    return any(stack_env.get(k, "") != wanted.get(k, "") for k in SETTINGS)


def scylla_of(env: dict[str, str]) -> ScyllaConfig | None:
    """The stack's CQL node, None without QIM_SCYLLA_ADDRS; EngineError for a bad value."""
    try:
        return ScyllaConfig.from_env(Env(env))
    except ConfigError as exc:
        raise EngineError(f"archive tier: {exc}") from None


def apply_schema(cfg: ScyllaConfig) -> list[int]:
    """Create the keyspace and tables (idempotent); EngineError when the node refuses."""
    from qim.stores.cql.backend import CqlBackend

    async def run() -> list[int]:
        backend = CqlBackend(cfg)
        try:
            return await backend.apply_schema()
        finally:
            await backend.close()

    try:
        # a thread of its own: stack_up may be called from a running event loop (async tests)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, run()).result()
    except StorageError as exc:
        raise EngineError(f"archive schema on {cfg.hosts[0]}:{cfg.port}: {exc.message}") from None
