"""Service address parsing: the one definition of 'host:port' (docs/design.md §11 *_ADDR,
*_LISTEN variables). Used by config, the RPC client and listeners, the Redis
connection, qimctl and the SDK; qim/net re-exports it for older callers."""

from __future__ import annotations


def parse_addr(addr: str) -> tuple[str, int]:
    """'host:port' -> (host, port); '[v6]:port' gives the bare v6 host. ValueError naming
    the address on a bad form (no colon, empty host, non-numeric or out-of-range port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"bad address {addr!r}: expected host:port")
    return host.strip("[]"), int(port)
