"""TLS configuration (qim/net/tls.py; docs/decisions/0022; docs/operations.md
"Certificates, keys and rotation"). Read through qim.config.Env; an invalid value raises
ConfigError naming the variable.

| variable | read by | meaning |
|---|---|---|
| QIM_GATEWAY_TLS_CERT, QIM_GATEWAY_TLS_KEY | gateway | client-port certificate chain and key (TLS 1.3, ALPN qim/1) |
| QIM_GATEWAY_PLAINTEXT_DEV=1 | gateway | plaintext client port instead; only on a loopback QIM_GATEWAY_LISTEN |
| QIM_INTERNAL_CA | gateway, writer, mailbox, session, qimctl | CA bundle trusted for service certificates (old + new during a CA rotation) |
| QIM_INTERNAL_TLS_CERT, QIM_INTERNAL_TLS_KEY | gateway, writer, mailbox, session | this process's service certificate (SAN URI qim://service/NAME) and key |
| QIM_INTERNAL_PLAINTEXT_DEV=1 | same | plaintext internal RPC instead; only when every address the process listens on or dials is loopback |
| QIM_GATEWAY_WS_ORIGINS | gateway | browser origins allowed to upgrade to WebSocket (ALPN http/1.1 on the client port, and the dev listener) |
| QIM_GATEWAY_WS_LISTEN | gateway | a plain ws:// listener for development; loopback only; unset: none |

Without a certificate and without the development flag a service does not start (exit
2): plaintext is never a silent default.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Mapping, Optional

from qim.config.env import Env
from qim.consts import WS_ORIGIN_PATTERN
from qim.errors import ConfigError
from qim.net.tls import TlsFiles, is_loopback
from qim.topology import service
from qim.wire.addr import parse_addr

INTERNAL_VARS = ("QIM_INTERNAL_CA", "QIM_INTERNAL_TLS_CERT", "QIM_INTERNAL_TLS_KEY")


def file_var(env: Env, name: str) -> str:
    """An optional file path ("" when unset); ConfigError naming `name` when the file
    does not exist or cannot be read."""
    path = env.raw(name)
    if path and not os.access(path, os.R_OK):
        raise ConfigError(f"{name}={path!r}: no such readable file")
    return path


def _require_loopback(flag: str, addrs: Mapping[str, Iterable[str]]) -> None:
    for var, values in addrs.items():
        for addr in values:
            host = parse_addr(addr)[0]
            if not is_loopback(host):
                raise ConfigError(f"{flag}=1 requires loopback addresses; {var} has {host}")


def client_port_tls(env: Env, listen: str) -> Optional[TlsFiles]:
    """The gateway's client-port certificate, or None with QIM_GATEWAY_PLAINTEXT_DEV=1 on a
    loopback QIM_GATEWAY_LISTEN (module doc)."""
    cert, key = file_var(env, "QIM_GATEWAY_TLS_CERT"), file_var(env, "QIM_GATEWAY_TLS_KEY")
    if env.flag("QIM_GATEWAY_PLAINTEXT_DEV"):
        if cert or key:
            raise ConfigError("QIM_GATEWAY_PLAINTEXT_DEV=1 and QIM_GATEWAY_TLS_CERT/KEY are both set: choose one")
        _require_loopback("QIM_GATEWAY_PLAINTEXT_DEV", {"QIM_GATEWAY_LISTEN": (listen,)})
        return None
    if not cert or not key:
        raise ConfigError("QIM_GATEWAY_TLS_CERT and QIM_GATEWAY_TLS_KEY are required: the client port is TLS 1.3 "
                          "(plaintext only with QIM_GATEWAY_PLAINTEXT_DEV=1 on a loopback QIM_GATEWAY_LISTEN)")
    return TlsFiles(cert, key)


def internal_tls(env: Env, addrs: Mapping[str, Iterable[str]]) -> Optional[TlsFiles]:
    """This process's service certificate for internal RPC, or None with
    QIM_INTERNAL_PLAINTEXT_DEV=1 when every address in `addrs` ({variable: addresses it
    listens on or dials}) is loopback (module doc)."""
    ca, cert, key = (file_var(env, n) for n in INTERNAL_VARS)
    if env.flag("QIM_INTERNAL_PLAINTEXT_DEV"):
        if ca or cert or key:
            raise ConfigError("QIM_INTERNAL_PLAINTEXT_DEV=1 and QIM_INTERNAL_CA/TLS_CERT/TLS_KEY are both set: "
                              "choose one")
        _require_loopback("QIM_INTERNAL_PLAINTEXT_DEV", addrs)
        return None
    missing = [n for n, v in zip(INTERNAL_VARS, (ca, cert, key)) if not v]
    if missing:
        raise ConfigError(f"{', '.join(missing)} required: internal RPC is mutual TLS (plaintext only with "
                          "QIM_INTERNAL_PLAINTEXT_DEV=1 and loopback addresses)")
    return TlsFiles(cert, key, ca)


def service_tls(env: Env, name: str, listen: str, peers: Mapping[str, Iterable[str]]) -> Optional[TlsFiles]:
    """internal_tls of service `name` (qim/topology.py): the addresses checked are its
    internal listener (`listen`) and every peer it dials ({service name: addresses}, as
    Env.peers reads them), each under the variable it was read from."""
    row = service(name)
    addrs: dict[str, Iterable[str]] = {}
    if row.internal_listener is not None:
        addrs[row.internal_listener.var] = (listen,)
    addrs.update({service(peer).addrs_var: values for peer, values in peers.items()})
    return internal_tls(env, addrs)


def ws_origins(env: "Env") -> tuple[str, ...]:
    """QIM_GATEWAY_WS_ORIGINS: the browser origins allowed to open a WebSocket to the
    gateway (comma list of scheme://host[:port|:*]; empty: none, only non-browser
    clients, which send no Origin). ConfigError naming the variable for a bad entry."""
    entries = tuple(e.strip() for e in env.raw("QIM_GATEWAY_WS_ORIGINS").split(",") if e.strip())
    for entry in entries:
        if not re.fullmatch(WS_ORIGIN_PATTERN, entry):
            raise ConfigError(f"QIM_GATEWAY_WS_ORIGINS: {entry!r} is not an origin "
                              "(scheme://host[:port], the port may be *)")
    return entries


def ws_dev_listen(env: "Env") -> str:
    """QIM_GATEWAY_WS_LISTEN: the plain ws:// listener for development ("" = none),
    loopback only (a token never crosses a network in the clear)."""
    addr = env.raw("QIM_GATEWAY_WS_LISTEN").strip()
    if addr:
        addr = env.addr("QIM_GATEWAY_WS_LISTEN")
        if not is_loopback(parse_addr(addr)[0]):
            raise ConfigError(f"QIM_GATEWAY_WS_LISTEN={addr}: the plain WebSocket listener is for development, "
                              "loopback only (browsers use wss:// on QIM_GATEWAY_LISTEN)")
    return addr
