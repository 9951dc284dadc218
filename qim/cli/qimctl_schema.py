"""qimctl schema: the CQL keyspace and tables of the archive tier (docs/decisions/0023;
qim/stores/cql/schema.py; docs/operations.md "The archive tier").

    qimctl schema apply   create the keyspace when absent and run every missing migration
    qimctl schema check   what every service checks at start, without changing anything

Where: QIM_SCYLLA_ADDRS, QIM_SCYLLA_KEYSPACE (qim), QIM_SCYLLA_LOCAL_DC and
QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV (the keyspace gets NetworkTopologyStrategy with 3
replicas in the local datacenter; SimpleStrategy with 1 only with that flag), or
--scylla-addrs / --keyspace. Output: `schema: keyspace=K version=V applied=[...]`.
Exit 0 when the keyspace is current (the archive's tables and the CQL MailboxStore's,
decision 0102), 2 when it cannot be reached, is refused (a single-node keyspace without
the flag) or is behind or misses a table (check).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from qim.config import Env
from qim.config.tier import ScyllaConfig
from qim.consts import SCYLLA_SCHEMA_VERSION
from qim.errors import ConfigError, EngineError
from qim.stores.errors import StorageError


def scylla_from(args: argparse.Namespace, environ) -> ScyllaConfig:
    """The ScyllaConfig of the environment with --scylla-addrs / --keyspace applied;
    ConfigError naming the variable or flag."""
    env = dict(environ)
    if getattr(args, "scylla_addrs", None):
        env["QIM_SCYLLA_ADDRS"] = args.scylla_addrs
    if getattr(args, "keyspace", None):
        env["QIM_SCYLLA_KEYSPACE"] = args.keyspace
    cfg = ScyllaConfig.from_env(Env(env))
    if cfg is None:
        raise ConfigError("QIM_SCYLLA_ADDRS (or --scylla-addrs) is required")
    return cfg


def add_scylla_args(p: argparse.ArgumentParser) -> None:
    """--scylla-addrs and --keyspace (defaults: QIM_SCYLLA_ADDRS, QIM_SCYLLA_KEYSPACE)."""
    p.add_argument("--scylla-addrs", default=None, help="CQL contact points host:port[,...] (default $QIM_SCYLLA_ADDRS)")
    p.add_argument("--keyspace", default=None, help="keyspace (default $QIM_SCYLLA_KEYSPACE or qim)")


def add_parsers(sub, env) -> None:
    """Register `schema apply|check` under the qimctl subcommands."""
    p = sub.add_parser("schema", help="the archive tier's CQL keyspace and tables")
    actions = p.add_subparsers(dest="action", required=True)
    for action, text in (("apply", "create the keyspace and run the missing migrations"),
                         ("check", "check the keyspace as every service does at start")):
        a = actions.add_parser(action, help=text)
        add_scylla_args(a)
        a.set_defaults(func=run_schema, environ=env)


async def _run(cfg: ScyllaConfig, apply: bool) -> list[int]:
    from qim.stores.cql import mailbox_schema
    from qim.stores.cql.backend import CqlBackend  # the driver is imported only here

    backend = CqlBackend(cfg)
    try:
        applied = await backend.apply_schema() if apply else []
        await backend.check()
        # the CQL MailboxStore's tables too (decision 0102): `apply` always creates them, so
        # a keyspace without them (or with one dropped) is not current for this build
        await mailbox_schema.check(backend.session)
        return applied
    finally:
        await backend.close()


def run_schema(args: argparse.Namespace, out=None) -> int:
    """`qimctl schema apply|check`; returns the exit code (errors are raised to main)."""
    out = out or sys.stdout
    cfg = scylla_from(args, args.environ)
    try:
        applied = asyncio.run(_run(cfg, args.action == "apply"))
    except StorageError as exc:  # StoreUnavailable is an EngineError too: main prints it
        if isinstance(exc, EngineError):
            raise
        print(f"qimctl: error: {exc.message}", file=sys.stderr)
        return 2
    print(f"schema: keyspace={cfg.keyspace} version={SCYLLA_SCHEMA_VERSION} applied={applied}", file=out)
    return 0
