"""Spreading a load generator's clients over every gateway (docs/design.md §13; docs/operations.md
"Several nodes of each kind"): `--gateway` / $QIM_GATEWAY_ADDRS may list several
addresses ("host:port,host:port"); each user sticks to one of them, picked by
rendezvous hashing of its id, so clients spread evenly and a user's connections (and its
local store, whose path names the endpoint) always go to the same gateway first. An SDK
client is given all of them, its own first (`failover_order`): when its gateway fails
it moves to the next (docs/decisions/0082).
"""

from __future__ import annotations

import blake3

from qim.errors import ConfigError
from qim.wire.addr import parse_addr


def parse_gateways(value: str) -> tuple[str, ...]:
    """The addresses of a comma-separated list; ConfigError naming a bad one."""
    out = tuple(a.strip() for a in value.split(",") if a.strip())
    for a in out:
        try:
            parse_addr(a)
        except ValueError as exc:
            raise ConfigError(f"--gateway: {exc}") from None
    if not out:
        raise ConfigError("--gateway lists no address")
    return out


def gateway_for(user: int, gateways: tuple[str, ...], device: str = "") -> str:
    """The gateway `user` (its device labelled `device`, when a user has several that
    should spread too) connects to: highest BLAKE3(address ‖ user ‖ device) of `gateways`."""
    if len(gateways) == 1:
        return gateways[0]
    tail = user.to_bytes(8, "big") + device.encode()
    return max(gateways, key=lambda a: blake3.blake3(a.encode() + b"\0" + tail).digest()[:8])


def failover_order(first: str, gateways: tuple[str, ...]) -> tuple[str, ...]:
    """`first`, then the other `gateways` in their order: the list an SDK client fails
    over along (qim/sdk/gateways.py)."""
    return (first, *(g for g in gateways if g != first))
