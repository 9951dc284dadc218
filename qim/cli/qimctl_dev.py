"""qimctl development commands: tokens and groups made by the operator (docs/decisions/0018).

    qimctl token --user U --device D [--name NAME] [--ttl S] [--tenant T] [--key PATH] [--audience A]
        prints only a development token (a JWT signed with the development key: --key,
        else $QIM_DEV_TOKEN_KEY; never any other key), valid --ttl seconds (3600),
        claiming the display name --name (shown beside the user's messages)
    qimctl group create --group G --owner U --members U [U ...] [--title T] [--writer H:P]
                        [--tenant T] [--request-id HEX32]
        creates a group that does not exist, with U as owner and member, through the
        writer's internal RPC (the trusted admin plane): the writer runs the same
        CREATE_GROUP as for a client with the owner as actor (CONFLICT when it exists).
        A retry with the same --request-id replays the original answer.

Exit codes: 0 done, 1 the writer refused (code and reason printed), 2 a bad argument
or an unreachable writer (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Optional

from qim.cli.envargs import check_addr, first_writer, tenant_arg, tenant_default
from qim.cli.qimctl_admin import _hex16
from qim.cli.tlsopts import add_internal_args, internal_contexts
from qim.consts import DEV_TOKEN_TTL_S, NAME_MAX_BYTES, TOKEN_MAX_TTL_S_DEFAULT, U63_MAX
from qim.errors import ConfigError, RequestError
from qim.net.rpc import RemoteError, RpcClient
from qim.net.tls import TlsContexts
from qim.proto.v1 import group_pb2, internal_pb2
from qim.protocol import Opcode
from qim.topology import WRITER
from qim.wire.devtoken import AUDIENCE_ENV, KEY_ENV, dev_key_from_env, issue_dev_token
from qim.wire.names import check_name


def _id(value: str) -> int:
    if not value.isdigit() or not 0 < int(value) <= U63_MAX:
        raise argparse.ArgumentTypeError(f"{value!r} is not a non-zero id with bit 63 clear")
    return int(value)


def _ttl(value: str) -> int:
    if not value.isdigit() or not 0 < int(value) <= TOKEN_MAX_TTL_S_DEFAULT:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds in 1..{TOKEN_MAX_TTL_S_DEFAULT}")
    return int(value)


def _name(value: str) -> str:
    try:
        return check_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parsers(sub, env) -> None:
    """Register `token` and `group` under the qimctl subcommands."""
    tenant = tenant_default(env)  # ConfigError naming QIM_TENANT_ID
    t = sub.add_parser("token", help="print a development token for (tenant, user, device), signed with the "
                                     "development key; `token revoke`: refuse and cut a device's tokens")
    t.add_argument("action", nargs="?", choices=("issue", "revoke"), default="issue",
                   help="issue (default) or revoke (qim/cli/qimctl_ops.py: every gateway closes the device's "
                        "connections within seconds and refuses its tokens issued until now)")
    t.add_argument("--user", type=_id, required=True, help="user id (required)")
    t.add_argument("--device", type=_id, default=None,
                   help="device id the token names (required to issue; revoke: omitted = every device of the user)")
    t.add_argument("--redis-addr", default=env.get("QIM_REDIS_ADDR"),
                   help="revoke: the home Redis (default $QIM_REDIS_ADDR; written to every instance of "
                        "$QIM_REDIS_CORE_ADDRS)")
    t.add_argument("--tenant", type=tenant_arg, default=tenant,
                   help="tenant id, decimal or 0x hex (default: $QIM_TENANT_ID, else 0)")
    t.add_argument("--name", type=_name, default="",
                   help=f"display name the token claims, at most {NAME_MAX_BYTES} bytes of UTF-8 (default: none, "
                        "the user id is shown)")
    t.add_argument("--ttl", type=_ttl, default=DEV_TOKEN_TTL_S,
                   help=f"seconds the token is valid (default: {DEV_TOKEN_TTL_S})")
    t.add_argument("--key", default=None,
                   help=f"development key, a PEM private key file (default: ${KEY_ENV}, from .qim/stack/stack.env)")
    t.add_argument("--audience", default=None,
                   help=f"the gateway's token audience (default: ${AUDIENCE_ENV}, else qim)")
    t.set_defaults(func=run_token, environ=env)

    default_writer = first_writer(env)  # ConfigError naming QIM_WRITER_ADDRS
    g = sub.add_parser("group", help="operator group commands")
    actions = g.add_subparsers(dest="action", required=True)
    c = actions.add_parser("create", help="create a group with an owner and members (CONFLICT when it exists)")
    c.add_argument("--group", type=_id, required=True, help="group id (required)")
    c.add_argument("--owner", type=_id, required=True, help="owner user id; becomes a member too (required)")
    c.add_argument("--members", type=_id, nargs="+", default=[],
                   help="member user ids besides the owner (default: none)")
    c.add_argument("--title", type=_name, default="",
                   help=f"the group's title, at most {NAME_MAX_BYTES} bytes of UTF-8 (default: none)")
    c.add_argument("--writer", default=default_writer,
                   help="writer internal HOST:PORT (default: first of $QIM_WRITER_ADDRS, else 127.0.0.1:7101)")
    c.add_argument("--tenant", type=tenant_arg, default=tenant,
                   help="tenant id, decimal or 0x hex (default: $QIM_TENANT_ID, else 0)")
    c.add_argument("--request-id", default=None,
                   help="32 hex digits; reuse it to retry idempotently (default: a new random one)")
    c.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the writer (default: 10)")
    add_internal_args(c, env)  # mutual TLS with qimctl's certificate (qim/cli/tlsopts.py)
    c.set_defaults(func=run_group_create)


def run_token(args: argparse.Namespace, out=sys.stdout) -> int:
    """Print the token only (so `$(qimctl token ...)` works). ConfigError (one line)
    without a usable development key; `revoke` is qim/cli/qimctl_ops.py's."""
    if args.action == "revoke":
        from qim.cli.qimctl_ops import run_revoke

        return run_revoke(args, out)
    if args.device is None:
        raise ConfigError("--device is required to issue a token")
    try:
        key = dev_key_from_env(args.key)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    print(issue_dev_token(key, int(args.tenant), args.user, args.device, ttl_s=args.ttl, audience=args.audience,
                          name=args.name), file=out)
    return 0


