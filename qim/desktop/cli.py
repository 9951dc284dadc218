"""qim-desktop command line: log in with a development token, then the full-screen app.

    qim-desktop --user 1001 [--name Alice] [--device D] [--key PATH] [--endpoint HOST:PORT[,HOST:PORT]] [--chat 1002]
    qim-desktop --token "$(qimctl token --user 1001 --device 5 --name Alice)"

--endpoint may list several gateways: the client moves to the next when one fails
(docs/decisions/0082). The local store lives per deployment (--deployment, else the
first gateway), tenant and user under --data-dir (the SDK's stable path), whichever
gateway is in use; its device id is kept there, so the same person on the same machine is the same
device next time. With --user the tokens are made from the development key (--key, else
$QIM_DEV_TOKEN_KEY) and renewed before they expire; a --token is used as given.
Mistakes a person makes — a closed port, a wrong key, an expired token, a TLS port
asked in plaintext, an internal port, a bad address, a store of another device, one's
own id as --chat — print ONE line on stderr and exit 2, never a traceback. /quit exits
0; being kicked (the device logged in elsewhere) prints why and exits 3; a fault of
qim-desktop itself (a traceback) exits 1 (EXIT_CRASH), never 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import NoReturn, Optional, Sequence

from qim.cli.envargs import tenant_arg, tenant_default
from qim.cli.tlsopts import add_client_args, client_context
from qim.errors import ConfigError, ErrorCode, QimError, TlsError
from qim.net.framed import parse_addr
from qim.net.tls import HandshakeFailed
from qim.sdk import Client, ConnectionLost
from qim.sdk.gateways import parse_endpoints
from qim.sdk.identity import DATA_DIR_ENV, default_data_dir, device_identity
from qim.sdk.model import StoreError
from qim.wire.devtoken import KEY_ENV, dev_key_from_env, issue_dev_token, token_claims
from qim.wire.names import check_name

DEFAULT_ENDPOINT = "127.0.0.1:7100"  # qim-gateway's default QIM_GATEWAY_LISTEN
EXIT_USAGE = 2
EXIT_CRASH = 1
# the gateway's refusal texts (qim/wire/tokens.py TokenVerifier) -> what the person can do
TOKEN_HINTS = (("token expired", "make a new one (qimctl token), or log in with --user for fresh tokens"),
               ("token signature is invalid", f"signed with another key: check --key or ${KEY_ENV}"),
               ("signed by a key this gateway does not trust", f"signed with another key: check --key or ${KEY_ENV}"),
               ("token not yet valid", "is this machine's clock right?"),
               ("another audience", "check $QIM_TOKEN_AUDIENCE"))


class UsageError(Exception):
    """A mistake in the command line or its environment: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line instead of usage + error
        raise UsageError(f"{message} (see --help)")


def _u63(value: str) -> int:
    if not value.isdigit() or not 0 < int(value) < 1 << 63:
        raise argparse.ArgumentTypeError(f"{value!r} is not a non-zero id below 2^63")
    return int(value)


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):  # NaN fails too
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive number of seconds")
    return seconds


