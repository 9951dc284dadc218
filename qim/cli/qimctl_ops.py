"""qimctl operator commands (docs/operations.md):

    qimctl token revoke --user U [--device D] [--tenant T] [--redis-addr H:P]
        refuses every token of the device (omitted: of every device of the user) issued
        until now, and every gateway closes its connections with KICKED{REVOKED}
        within seconds (qim/stores/revocations.py). A token issued afterwards is
        accepted: revoking a leaked token means the token service issues a new one to
        the real owner, or stops issuing to the device. Prints the cutoff and how many
        gateways were subscribed. Written to every core Redis instance
        (QIM_REDIS_CORE_ADDRS, --redis-addr the home; docs/decisions/0100): an instance
        that cannot be written fails the revoke (exit 2, naming it); run it again.

Exit codes: 0 done, 2 a bad argument or an unreachable Redis (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from qim.cli.envargs import redis_layout
from qim.config.redislayout import RedisLayout
from qim.consts import TOKEN_MAX_TTL_S_DEFAULT
from qim.errors import ConfigError, EngineError
from qim.stores.revocations import open_revocations
from qim.wire.addr import parse_addr

# a revocation outlives every token it refuses: the longest lifetime a gateway accepts
# (QIM_TOKEN_MAX_TTL_S is at most 30 days) and the largest leeway
REVOCATION_TTL_S = 30 * 86_400 + 300
assert REVOCATION_TTL_S > TOKEN_MAX_TTL_S_DEFAULT


async def _revoke(layout: RedisLayout, tenant: int, user: int, device: int, cutoff: int) -> int:
    store = open_revocations(layout)
    try:
        return await store.revoke(tenant, user, device, cutoff, REVOCATION_TTL_S)
    finally:
        await store.close()


def run_revoke(args: argparse.Namespace, out=sys.stdout) -> int:
    """`qimctl token revoke` (module doc). ConfigError without a Redis address."""
    if not args.redis_addr:
        raise ConfigError("--redis-addr (or QIM_REDIS_ADDR) is required to revoke")
    try:
        parse_addr(args.redis_addr)
    except ValueError as exc:
        raise ConfigError(f"--redis-addr: {exc}") from None
    layout = redis_layout("--redis-addr", args.redis_addr, getattr(args, "environ", {}))
    device = args.device or 0
    cutoff = int(time.time())
    try:
        gateways = asyncio.run(_revoke(layout, int(args.tenant), args.user, device, cutoff))
    except EngineError as exc:
        raise ConfigError(f"revocation not written: {exc}") from None
    what = f"device {device}" if device else "every device"
    print(f"revoked: user {args.user} {what}, tokens issued at or before {cutoff}; {gateways} gateway(s) notified",
          file=out)
    return 0
