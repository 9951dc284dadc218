"""`qimctl moderation ban|unban|log` (issue 38; docs/decisions/0123-moderation-notify.md item 6).

    qimctl moderation ban USER --reason R [--until TIME] [--tenant T] [--redis-addr H:P]
        refuses every token of every device of USER issued before TIME (no --until: for
        good): its logins are refused (ERROR UNAUTHENTICATED "token revoked"), its sends
        refused at commit, and every gateway closes its open connections with
        KICKED{REVOKED} within seconds: the revocation machinery of `qimctl token revoke`
        (decisions 0036, 0080, 0100) with a cutoff in the future.
    qimctl moderation unban USER --reason R: lowers the cutoff to now; tokens issued from
        the next second on are accepted (the user signs in again).
    qimctl moderation log [--count N]: the actions, newest first.

Every action is appended to the ModerationLog (qim/stores/redis/modlog.py) first, with the
operator ($QIM_OPERATOR, else the login name). Exit 0 done, 2 a bad argument or an
unreachable Redis (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
import time

from qim.cli.envargs import redis_layout
from qim.cli.qimctl_ops import REVOCATION_TTL_S
from qim.cli.timearg import parse_time
from qim.errors import ConfigError, EngineError
from qim.infra.redis.client import connect
from qim.stores.redis.modlog import ModerationLog
from qim.stores.revocations import open_revocations
from qim.wire.addr import parse_addr

FOREVER_S = 2**40  # the cutoff of a ban without an end: no token is issued that late
FOREVER_TTL_S = 100 * 365 * 86_400
REASON_MAX = 500


def operator() -> str:
    """The operator named in the moderation log: $QIM_OPERATOR, else the login name."""
    return os.environ.get("QIM_OPERATOR") or getpass.getuser()


async def act(redis_addr: str, environ, action: str, tenant: int, user: int, reason: str,
              cutoff: int = FOREVER_S, ttl: int = FOREVER_TTL_S, until: int = 0) -> int:
    """Log, then ban (revoke up to `cutoff`; the number of gateways told) or unban (lift
    to `cutoff`; 0). EngineError when Redis cannot be written. The defaults: a ban
    without an end (`qimctl moderation resolve --action ban` uses them too)."""
    layout = redis_layout("--redis-addr", redis_addr, environ)
    log = ModerationLog(connect(layout.home, max_connections=2))
    store = open_revocations(layout)
    try:
        await log.record(operator(), action, tenant, user, reason, until)
        if action == "ban":
            return await store.revoke(tenant, user, 0, cutoff, ttl)
        await store.lift(tenant, user, 0, cutoff, ttl)
        return 0
    finally:
        await store.close()
        await log.close()


async def _act(args: argparse.Namespace, action: str, cutoff: int, ttl: int, until: int) -> int:
    return await act(args.redis_addr, getattr(args, "environ", {}), action, int(args.tenant), args.user, args.reason,
                     cutoff, ttl, until)


def _check(args: argparse.Namespace) -> None:
    if not args.redis_addr:
        raise ConfigError("--redis-addr (or QIM_REDIS_ADDR) is required")
    try:
        parse_addr(args.redis_addr)
    except ValueError as exc:
        raise ConfigError(f"--redis-addr: {exc}") from None
    if not args.reason.strip() or len(args.reason) > REASON_MAX:
        raise ConfigError(f"--reason: 1 to {REASON_MAX} characters")


def run_ban(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation ban` (module doc)."""
    out = out or sys.stdout  # read at the call: a redirected stdout (tests, a wrapper) is honoured
    _check(args)
    now = int(time.time())
    until = parse_time(args.until, "--until") // 1000 if args.until else 0
    if args.until and until <= now:
        raise ConfigError(f"--until {args.until!r} is not in the future")
    cutoff, ttl = (until, until - now + REVOCATION_TTL_S) if until else (FOREVER_S, FOREVER_TTL_S)
    try:
        gateways = asyncio.run(_act(args, "ban", cutoff, ttl, until))
    except EngineError as exc:
        raise ConfigError(f"ban not written: {exc}") from None
    end = f"until {until}" if until else "until unbanned"
    print(f"banned: user {args.user} {end}; {gateways} gateway(s) notified (open connections closed)", file=out)
    return 0


def run_unban(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation unban` (module doc)."""
    out = out or sys.stdout  # read at the call: a redirected stdout (tests, a wrapper) is honoured
    _check(args)
    now = int(time.time())
    try:
        asyncio.run(_act(args, "unban", now, REVOCATION_TTL_S, 0))
    except EngineError as exc:
        raise ConfigError(f"unban not written: {exc}") from None
    print(f"unbanned: user {args.user}; tokens issued after {now} are accepted", file=out)
    return 0


def run_log(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation log`: one line per action, newest first."""
    out = out or sys.stdout  # read at the call: a redirected stdout (tests, a wrapper) is honoured
    if not args.redis_addr:
        raise ConfigError("--redis-addr (or QIM_REDIS_ADDR) is required")
    layout = redis_layout("--redis-addr", args.redis_addr, getattr(args, "environ", {}))

    async def read() -> list[dict[str, str]]:
        log = ModerationLog(connect(layout.home, max_connections=2))
        try:
            return await log.entries(args.count)
        finally:
            await log.close()

    try:
        rows = asyncio.run(read())
    except EngineError as exc:
        raise ConfigError(f"moderation log not read: {exc}") from None
    for r in rows:
        until = f" until={r['until']}" if r.get("until", "0") != "0" else ""
        until += f" group={r['group']}" if "group" in r else ""  # a mute or unmute (decision 0127)
        print(
            f"{r['at_ms']} {r['operator']} {r['action']} user={r['user']} tenant={r['tenant']}{until} "
            f"reason={r['reason']!r}",
            file=out,
        )
    return 0


def add_parsers(msub, env) -> None:
    """Register `moderation ban|unban|log` under the `moderation` subparsers."""
    for name, func, help_ in (
        ("ban", run_ban, "refuse a user's logins and sends, close its connections"),
        ("unban", run_unban, "end a ban"),
    ):
        p = msub.add_parser(name, help=help_)
        p.add_argument("user", type=int)
        p.add_argument("--reason", required=True)
        if name == "ban":
            p.add_argument("--until", metavar="TIME", help="ISO 8601 or unix ms (default: until unbanned)")
        p.add_argument("--tenant", default="0")
        p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
        p.set_defaults(func=func, environ=env)
    p = msub.add_parser("log", help="the moderation actions, newest first")
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
    p.set_defaults(func=run_log, environ=env)
