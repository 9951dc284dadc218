"""qimctl admin commands: group membership and operator deletes (docs/decisions/0005-groups-history.md).

    qimctl membership add    --group G --user U [--user U ...] [--writer H:P] [--tenant T] [--request-id HEX32]
    qimctl membership remove --group G --user U [--user U ...] ...
    qimctl message delete    --conversation HEX32 --message-id HEX32 [--peer U] ...

They talk to a writer over the internal RPC (WRITER_ADMIN, the trusted admin plane;
default writer: the first of $QIM_WRITER_ADDRS). A retry with the same --request-id is
idempotent. Exit 0 on success, 1 when the writer refuses (code and reason printed),
2 when it cannot be reached or an argument is invalid.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Optional

from qim.cli.envargs import check_addr, first_writer, tenant_arg, tenant_default
from qim.cli.tlsopts import add_internal_args, internal_contexts
from qim.consts import U63_MAX
from qim.errors import ConfigError, RequestError
from qim.net.rpc import RemoteError, RpcClient
from qim.net.tls import TlsContexts
from qim.proto.v1 import group_pb2, internal_pb2, message_pb2
from qim.protocol import Opcode
from qim.topology import WRITER


def add_parsers(sub, env) -> None:
    """Register `membership` and `message` under the qimctl subcommands."""
    default_writer = first_writer(env)  # ConfigError naming QIM_WRITER_ADDRS
    for name, help_text in (("membership", "add or remove group members (CONTROL messages)"),
                            ("message", "operator actions on stored messages")):
        p = sub.add_parser(name, help=help_text)
        actions = p.add_subparsers(dest="action", required=True)
        if name == "membership":
            for action in ("add", "remove"):
                a = actions.add_parser(action)
                a.add_argument("--group", type=int, required=True)
                a.add_argument("--user", type=int, action="append", required=True)
                _common(a, default_writer, env)
        else:
            a = actions.add_parser("delete")
            a.add_argument("--conversation", required=True, help="conversation_id, 32 hex")
            a.add_argument("--message-id", required=True, help="message_id, 32 hex")
            a.add_argument("--peer", type=int, default=0, help="direct conversations: the non-sender participant")
            _common(a, default_writer, env)
        p.set_defaults(func=run_admin)


def _common(p, default_writer: str, env) -> None:
    p.add_argument("--writer", default=default_writer, help="writer host:port (default: first of $QIM_WRITER_ADDRS)")
    add_internal_args(p, env)  # mutual TLS with qimctl's certificate (qim/cli/tlsopts.py)
    p.add_argument("--tenant", type=tenant_arg, default=tenant_default(env),
                   help="tenant id, decimal or 0x hex (default: $QIM_TENANT_ID, else 0)")
    p.add_argument("--request-id", default=None, help="32 hex; reuse it to retry idempotently")


def _hex16(value: str, flag: str) -> bytes:
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) != 16 or not any(raw):
        raise ConfigError(f"{flag} must be 32 hex digits of a non-zero 16-byte id")
    return raw


def build_request(args: argparse.Namespace) -> internal_pb2.AdminRequest:
    """The AdminRequest for the parsed arguments; ConfigError naming the flag otherwise."""
    request_id = _hex16(args.request_id, "--request-id") if args.request_id else os.urandom(16)
    req = internal_pb2.AdminRequest(tenant_id=args.tenant.to_bytes(16, "big"))
    if args.command == "membership":
        # name only the option that is wrong, with its value
        if not 0 < args.group <= U63_MAX:
            raise ConfigError(f"--group {args.group} must be non-zero with bit 63 clear")
        for user in args.user:
            if not 0 < user <= U63_MAX:
                raise ConfigError(f"--user {user} must be non-zero with bit 63 clear")
        edit = req.membership
        edit.group_id, edit.request_id = args.group, request_id
        (edit.add if args.action == "add" else edit.remove).extend(args.user)
    else:
        d = req.delete_message
        d.conversation_id = _hex16(args.conversation, "--conversation")
        d.message_id = _hex16(args.message_id, "--message-id")
        d.request_id, d.peer_user_id = request_id, args.peer
    return req


async def _call(addr: str, body: bytes, tls: Optional[TlsContexts]) -> tuple[int, bytes]:
    client = RpcClient(addr, tls=tls, expect_service=WRITER)
    try:
        return await client.call(Opcode.WRITER_ADMIN, body)
    finally:
        await client.close()


def run_admin(args: argparse.Namespace, out=sys.stdout) -> int:
    """Send one admin request (membership edit or operator delete) to a writer; prints the request id and the result, returns the exit code."""
    req = build_request(args)
    check_addr("--writer", args.writer)
    tls = internal_contexts(args, args.writer)
    print(f"request_id={(req.membership.request_id or req.delete_message.request_id).hex()}", file=out)
    try:
        opcode, reply = asyncio.run(_call(args.writer, req.SerializeToString(), tls))
    except RemoteError as err:  # the writer answered ERROR
        print(f"refused: {err.code.name}: {err.message}", file=out)
        return 1
    except RequestError as exc:
        print(f"qimctl: error: {exc.code.name}: {exc.message}", file=sys.stderr)
        return 2
    if opcode == Opcode.GROUP_OK:
        ok = group_pb2.GroupOk.FromString(reply)
        print(f"ok: membership_version={ok.membership_version} conversation_seq={ok.conversation_seq}", file=out)
    else:
        done = message_pb2.RecallOk.FromString(reply)
        print(f"ok: state={message_pb2.MessageState.Name(done.state)} control_seq={done.control_conversation_seq}",
              file=out)
    return 0