def _name(value: str) -> str:
    try:
        return check_name(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser(environ=None) -> argparse.ArgumentParser:
    """The argument parser; defaults read from `environ` (os.environ when None)."""
    env = os.environ if environ is None else environ
    p = _Parser(prog="qim-desktop", description="QIM terminal chat client (full screen). Inside: Enter sends, "
                "Ctrl+J new line, Ctrl+U older messages, Ctrl+Q or /quit exits, /help lists the commands.")
    p.add_argument("--endpoint", default=env.get("QIM_GATEWAY_ADDRS") or env.get("QIM_GATEWAY_ADDR") or DEFAULT_ENDPOINT,
                   help="gateway HOST:PORT, or several comma-separated (the next one when one fails; default: "
                        f"$QIM_GATEWAY_ADDRS, else $QIM_GATEWAY_ADDR, else {DEFAULT_ENDPOINT})")
    p.add_argument("--deployment", default=env.get("QIM_DEPLOYMENT") or None,
                   help="the name this service's local stores are kept under, whichever gateway is used "
                        "(default: $QIM_DEPLOYMENT, else the first --endpoint)")
    p.add_argument("--token", default=env.get("QIM_TOKEN"),
                   help="development token naming tenant, user and device, e.g. from `qimctl token` "
                        "(default: $QIM_TOKEN; not needed with --user)")
    p.add_argument("--user", type=_u63, help="log in as this user id with tokens made from --key "
                                             "(default: none; give --user or --token)")
    p.add_argument("--name", type=_name, default="",
                   help="display name for --user, shown beside your messages on the other side "
                        "(default: none, your user id is shown)")
    p.add_argument("--device", type=_u63, help="device id for --user (default: the device id kept in this "
                                               "user's store under --data-dir; a new random one the first time)")
    p.add_argument("--tenant", type=tenant_arg, default=tenant_default(env),  # ConfigError naming QIM_TENANT_ID
                   help="tenant id for --user, decimal or 0x hex (default: $QIM_TENANT_ID, else 0)")
    p.add_argument("--key", default=None,
                   help=f"development token key (PEM private key file) for --user (default: ${KEY_ENV})")
    p.add_argument("--data-dir", default=default_data_dir(env),
                   help=f"where local stores live, one per deployment, tenant and user (default: ${DATA_DIR_ENV}, "
                        "else $XDG_DATA_HOME/qim, else ~/.local/share/qim)")
    p.add_argument("--chat", type=_u63, default=None,
                   help="open the direct chat with this user id at start (default: none)")
    p.add_argument("--connect-timeout", type=_seconds, default=15.0,
                   help="seconds to wait for the first connection and sync (default: 15)")
    p.add_argument("--media-url", default=env.get("QIM_MEDIA_URL") or "",
                   help="the MediaService's base URL for /attach and /save, e.g. https://host:8443 "
                        "(default: $QIM_MEDIA_URL; none: media cannot be sent)")
    add_client_args(p, env)  # --ca-file (default $QIM_CA_FILE), --plaintext (qim/cli/tlsopts.py)
    return p


async def _login(args: argparse.Namespace) -> Client:
    """The token, the store and a connected Client. UsageError for every person's mistake."""
    try:
        endpoints = parse_endpoints(args.endpoint)
        for endpoint in endpoints:
            parse_addr(endpoint)
    except ValueError as exc:
        raise UsageError(f"--endpoint: {exc}") from None
    try:
        tls = [client_context(args, endpoint) for endpoint in endpoints][0]  # each checked (--plaintext: loopback)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    _check_data_dir(args.data_dir)
    provider = None
    if args.token:
        token = args.token.strip()
        try:
            user = token_claims(token).user_id
        except ValueError as exc:
            raise UsageError(f"--token: {exc}") from None
        _check_chat(args.chat, user)
    elif args.user:
        try:
            key = dev_key_from_env(args.key)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if not 0 <= args.tenant < 1 << 128:
            raise UsageError("--tenant must be an unsigned 128-bit number")
        _check_chat(args.chat, args.user)
        try:
            ident = await device_identity(endpoints, args.tenant, args.user, args.data_dir, args.device,
                                          args.deployment)
        except StoreError as exc:
            raise UsageError(_second_device(str(exc), args.device)) from None
        except OSError as exc:  # the directory cannot be made or written (permissions, a full disk)
            raise UsageError(f"--data-dir {args.data_dir}: {exc.strerror or exc}") from None
        tenant, user, device, name = args.tenant, args.user, ident.device_id, args.name

        def provider() -> str:  # a session may outlive one token (1 h)
            return issue_dev_token(key, tenant, user, device, name=name)

        token = provider()
    else:
        raise UsageError(f"give --user (with --key or ${KEY_ENV}) or --token")
    try:
        client = await Client.open(endpoints, token, data_dir=args.data_dir, deployment=args.deployment,
                                   token_provider=provider,
                                   ssl_context=tls, plaintext=tls is None)
    except StoreError as exc:
        raise UsageError(_second_device(f"local store: {exc}", None)) from None
    except OSError as exc:
        raise UsageError(f"local store: {exc}") from None
    client.media_url = args.media_url or None  # qim/desktop/media.py; its TLS: the --ca-file context
    client.media_ssl = tls if args.media_url.startswith("https:") else None
    try:
        await asyncio.wait_for(client.connect(), args.connect_timeout)
    except asyncio.TimeoutError:
        await client.close()
        raise UsageError(f"no answer from {args.endpoint} within {args.connect_timeout:g} s") from None
    except QimError as exc:
        await client.close()
        raise UsageError(connect_error(args.endpoint, bool(args.plaintext), exc)) from None
    return client


def _second_device(refusal: str, device) -> str:
    """A store of another device: name the option that makes a second device of the same
    user on this machine (each device keeps its own store: docs/desktop.md "A second device")."""
    if "belongs to device" not in refusal:
        return refusal
    what = f"--device {device}" if device is not None else "this token's device"
    return (f"{refusal}. For a second device of this user on this machine, give {what} its own "
            "store: add --data-dir DIR (another directory, e.g. ~/.local/share/qim-2)")


def _check_data_dir(path: str) -> None:
    """UsageError naming --data-dir when it, or the nearest of its parents that exists, is
    not a directory (the store would fail deep inside with NotADirectoryError)."""
    here = os.path.abspath(path)
    while not os.path.exists(here):  # "/" exists: the loop ends
        here = os.path.dirname(here)
    if not os.path.isdir(here):
        raise UsageError(f"--data-dir {path}: {here} is not a directory")


def _check_chat(chat: Optional[int], user: int) -> None:
    if chat is not None and chat == user:
        raise UsageError(f"--chat {chat} is your own user id: give the user id of the person to chat with")


def connect_error(endpoint: str, plaintext: bool, exc: QimError) -> str:
    """The one line for a failed first connect: what the gateway or the network said,
    and what the person can do about it."""
    if exc.code == ErrorCode.UNAUTHENTICATED:
        said = getattr(exc, "message", "") or str(exc)
        hint = next((h for text, h in TOKEN_HINTS if text in said), f"check --key or ${KEY_ENV}")
        return f"the gateway at {endpoint} refused the token: {said} ({hint})"
    if isinstance(exc, TlsError):
        if isinstance(exc.__cause__, HandshakeFailed):  # the certificate or the TLS version
            return f"{exc} (check --ca-file or $QIM_CA_FILE)"
        return (f"{exc} (--endpoint must be qim-gateway's client port, $QIM_GATEWAY_ADDR; internal service "
                "ports take no clients)")
    if isinstance(exc, ConnectionLost):
        if plaintext and "before answering AUTH" in str(exc):
            return f"{exc}: it expects TLS (leave out --plaintext; --ca-file or $QIM_CA_FILE names its CA)"
        return f"{exc} (is qim-gateway listening there?)"
    return f"cannot connect to {endpoint}: {exc.code.name}: {exc}"


async def _main(args: argparse.Namespace) -> tuple[int, str]:
    from qim.desktop.app import run_app  # textual is imported only for a real session

    client = await _login(args)
    try:
        app = await run_app(client, args.chat)
    finally:
        await client.close()
    return exit_status(app)


def exit_status(app) -> tuple[int, str]:
    """(exit code, message) of a finished app: EXIT_CRASH after an unhandled exception
    (Textual printed its traceback), else the app's own code (0, or 3 when kicked)."""
    if app.return_code not in (None, 0):
        return EXIT_CRASH, "stopped by an internal error (traceback above); please report it"
    return app.exit_code, app.exit_message


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point (`qim-desktop`); returns the exit code."""
    try:
        args = build_parser().parse_args(argv)  # its defaults read QIM_* variables (ConfigError)
        code, message = asyncio.run(_main(args))
    except (UsageError, ConfigError) as exc:
        print(f"qim-desktop: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    if message:
        print(f"qim-desktop: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
