"""Redis connections (docs/design.md §8). Generic plumbing only: key layouts, Lua scripts and
the error table belong to the stores (qim/stores/redis/)."""

from __future__ import annotations

import hiredis
import redis.asyncio as aioredis
from redis.exceptions import DataError

from qim.wire.addr import parse_addr


class HiredisPackedConnection(aioredis.Connection):
    """redis-py's asyncio connection with its commands packed by hiredis (C) instead of
    redis-py's Python packer, as redis-py's own synchronous client does when hiredis is
    installed (its HiredisRespSerializer). The Python packer re-joins its buffer per
    argument: a group record's mailbox script (an argument or two per recipient, 3,000
    for a 1,000-member group) took about 9 ms to pack, hiredis about 1 ms (docs/perf.md
    "Group fan-out, round four"). The bytes are redis-py's for str (UTF-8), bytes, int and
    float; subclasses of those are sent as their base value (redis-py sent an int
    subclass's repr, e.g. an IntEnum's "<E.A: 1>"); a bool, None or any other type is
    refused with redis-py's DataError, as redis-py's encoder does."""

    def pack_command(self, *args) -> list[bytes]:
        """[the RESP command] for `args` (pack_args)."""
        return [pack_args(args)]


def pack_args(args) -> bytes:
    """The RESP command for `args` (the first may hold a command name with spaces, e.g.
    "CONFIG GET", sent as separate words like redis-py does), packed by hiredis. DataError
    on an argument of a type redis-py refuses."""
    first = args[0]
    if isinstance(first, str):
        if " " in first:
            args = (*first.encode().split(), *args[1:])
    elif b" " in first:
        args = (*first.split(), *args[1:])
    try:
        return hiredis.pack_command(args if type(args) is tuple else tuple(args))
    except TypeError:  # hiredis takes exact str, bytes, int and float: convert, or refuse
        pass
    try:
        return hiredis.pack_command(tuple(_plain(a) for a in args))
    except TypeError as exc:
        raise DataError(f"cannot send this argument to Redis: {exc}") from None


def _plain(arg):
    """`arg` as one of the exact types hiredis packs; DataError for a bool (redis-py's rule)."""
    if isinstance(arg, bool):
        raise DataError("Invalid input of type: 'bool'. Convert to a bytes, string, int or float first.")
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return bytes(arg)
    if isinstance(arg, str):
        return str(arg)
    if isinstance(arg, int):
        return int(arg)
    if isinstance(arg, float):
        return float(arg)
    return arg


def connect(addr: str, max_connections: int = 64, wait_s: float = 5.0) -> aioredis.Redis:
    """An asyncio Redis client (hiredis parser and packer) for 'host:port'; bytes replies.

    A blocking pool: a call that finds all `max_connections` busy waits up to `wait_s`
    for one (back-pressure) instead of failing with "Too many connections", which
    redis-py's default pool does under load.
    """
    host, port = parse_addr(addr)
    pool = aioredis.BlockingConnectionPool(host=host, port=port, max_connections=max_connections, timeout=wait_s,
                                           socket_connect_timeout=2.0, health_check_interval=30,
                                           connection_class=HiredisPackedConnection)
    return aioredis.Redis(connection_pool=pool)
