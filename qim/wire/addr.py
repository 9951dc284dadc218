"""Service address parsing: the one definition of 'host:port' (docs/design.md §11 *_ADDR,
*_LISTEN variables). Used by config, the RPC client and listeners, the Redis
connection, qimctl and the SDK; qim/net re-exports it for older callers."""

from __future__ import annotations

PORT_MAX = 65535


def parse_addr(addr: str) -> tuple[str, int]:
    """'host:port' -> (host, port); '[v6]:port' gives the bare v6 host. ValueError naming
    the address and what is wrong with it: no colon or empty host or a non-numeric port
    ("expected host:port"), or a port above PORT_MAX ("port N is outside 0..65535")."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad address {addr!r}: expected host:port")
    if int(port) > PORT_MAX:
        raise ValueError(f"bad address {addr!r}: port {int(port)} is outside 0..{PORT_MAX}")
    return host.strip("[]"), int(port)
