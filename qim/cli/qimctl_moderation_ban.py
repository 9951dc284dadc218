"""`qimctl moderation ban|unban|log` (issue 38; docs/decisions/0123-moderation-notify.md item 6).

    qimctl moderation ban USER --reason R [--until TIME] [--tenant T] [--redis-addr H:P]
        refuses every token of every device of USER issued before TIME (no --until: for
        good): its logins are refused (ERROR BANNED "banned until …: R" with until_ms),
        its sends refused at commit, and every gateway closes its open connections with
        KICKED{BANNED} (the reason and the end) within seconds: the revocation machinery
        of `qimctl token revoke` (decisions 0036, 0080, 0100) with a cutoff in the
        future, and the ban's reason and end on the home instance (bans.py).
    qimctl moderation unban USER --reason R: lowers the cutoff to now; tokens issued from
        the next second on are accepted (the user signs in again).
    qimctl moderation log [--count N]: the actions, newest first.

Every action is validated first (USER a positive id: QIM has no user directory, so a ban
of an id not seen yet bans its future logins) and then appended to the ModerationLog
(qim/stores/redis/modlog.py) with the operator ($QIM_OPERATOR, else the login name) and
explicit fields (target_user, until_ms, ...); a ban that fails after its entry gets a
second entry `outcome=failed` (decision 0123, Amendment). `log` prints every time as
ISO-8601 UTC. Exit 0 done, 2 a bad argument or an unreachable Redis (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any

from qim.cli.envargs import redis_layout
from qim.cli.qimctl_ops import REVOCATION_TTL_S
from qim.cli.timearg import parse_time
from qim.consts import U63_MAX
from qim.errors import ConfigError, EngineError
from qim.infra.redis.client import connect
from qim.stores.redis.bans import clear_ban, set_ban
from qim.stores.redis.modlog import ModerationLog
from qim.stores.revocations import open_revocations
from qim.wire.addr import parse_addr

FOREVER_S = 2**40  # the cutoff of a ban without an end: no token is issued that late
FOREVER_TTL_S = 100 * 365 * 86_400
REASON_MAX = 500


def operator() -> str:
    """The operator named in the moderation log: $QIM_OPERATOR, else the login name."""
    return os.environ.get("QIM_OPERATOR") or getpass.getuser()


def iso_utc(ms: int) -> str:
    """Unix ms as ISO-8601 UTC to the millisecond, e.g. 2026-12-06T06:10:00.123Z."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


async def log_failed(log: ModerationLog, entry: dict[str, Any], exc: BaseException) -> str:
    """The second entry of an action that failed after its first (`outcome=failed`); ""
    when written, else why it could not be (the caller names it in its error)."""
    try:
        await log.record(**entry, outcome="failed", error=str(exc)[:REASON_MAX])
    except EngineError as lost:
        return f"; its log entry could not be marked failed: {lost}"
    return ""


async def act(redis_addr: str, environ, action: str, tenant: int, user: int, reason: str,
              cutoff: int = FOREVER_S, ttl: int = FOREVER_TTL_S, until_ms: int = 0, report: str = "") -> int:
    """Validate, log, then ban (revoke up to `cutoff`; the number of gateways told) or
    unban (lift to `cutoff`; 0). ConfigError for a user id that is not positive;
    EngineError when Redis cannot be written (the entry then gets its `outcome=failed`
    twin when the log still answers). The defaults: a ban without an end (`qimctl
    moderation resolve --action ban` uses them too, with `report`)."""
    if not 0 < user <= U63_MAX:
        raise ConfigError(f"USER {user} must be a positive user id")
    layout = redis_layout("--redis-addr", redis_addr, environ)
    home = connect(layout.home, max_connections=2)
    log = ModerationLog(home)
    store = open_revocations(layout)
    entry: dict[str, Any] = {"operator": operator(), "action": action, "tenant": tenant, "target_user": user, "report": report,
             "reason": reason, "until_ms": until_ms}
    try:
        await log.record(**entry)
        try:
            if action == "ban":
                # why and until when, read by the gateways before they refuse or kick
                # (KICKED{BANNED}, ERROR BANNED): written before the revocation is published
                await set_ban(home, tenant, user, until_ms, reason)
                return await store.revoke(tenant, user, 0, cutoff, ttl)
            await store.lift(tenant, user, 0, cutoff, ttl)
            await clear_ban(home, tenant, user)
            return 0
        except EngineError as exc:
            raise EngineError(f"{exc}{await log_failed(log, entry, exc)}") from exc
    finally:
        await store.close()
        await log.close()


async def _act(args: argparse.Namespace, action: str, cutoff: int, ttl: int, until_ms: int) -> int:
    return await act(args.redis_addr, getattr(args, "environ", {}), action, int(args.tenant), args.user, args.reason,
                     cutoff, ttl, until_ms)


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
        gateways = asyncio.run(_act(args, "ban", cutoff, ttl, until * 1000))
    except EngineError as exc:
        raise ConfigError(f"ban not written: {exc}") from None
    end = f"until {iso_utc(until * 1000)}" if until else "until unbanned"
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
        print(log_line(r), file=out)
    if not rows:  # said: an empty output reads like a command that read nowhere
        print("no moderation actions", file=out)
    return 0


def log_line(r: dict[str, str]) -> str:
    """One normalized entry (modlog.normalize) as printed: time, operator, action, then
    the fields that apply (a user, group or end of 0 does not), times ISO-8601 UTC."""
    at = iso_utc(int(r["at_ms"])) if r["at_ms"].isdigit() else r["at_ms"] or "?"
    parts = [at, r["operator"], r["action"], f"tenant={r['tenant']}"]
    parts += [f"{k}={r[k]}" for k in ("target_user", "reporter", "group") if r[k] != "0"]
    parts += [f"report={r['report']}"] if r["report"] else []
    if r["until_ms"] != "0":
        parts.append(f"until={iso_utc(int(r['until_ms']))}" if r["until_ms"].isdigit() else f"until={r['until_ms']}")
    parts.append(f"reason={r['reason']!r}")
    if r["outcome"]:
        parts += [f"outcome={r['outcome']}", f"error={r['error']!r}"]
    return " ".join(parts)


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
