"""`qimctl moderation reports|resolve`: the users' reports (docs/decisions/0124-user-reports.md).

    qimctl moderation reports [--open] [--count N] [--redis-addr H:P]
        one line per report, newest first: id, at (ISO-8601 UTC), state, reason, reporter, the message
        (conversation and message ids, its sender) and the reporter's text.
    qimctl moderation resolve REPORT_ID --action none|remove-message|ban --reason R
            [--writer H:P] [--redis-addr H:P]
        none: closes it; remove-message: the operator delete (`qimctl message delete`,
        the message loses its body for every member); ban: `qimctl moderation ban` of the
        message's sender without an end. A report is resolved once: the report is claimed
        in one Lua call (of two operators at once one wins), then the resolution is
        appended to the moderation log (target_user the message's sender, reporter,
        report), then the action runs; one that fails is logged again `outcome=failed`
        and the report is open again (decision 0124, Amendment).

Exit 0 done, 1 the writer refused the delete, 2 a bad argument, an unknown report, a
report already resolved ("report ID already resolved at T by OPERATOR: ACTION", nothing
changed) or an unreachable Redis or writer (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from qim.cli import qimctl_moderation_ban as ban
from qim.cli.envargs import check_addr, first_writer, redis_layout
from qim.cli.tlsopts import add_internal_args, internal_contexts
from qim.errors import ConfigError, EngineError, RequestError
from qim.infra.redis.client import connect
from qim.net.rpc import RemoteError, RpcClient
from qim.proto.v1 import internal_pb2, message_pb2
from qim.protocol import Opcode
from qim.stores.redis.modlog import ModerationLog
from qim.stores.redis.reports import RedisReportStore
from qim.topology import WRITER

ACTIONS = ("none", "remove-message", "ban")


def _layout(args: argparse.Namespace):
    if not args.redis_addr:
        raise ConfigError("--redis-addr (or QIM_REDIS_ADDR) is required")
    return redis_layout("--redis-addr", args.redis_addr, getattr(args, "environ", {}))


def run_reports(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation reports` (module doc)."""
    out = out or sys.stdout  # read at the call: a redirected stdout is honoured
    layout = _layout(args)

    async def read() -> list[dict[str, str]]:
        store = RedisReportStore(connect(layout.home, max_connections=2))
        try:
            return await store.listing(args.count, args.open)
        finally:
            await store.close()

    try:
        rows = asyncio.run(read())
    except EngineError as exc:
        raise ConfigError(f"reports not read: {exc}") from None
    for r in rows:
        done = f" action={r.get('action')} by={r.get('operator')}" if r.get("state") == "resolved" else ""
        print(
            f"{r['id']} at={_reported_at(r['id'])} {r.get('state')} {r.get('reason')} reporter={r.get('reporter')} "
            f"tenant={r.get('tenant')} "
            f"conversation={r.get('conversation_id')} message={r.get('message_id')} sender={r.get('sender')}"
            f"{done} text={r.get('text', '')!r}",
            file=out,
        )
    if not rows:  # said, as `mutes` does: an empty output reads like a command that read nowhere
        print("no open reports" if args.open else "no reports", file=out)
    return 0


def _reported_at(report_id: str) -> str:
    """When a report was made, ISO-8601 UTC: its id is the reports stream's entry id, whose
    first part is the Redis server's Unix ms (an operator reads the time, not the id; the
    id stays first, it is what `resolve` takes); "?" for an id of another shape."""
    ms = report_id.split("-", 1)[0]
    return ban.iso_utc(int(ms)) if ms.isdigit() else "?"


def _delete_request(rep: dict[str, str]) -> internal_pb2.AdminRequest:
    """The operator delete of the reported message (qim/cli/qimctl_admin.py's request)."""
    tenant, reporter, sender = int(rep["tenant"]), int(rep["reporter"]), int(rep.get("sender") or 0)
    req = internal_pb2.AdminRequest(tenant_id=tenant.to_bytes(16, "big"))
    d = req.delete_message
    d.conversation_id, d.message_id = bytes.fromhex(rep["conversation_id"]), bytes.fromhex(rep["message_id"])
    # a direct conversation's delete names its non-sender participant
    d.request_id, d.peer_user_id = os.urandom(16), reporter if sender != reporter else int(rep.get("peer") or 0)
    return req


