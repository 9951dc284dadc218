"""qimctl commands of the MediaService (issue 40; docs/decisions/0139).

    qimctl audit media [--redis-addr H:P] [--tenant T] [--orphan-ms MS]

Compares the object store (QIM_S3_ENDPOINT, QIM_S3_BUCKET, QIM_S3_REGION,
QIM_S3_ACCESS_KEY, QIM_S3_SECRET_KEY, as the MediaService) with the media records in Redis
(the home instance of --redis-addr, default $QIM_REDIS_ADDR) both ways
(qim/services/media/sweep_audit.py): prints up to 5 examples of each finding, then exactly
`audit media: objects=N records=R references_without_objects=A objects_without_references=B`.
Uploads younger than --orphan-ms (default $QIM_MEDIA_ORPHAN_MS, one hour) are not counted.
Exit 0 when A and B are 0, 1 otherwise, 2 when it cannot run (a bad variable, Redis or
the store unreachable).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from qim.cli.envargs import redis_layout, tenant_arg, tenant_default
from qim.config import Env
from qim.config.s3 import S3Config
from qim.errors import ConfigError, EngineError
from qim.services.media.sweep_audit import audit_media
from qim.stores.errors import StorageError


def add_audit_parser(audit_sub, env) -> None:
    """Register `audit media` under qimctl's `audit` subcommands."""
    a = audit_sub.add_parser("media", help="the object store against the media records, both ways")
    a.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"), help="Redis home host:port")
    a.add_argument("--tenant", type=tenant_arg, default=tenant_default(env))
    a.add_argument(
        "--orphan-ms",
        type=int,
        default=None,
        help="uploads younger than this are left out (default $QIM_MEDIA_ORPHAN_MS, else 3600000)",
    )
    a.set_defaults(func=audit_media_cmd, environ=env)


def audit_media_cmd(args: argparse.Namespace, out=None) -> int:
    """`qimctl audit media` (module doc); returns the exit code."""
    out = out or sys.stdout
    from qim.stores.media import open_media_ledger
    from qim.stores.s3 import ObjectStore

    env = Env(args.environ)
    try:
        layout = redis_layout("--redis-addr", args.redis_addr, args.environ)
        s3 = S3Config.from_env(env)
        orphan_ms = (
            args.orphan_ms
            if args.orphan_ms is not None
            else env.integer("QIM_MEDIA_ORPHAN_MS", 3_600_000, 0, 30 * 86_400_000)
        )
    except ConfigError as exc:
        print(f"qimctl audit media: {exc}", file=sys.stderr)
        return 2

    async def run():
        ledger = open_media_ledger(layout)
        try:
            return await audit_media(ledger, ObjectStore(s3), args.tenant, orphan_ms)
        finally:
            await ledger.close()

    try:
        result = asyncio.run(run())
    except (StorageError, EngineError) as exc:
        print(f"qimctl audit media: cannot run: {exc}", file=sys.stderr)
        return 2
    for line in result.lines():
        print(line, file=out)
    return 0 if result.clean else 1