async def _call(addr: str, body: bytes, timeout: float, tls: Optional[TlsContexts]) -> tuple[int, bytes]:
    client = RpcClient(addr, tls=tls, expect_service=WRITER)
    try:
        return await client.call(Opcode.WRITER_SEND, body, timeout)
    finally:
        await client.close()


def run_group_create(args: argparse.Namespace, out=sys.stdout) -> int:
    """CREATE_GROUP with the owner as actor over WRITER_SEND (module docstring)."""
    request_id = _hex16(args.request_id, "--request-id") if args.request_id else os.urandom(16)
    check_addr("--writer", args.writer)
    tls = internal_contexts(args, args.writer)
    tenant = int(args.tenant).to_bytes(16, "big")
    members = sorted(set(args.members) - {args.owner})
    create = group_pb2.CreateGroup(group_id=args.group, members=members, client_message_id=request_id,
                                   title=args.title)
    req = internal_pb2.WriterSend(actor=internal_pb2.Actor(tenant_id=tenant, user_id=args.owner, device_id=0),
                                  upstream=create.SerializeToString(), opcode=Opcode.CREATE_GROUP)
    print(f"request_id={request_id.hex()}", file=out)
    try:
        _, reply = asyncio.run(_call(args.writer, req.SerializeToString(), args.timeout, tls))
    except RemoteError as err:
        print(f"refused: {err.code.name}: {err.message}", file=out)
        return 1
    except RequestError as exc:
        raise ConfigError(f"writer at {args.writer}: {exc.code.name}: {exc.message}") from None
    ok = group_pb2.GroupOk.FromString(reply)
    print(f"ok: conversation_id={ok.conversation_id.hex()} membership_version={ok.membership_version}"
          f" conversation_seq={ok.conversation_seq}", file=out)
    return 0