async def _delete(args: argparse.Namespace, rep: dict[str, str]) -> None:
    client = RpcClient(args.writer, tls=internal_contexts(args, args.writer), expect_service=WRITER)
    try:
        opcode, reply = await client.call(Opcode.WRITER_ADMIN, _delete_request(rep).SerializeToString())
    finally:
        await client.close()
    if opcode != Opcode.RECALL_OK or message_pb2.RecallOk.FromString(reply).state != message_pb2.MESSAGE_STATE_DELETED:
        raise EngineError(f"the writer answered opcode 0x{opcode:04x} to the delete")


async def _resolve(args: argparse.Namespace, layout) -> dict[str, str]:
    """Validate, claim the report (once: one Lua call), log, act; an action that fails
    after its entry gets an `outcome=failed` entry and the report is opened again."""
    store = RedisReportStore(connect(layout.home, max_connections=2))
    log = ModerationLog(connect(layout.home, max_connections=2))
    try:
        rep = await store.get(args.report_id)
        if rep is None:
            raise ConfigError(f"no report {args.report_id!r}")
        tenant, reporter, sender = int(rep["tenant"]), int(rep["reporter"]), int(rep.get("sender") or 0)
        if args.action == "ban" and sender <= 0:
            raise ConfigError(f"report {args.report_id} names no sender to ban")
        who, at_ms = ban.operator(), int(time.time() * 1000)
        stands = await store.claim(args.report_id, who, args.action, args.reason, at_ms)
        if stands is not None:  # resolve is once (decision 0124, Amendment): nothing changes
            when = ban.iso_utc(stands.at_ms) if stands.at_ms else "an unrecorded time"
            raise ConfigError(f"report {args.report_id} already resolved at {when} by {stands.operator}: "
                              f"{stands.action}")
        entry = {"operator": who, "action": f"resolve-report:{args.action}", "tenant": tenant,
                 "target_user": sender if args.action != "none" else 0, "reporter": reporter,
                 "report": args.report_id, "reason": args.reason}
        await log.record(**entry)
        try:
            if args.action == "remove-message":
                await _delete(args, rep)
            elif args.action == "ban":
                await ban.act(args.redis_addr, getattr(args, "environ", {}), "ban", tenant, sender, args.reason,
                              report=args.report_id)
        except (EngineError, RequestError, RemoteError) as exc:
            lost = await ban.log_failed(log, entry, exc)
            await store.reopen(args.report_id, who, at_ms)  # open for another try
            if lost:
                raise EngineError(f"{exc}{lost}") from exc
            raise
        return rep
    finally:
        await log.close()
        await store.close()


def run_resolve(args: argparse.Namespace, out=None) -> int:
    """`qimctl moderation resolve` (module doc)."""
    out = out or sys.stdout  # read at the call: a redirected stdout is honoured
    layout = _layout(args)
    if not args.reason.strip() or len(args.reason) > ban.REASON_MAX:
        raise ConfigError(f"--reason: 1 to {ban.REASON_MAX} characters")
    if args.action == "remove-message":
        check_addr("--writer", args.writer)
    try:
        rep = asyncio.run(_resolve(args, layout))
    except RemoteError as err:  # the writer refused the delete
        print(f"refused: {err.code.name}: {err.message}", file=out)
        return 1
    except (EngineError, RequestError) as exc:
        raise ConfigError(f"report {args.report_id} not resolved: {exc}") from None
    print(f"resolved: report {args.report_id} action={args.action} message={rep['message_id']}", file=out)
    return 0


def add_parsers(msub, env) -> None:
    """Register `moderation reports|resolve` under the `moderation` subparsers."""
    p = msub.add_parser("reports", help="the users' reports, newest first")
    p.add_argument("--open", action="store_true", help="only the reports not resolved yet")
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
    p.set_defaults(func=run_reports, environ=env)
    p = msub.add_parser("resolve", help="close a report: nothing, remove the message, or ban its sender")
    p.add_argument("report_id")
    p.add_argument("--action", choices=ACTIONS, required=True)
    p.add_argument("--reason", required=True)
    p.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"))
    p.add_argument(
        "--writer",
        default=first_writer(env),
        help="writer host:port for remove-message (default: first of $QIM_WRITER_ADDRS)",
    )
    add_internal_args(p, env)
    p.set_defaults(func=run_resolve, environ=env)
