"""`qimctl moderation mute|unmute|mutes` (issue 38; docs/decisions/0127-group-mute.md).

    qimctl moderation mute USER GROUP --reason R [--until TIME] [--tenant T] [--redis-addr H:P]
        refuses USER's sends, edits and reactions in group GROUP (a group_id) with
        ERROR POLICY_REFUSED "you are muted in this group until …: R" (the reason is shown
        to the user) until TIME (no --until: until unmuted); USER still reads, receives,
        recalls or deletes its own messages and reports. A second mute replaces the first.
    qimctl moderation unmute USER GROUP --reason R: ends it now.
    qimctl moderation mutes [GROUP]: the mutes in force, soonest end first.

Every action is validated (the group exists; a mute's user is a current member), then
appended to the moderation log (`qimctl moderation log`) with the operator ($QIM_OPERATOR,
else the login name), target_user, group and until_ms, then carried out; one that fails
after its entry gets a second `outcome=failed` entry. Exit 0 done, 2 a bad argument,
an unknown group, a mute of a non-member or an unreachable Redis (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import datetime, timezone

from qim.cli.envargs import redis_layout, tenant_arg
from qim.cli.qimctl_moderation_ban import REASON_MAX, log_failed, operator
from qim.cli.timearg import parse_time
from qim.consts import U63_MAX
from qim.errors import ConfigError, EngineError
from qim.infra.redis.client import connect
from qim.stores.errors import NotFound
from qim.stores.redis.modlog import ModerationLog
from qim.stores.redis.mutes import GroupMutes
from qim.stores.redis.topology import topology_of


def _check(args: argparse.Namespace) -> None:
    if not 0 < args.group <= U63_MAX:
        raise ConfigError(f"GROUP {args.group} must be non-zero with bit 63 clear")
    reason = args.reason
    # the reason travels in a Lua error reply to the muted user: one line, no control characters
    if not reason.strip() or len(reason) > REASON_MAX or any(ord(c) < 32 or ord(c) == 127 for c in reason):
        raise ConfigError(f"--reason: 1 to {REASON_MAX} characters on one line")


async def _act(args: argparse.Namespace, action: str, until_ms: int) -> bool:
    layout = redis_layout("--redis-addr", args.redis_addr, args.environ)
    log = ModerationLog(connect(layout.home, max_connections=2))
    topology = topology_of(layout)
    try:
        who = operator()
        mutes = GroupMutes(topology)
        # validated before it is logged: only an action that is carried out is in the log
        # (a mute needs a current member; an unmute only the group: a member who left
        # may still be muted; decision 0123, Amendment)
        await mutes.check(args.tenant, args.group, args.user, member=action == "mute")
        entry = {"operator": who, "action": action, "tenant": args.tenant, "target_user": args.user,
                 "group": args.group, "reason": args.reason, "until_ms": until_ms}
        await log.record(**entry)
        try:
            if action == "mute":
                await mutes.mute(args.tenant, args.group, args.user, until_ms, args.reason, who)
                return True
            return await mutes.unmute(args.tenant, args.group, args.user)
        except EngineError as exc:  # NotFound: the group went away meanwhile; Redis lost
            raise EngineError(f"{exc}{await log_failed(log, entry, exc)}") from exc
        except NotFound as exc:
            raise NotFound(f"{exc}{await log_failed(log, entry, exc)}") from exc
    finally:
        await topology.aclose()
        await log.close()


def run_mute(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation mute` (module doc)."""
    out = out or sys.stdout  # read at the call: a redirected stdout (tests, a wrapper) is honoured
    _check(args)
    until_ms = parse_time(args.until, "--until") if args.until else 0
    if args.until and until_ms <= time.time() * 1000:
        raise ConfigError(f"--until {args.until!r} is not in the future")
    try:
        asyncio.run(_act(args, "mute", until_ms))
    except (NotFound, EngineError) as exc:
        raise ConfigError(f"mute not written: {exc}") from None
    end = f"until {_iso(until_ms)}" if until_ms else "until unmuted"
    print(f"muted: user {args.user} in group {args.group} {end}", file=out)
    return 0


def run_unmute(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation unmute` (module doc)."""
    out = out or sys.stdout
    _check(args)
    try:
        was = asyncio.run(_act(args, "unmute", 0))
    except (NotFound, EngineError) as exc:
        raise ConfigError(f"unmute not written: {exc}") from None
    print(f"unmuted: user {args.user} in group {args.group}" + ("" if was else " (was not muted)"), file=out)
    return 0


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_mutes(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation mutes [GROUP]`: one line per mute in force."""
    out = out or sys.stdout
    layout = redis_layout("--redis-addr", args.redis_addr, args.environ)

    async def read():
        topology = topology_of(layout)
        try:
            return await GroupMutes(topology).listing(args.group or 0)
        finally:
            await topology.aclose()

    try:
        rows = asyncio.run(read())
    except EngineError as exc:
        raise ConfigError(f"mutes not read: {exc}") from None
    for m in rows:
        end = _iso(m.until_ms) if m.until_ms else "unmuted"
        print(
            f"group={m.group_id} user={m.user} tenant={m.tenant} until={end} by={m.operator} "
            f"since={_iso(m.at_ms)} reason={m.reason!r}",
            file=out,
        )
    if not rows:
        print("no mutes in force", file=out)
    return 0


def add_parsers(msub, env) -> None:
    """Register `moderation mute|unmute|mutes` under the `moderation` subparsers."""
    for name, func, help_ in (
        ("mute", run_mute, "refuse a user's sends, edits and reactions in one group (it still reads)"),
        ("unmute", run_unmute, "end a mute"),
    ):
        p = msub.add_parser(name, help=help_)
        p.add_argument("user", type=int)
        p.add_argument("group", type=int, help="the group_id")
        p.add_argument("--reason", required=True, help="shown to the muted user and in the log")
        if name == "mute":
            p.add_argument("--until", metavar="TIME", help="ISO 8601 or unix ms (default: until unmuted)")
        p.add_argument("--tenant", type=tenant_arg, default=0)
        p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
        p.set_defaults(func=func, environ=env)
    p = msub.add_parser("mutes", help="the group mutes in force, soonest end first")
    p.add_argument("group", type=int, nargs="?", default=0, help="only this group_id")
    p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
    p.set_defaults(func=run_mutes, environ=env)
