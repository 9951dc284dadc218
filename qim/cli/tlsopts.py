"""The TLS options of the command-line clients (docs/decisions/0022; qim/net/tls.py).

Toward the gateway's client port (qim-loadgen, qim-desktop):
    --ca-file PATH   the CA that verifies the gateway's certificate
                     (default: $QIM_CA_FILE, else the system trust store)
    --plaintext      no TLS: only toward a development gateway on loopback
                     (QIM_GATEWAY_PLAINTEXT_DEV=1)
Toward a writer's internal port (qimctl; mutual TLS with qimctl's service certificate):
    --ca-file PATH   the internal CA bundle (default: $QIM_INTERNAL_CA, else $QIM_CA_FILE)
    --tls-cert PATH, --tls-key PATH
                     qimctl's certificate and key (default: $QIM_QIMCTL_TLS_CERT/_KEY)
    --plaintext      no TLS: only toward a development writer on loopback
A missing or unreadable file is a ConfigError naming the option (exit 2).
"""

from __future__ import annotations

import argparse
import os
import ssl
from typing import Mapping, Optional

from qim.errors import ConfigError, TlsError
from qim.net.tls import TlsContexts, TlsFiles, client_port_context, is_loopback
from qim.wire.addr import parse_addr

PLAINTEXT_HELP = "no TLS: only toward a development {what} on loopback (default: off, TLS)"


def add_client_args(p: argparse.ArgumentParser, env: Mapping[str, str] = os.environ) -> None:
    """--ca-file and --plaintext for a client of the gateway's client port."""
    p.add_argument("--ca-file", default=env.get("QIM_CA_FILE") or None,
                   help="CA file that verifies the gateway's certificate (default: $QIM_CA_FILE, "
                        "else the system trust store)")
    p.add_argument("--plaintext", action="store_true",
                   help=PLAINTEXT_HELP.format(what="gateway (QIM_GATEWAY_PLAINTEXT_DEV=1)"))


def _plaintext_ok(endpoint: str, addr_flag: str, flag: str = "--plaintext") -> None:
    try:
        host = parse_addr(endpoint)[0]
    except ValueError as exc:  # a bad address is the address option's error, never a traceback
        raise ConfigError(f"{addr_flag}: {exc}") from None
    if not is_loopback(host):
        raise ConfigError(f"{flag} only toward a loopback address, not {host}")


def client_context(args: argparse.Namespace, endpoint: str,
                   addr_flag: str = "--endpoint") -> Optional[ssl.SSLContext]:
    """The context of `add_client_args`' options (None with --plaintext). ConfigError
    naming the option when the CA file cannot be read, --plaintext is not loopback or
    the endpoint (option `addr_flag`) is not host:port."""
    if args.plaintext:
        _plaintext_ok(endpoint, addr_flag)
        return None
    try:
        return client_port_context(args.ca_file)
    except TlsError as exc:
        raise ConfigError(f"--ca-file: {exc}") from None


def add_internal_args(p: argparse.ArgumentParser, env: Mapping[str, str] = os.environ) -> None:
    """--ca-file, --tls-cert, --tls-key and --plaintext for qimctl's internal RPC."""
    p.add_argument("--ca-file", default=env.get("QIM_INTERNAL_CA") or env.get("QIM_CA_FILE") or None,
                   help="internal CA bundle (default: $QIM_INTERNAL_CA, else $QIM_CA_FILE)")
    p.add_argument("--tls-cert", default=env.get("QIM_QIMCTL_TLS_CERT") or None,
                   help="qimctl's service certificate (default: $QIM_QIMCTL_TLS_CERT)")
    p.add_argument("--tls-key", default=env.get("QIM_QIMCTL_TLS_KEY") or None,
                   help="its key (default: $QIM_QIMCTL_TLS_KEY)")
    p.add_argument("--plaintext", action="store_true", help=PLAINTEXT_HELP.format(what="writer"))


def internal_contexts(args: argparse.Namespace, addr: str, addr_flag: str = "--writer") -> Optional[TlsContexts]:
    """qimctl's mutual-TLS contexts from `add_internal_args`' options (None with
    --plaintext). ConfigError naming what is missing or cannot be loaded, or naming
    `addr_flag` when `addr` is not host:port."""
    if args.plaintext:
        _plaintext_ok(addr, addr_flag)
        return None
    missing = [flag for flag, value in (("--ca-file", args.ca_file), ("--tls-cert", args.tls_cert),
                                        ("--tls-key", args.tls_key)) if not value]
    if missing:
        raise ConfigError(f"{', '.join(missing)} required: the writer's port is mutual TLS (source the "
                          "stack's stack.env, or --plaintext toward a development writer)")
    try:
        return TlsContexts(TlsFiles(args.tls_cert, args.tls_key, args.ca_file))
    except TlsError as exc:
        raise ConfigError(f"--tls-cert/--tls-key/--ca-file: {exc}") from None
